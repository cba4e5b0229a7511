// Record files by extension (see record_files.h).
#include "shogi/record_files.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace fs = std::filesystem;

namespace jiriki {

RecordFormat record_format(const fs::path& p) {
  std::string e = p.extension().string();
  std::transform(e.begin(), e.end(), e.begin(), ::tolower);
  if (e == ".hcpe") return RecordFormat::HCPE;
  if (e == ".hcpe3") return RecordFormat::HCPE3;
  if (e == ".csa") return RecordFormat::CSA;
  if (e == ".kif" || e == ".kifu") return RecordFormat::KIF;
  return RecordFormat::UNKNOWN;
}

std::vector<fs::path> expand_record_inputs(const std::vector<std::string>& inputs) {
  std::vector<fs::path> files;
  for (const auto& in : inputs) {
    fs::path p(in);
    if (fs::is_directory(p)) {
      std::vector<fs::path> inside;
      for (const auto& e : fs::directory_iterator(p))
        if (e.is_regular_file() && record_format(e.path()) != RecordFormat::UNKNOWN) inside.push_back(e.path());
      std::sort(inside.begin(), inside.end());
      files.insert(files.end(), inside.begin(), inside.end());
    } else if (fs::exists(p)) {
      if (record_format(p) == RecordFormat::UNKNOWN)
        throw std::runtime_error(in + ": unknown record format (expected .hcpe, .hcpe3, .csa or .kif)");
      files.push_back(p);
    } else {
      throw std::runtime_error(in + ": no such file or directory");
    }
  }
  return files;
}

std::string read_file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + p.string());
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace jiriki
