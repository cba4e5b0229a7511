// Catch2 entry point: initialises the attack tables once before any test runs, and leaves out the
// tests tagged [gpu] where no usable CUDA device is, saying so: they are skipped, never passed.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "nn/backend.h"
#include "shogi/position.h"

namespace {

// The exit status ctest reads as "skipped" (SKIP_RETURN_CODE in CMakeLists.txt), as Automake's.
constexpr int SKIPPED = 77;

bool needs_gpu(const Catch::TestCase& t) {
  const auto& tags = t.getTestCaseInfo().lcaseTags;
  return std::find(tags.begin(), tags.end(), "gpu") != tags.end();
}

// The test spec with "not [gpu]" added to each of its alternatives: Catch2 parses the entries one
// after another into one filter (so an entry of its own ANDs) and a "," entry starts the next
// alternative. Commas inside quotes or after a backslash belong to a name.
std::vector<std::string> without_gpu(const std::vector<std::string>& spec) {
  if (spec.empty()) return {"~[.]", "~[gpu]"};  // what runs by default (hidden tests stay out) less [gpu]
  std::vector<std::string> out;
  for (const std::string& entry : spec) {
    std::string part;
    bool quoted = false, escaped = false;
    for (char c : entry) {
      if (!escaped && c == ',' && !quoted) {
        out.insert(out.end(), {part, "~[gpu]", ","});
        part.clear();
        continue;
      }
      if (!escaped && c == '"') quoted = !quoted;
      escaped = !escaped && c == '\\';
      part += c;
    }
    out.push_back(part);
  }
  out.push_back("~[gpu]");
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  jiriki::Position::init();
  // The jiriki processes the tests start never read or write the user's files of tuned cuDNN engines
  // and of the batch tuner's step times (the tests' own evaluators and trainers keep none: a default
  // nn::CudaSettings and TrainConfig have no file).
  setenv("JIRIKI_CUDNN_CACHE", "off", 1);
  setenv("JIRIKI_TUNER_CACHE", "off", 1);
  Catch::Session session;
  if (int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  Catch::ConfigData& data = session.configData();
  const bool listing = data.listTests || data.listTestNamesOnly || data.listTags || data.listReporters;
  std::string why;
  if (!listing && jiriki::nn::cuda_device_count(&why) == 0) {
    const Catch::Config& config = session.config();
    int gpu = 0, total = 0;
    for (const Catch::TestCase& t : Catch::filterTests(Catch::getAllTestCasesSorted(config), config.testSpec(), config))
      gpu += needs_gpu(t), ++total;
    if (gpu > 0) {
      std::cout << "skipped: " << gpu << " test case" << (gpu == 1 ? "" : "s") << " tagged [gpu] (" << why << ")\n";
      if (gpu == total) return SKIPPED;
      data.testsOrTags = without_gpu(data.testsOrTags);
      session.useConfigData(data);
    }
  }
  return session.run();
}
