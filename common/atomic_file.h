// Writing files so that a crash or Ctrl-C never leaves a half-written one: the bytes go to a
// temporary name beside the target, are flushed, and the temporary is renamed over the target.
#pragma once
#include <string>
#include <string_view>

namespace jiriki {

// Throws std::runtime_error naming the path on any failure; the target is then untouched.
void write_file_atomically(const std::string& path, std::string_view bytes);

// Appends `bytes` to the file (created when absent) whole or not at all: a write that fails (a full
// disk, a file size limit) is cut back to where it began, so the file keeps every complete record
// and no torn one. Throws std::runtime_error naming the path and the reason.
void append_to_file(const std::string& path, std::string_view bytes);

}  // namespace jiriki
