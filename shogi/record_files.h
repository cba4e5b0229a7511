// Finding and reading record files by their extension: shared by the subcommands that read games
// (`jiriki records`, `jiriki book build`).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace jiriki {

enum class RecordFormat { HCPE, HCPE3, CSA, KIF, UNKNOWN };

// The format a file name says: .hcpe, .hcpe3, .csa, .kif or .kifu (any case).
RecordFormat record_format(const std::filesystem::path& p);

// The files named, with directories expanded to the record files directly inside them (sorted).
// Throws std::runtime_error for a missing path or a file of unknown format.
std::vector<std::filesystem::path> expand_record_inputs(const std::vector<std::string>& inputs);

// The whole file; throws std::runtime_error when it cannot be read.
std::string read_file_bytes(const std::filesystem::path& p);

}  // namespace jiriki
