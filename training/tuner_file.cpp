#include "training/tuner_file.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/platform.h"

namespace jiriki::training {

namespace {
constexpr const char* MAGIC = "jiriki-tuner-1";
}

std::string tuner_file_path() { return user_cache_file("JIRIKI_TUNER_CACHE", "batch-tuner.txt"); }

std::optional<StepTimeModel> read_step_time_model(const std::string& path, const std::string& key) {
  if (path.empty()) return std::nullopt;
  std::ifstream in(path);
  std::optional<StepTimeModel> found;
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find('\t'), b = a == std::string::npos ? a : line.find('\t', a + 1);
    if (b == std::string::npos || line.compare(0, a, MAGIC) != 0 || line.compare(a + 1, b - a - 1, key) != 0) continue;
    std::istringstream fields(line.substr(b + 1));
    StepTimeModel m;
    std::string extra;
    if (!(fields >> m.alpha_c >> m.beta_c >> m.t_n >> m.gamma) || fields >> extra) continue;
    // What fit_step_time can produce: a positive step at every batch, gamma in [1, 10].
    if (!(m.alpha_c >= 0 && m.beta_c >= 0 && m.alpha_c + m.beta_c > 0 && m.t_n >= 0 && m.gamma >= 1 && m.gamma <= 10 &&
          std::isfinite(m.alpha_c + m.beta_c + m.t_n)))
      continue;
    found = m;
  }
  return found;
}

bool keep_step_time_model(const std::string& path, const std::string& key, const StepTimeModel& m) {
  if (path.empty() || key.find_first_of("\t\n\r") != std::string::npos) return false;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  std::ofstream out(path, std::ios::app);
  char numbers[128];
  std::snprintf(numbers, sizeof numbers, "\t%.9g\t%.9g\t%.9g\t%.9g\n", m.alpha_c, m.beta_c, m.t_n, m.gamma);
  out << MAGIC << '\t' << key << numbers;
  out.flush();
  return bool(out);
}

}  // namespace jiriki::training
