// The operating-system calls jiriki makes beyond the C++ library, each with its POSIX and its Windows
// form in one place (platform.cpp), so that the rest of the code has no #ifdef _WIN32.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace jiriki {

// The id of this process, to make names of temporary files that no other process uses.
int process_id();

// This executable's path (to find files beside it, as engine_options.txt); empty when unknown.
std::filesystem::path executable_path();

// Where jiriki keeps what it measured on this machine for later runs (cuDNN's choices, the batch
// tuner's step times): the environment variable `variable` when set ("off": nowhere, ""), else
// $XDG_CACHE_HOME/jiriki/NAME, ~/.cache/jiriki/NAME, or on Windows %LOCALAPPDATA%\jiriki\NAME.
std::string user_cache_file(const char* variable, const std::string& name);

// The number of CPUs in this process's affinity mask (taskset, start /affinity); nullopt when unknown.
std::optional<int> affinity_cpu_count();

// The CPUs (their numbers, ascending) that the calling thread may run on, which the processes it
// starts inherit (POSIX; on Windows the process's mask); empty when unknown.
std::vector<int> affinity_cpus();

// Confines the calling thread, and the processes it starts from then on, to `cpus` (POSIX: each thread
// has its own mask, so the rest of the process keeps its CPUs). False where the system refuses it, and
// on Windows, where a child takes its parent process's mask, not its thread's.
bool set_affinity_cpus(const std::vector<int>& cpus);

// Puts standard input in binary mode where the C library has a text mode (Windows), so that a GUI's
// CRLF lines arrive whole, a 0x1A byte ends nothing, and the reader strips the '\r' itself.
void set_binary_stdin();

// Flushes an open file descriptor's data to the disk (fsync; _commit on Windows); 0 or an errno.
int sync_file_descriptor(int fd);

// Renames `from` to `to`, replacing `to` when it exists (POSIX rename does; Windows needs a flag).
// 0, or an errno-like code for std::strerror.
int replace_file(const std::string& from, const std::string& to);

// Converts text between the encodings "UTF-8" and "CP932" (Shift_JIS as Windows writes it) with
// iconv (Windows: its code pages); on failure, the byte offset in `in` of the first character that
// could not be converted (`out` then holds the text before it). Throws on an unknown encoding.
std::optional<size_t> convert_text(const char* to, const char* from, std::string_view in, std::string& out);

// Flags for ::open that keep bytes as they are (O_BINARY on Windows, nothing elsewhere).
extern const int OPEN_BINARY;

// A file opened for reading at any offset from several threads at once (pread; ReadFile at an offset
// on Windows), without a shared file position.
class ReadOnlyFile {
 public:
  // Throws std::runtime_error("cannot open WHAT PATH") when it cannot be opened.
  ReadOnlyFile(const std::string& path, const std::string& what);
  ~ReadOnlyFile();
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;

  int64_t size() const { return size_; }
  // Reads up to n bytes at offset; the count read (0 at the end of the file), or -1 on an error.
  int64_t read_at(int64_t offset, void* buf, size_t n) const;

 private:
  intptr_t handle_ = -1;  // a file descriptor, or a Windows HANDLE
  int64_t size_ = 0;
};

}  // namespace jiriki
