#include "training/conv_choices.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

namespace jiriki::training {

namespace {
constexpr const char* MAGIC = "jiriki-train-conv-1";

// The answers of this process, by file and key.
struct Remembered {
  std::mutex mutex;
  std::map<std::pair<std::string, std::string>, TrainConvChoices> choices;
};
Remembered& remembered() {
  static Remembered r;
  return r;
}

// cuDNN's legacy enums as of cuDNN 9: 8 forward algorithms, 6 backward data, 7 backward filter; 4
// math types. A value outside them is a damaged line.
bool plausible(const LegacyConvAlgorithms& a) {
  auto in = [](int v, int n) { return v >= 0 && v < n; };
  return in(a.forward, 8) && in(a.data, 6) && in(a.filter, 7) && in(a.forward_math, 4) && in(a.data_math, 4) &&
         in(a.filter_math, 4);
}
}  // namespace

std::string format_conv_choices(const std::string& key, const TrainConvChoices& c) {
  std::ostringstream s;
  s << MAGIC << ' ' << key;
  for (ConvRoute r : c.route) s << ' ' << int(r);
  for (const LegacyConvAlgorithms* a : {&c.stem, &c.block})
    s << ' ' << a->forward << ' ' << a->data << ' ' << a->filter << ' ' << a->forward_math << ' ' << a->data_math << ' '
      << a->filter_math;
  return s.str();
}

std::optional<TrainConvChoices> parse_conv_choices(const std::string& line, const std::string& key) {
  std::istringstream fields(line);
  std::string magic, k, extra;
  if (!(fields >> magic >> k) || magic != MAGIC || k != key) return std::nullopt;
  TrainConvChoices c;
  for (ConvRoute& r : c.route) {
    int v = -1;
    if (!(fields >> v) || v < int(ConvRoute::LEGACY) || v > int(ConvRoute::IDENTITY)) return std::nullopt;
    r = ConvRoute(v);
  }
  for (LegacyConvAlgorithms* a : {&c.stem, &c.block})
    if (!(fields >> a->forward >> a->data >> a->filter >> a->forward_math >> a->data_math >> a->filter_math) ||
        !plausible(*a))
      return std::nullopt;
  // The weight gradients and the stem go through no identity: a route the trainer never takes.
  if (c.route[STEM_FILTER] == ConvRoute::IDENTITY || c.route[BLOCK_FILTER] == ConvRoute::IDENTITY ||
      c.route[BLOCK_DATA_ADD] == ConvRoute::BARE || fields >> extra)
    return std::nullopt;
  return c;
}

std::optional<TrainConvChoices> kept_conv_choices(const std::string& path, const std::string& key) {
  Remembered& r = remembered();
  std::lock_guard lock(r.mutex);
  if (auto it = r.choices.find({path, key}); it != r.choices.end()) return it->second;
  if (path.empty()) return std::nullopt;
  std::ifstream in(path);
  std::optional<TrainConvChoices> found;
  std::string line;
  while (std::getline(in, line))
    if (auto c = parse_conv_choices(line, key)) found = c;
  if (found) r.choices[{path, key}] = *found;
  return found;
}

bool keep_conv_choices(const std::string& path, const std::string& key, const TrainConvChoices& c) {
  Remembered& r = remembered();
  std::lock_guard lock(r.mutex);
  r.choices[{path, key}] = c;
  if (path.empty() || key.find_first_of(" \t\n\r") != std::string::npos) return false;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  std::ofstream out(path, std::ios::app);
  out << format_conv_choices(key, c) << '\n';
  out.flush();
  return bool(out);
}

void forget_conv_choices() {
  Remembered& r = remembered();
  std::lock_guard lock(r.mutex);
  r.choices.clear();
}

}  // namespace jiriki::training
