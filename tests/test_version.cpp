// `jiriki --version` / `jiriki version` and the engine's `isready` name the same build: the version
// CMakeLists.txt declares, the commit git reports for the source tree, and the embedded networks'
// sha256 as sha256sum computes it.
#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>

namespace {

std::string run(const std::string& cmd) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  REQUIRE(pipe);
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe.get())) out.append(buf.data(), n);
  return out;
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace

TEST_CASE("version: the line names CMake's version, git's commit and the embedded networks' hashes", "[version][cli]") {
  const std::string line = first_line(run(std::string(JIRIKI_BINARY) + " --version"));
  INFO(line);
  CHECK(line == first_line(run(std::string(JIRIKI_BINARY) + " version")));

  std::ifstream cmake(std::string(JIRIKI_SOURCE_DIR) + "/CMakeLists.txt");
  std::stringstream text;
  text << cmake.rdbuf();
  std::smatch m;
  const std::string cmakelists = text.str();
  REQUIRE(std::regex_search(cmakelists, m, std::regex(R"(project\(jiriki VERSION ([0-9.]+))")));
  CHECK(line.rfind("jiriki " + m[1].str() + " (git ", 0) == 0);

  // The commit: the abbreviated hash `git describe` put in the line is a prefix of HEAD's.
  const std::string head = first_line(run("git -C " + std::string(JIRIKI_SOURCE_DIR) + " rev-parse HEAD 2>/dev/null"));
  if (head.size() == 40) {
    REQUIRE(std::regex_search(line, m, std::regex(R"(\(git (?:.*-g)?([0-9a-f]{7,40})(?:-dirty)?\))")));
    CHECK(head.rfind(m[1].str(), 0) == 0);
  }

  for (const char* kind : {"cpu", "gpu"}) {
    const std::string net = std::string(JIRIKI_SOURCE_DIR) + "/networks/" + kind + ".jnn";
    if (!std::filesystem::exists(net)) continue;
    const std::string sha = run("sha256sum " + net).substr(0, 16);
    INFO(kind << " " << sha);
    CHECK(line.find(std::string(kind) + ".jnn " + sha) != std::string::npos);
  }
  CHECK(run(std::string(JIRIKI_BINARY) + " version extra 2>&1; echo rc=$?").find("rc=2") != std::string::npos);
}

TEST_CASE("version: the engine says the same line at isready", "[version][usi]") {
  const std::string line = first_line(run(std::string(JIRIKI_BINARY) + " --version"));
  const std::string out = run("printf 'usi\\nsetoption name Backend value cpu\\nisready\\nquit\\n' | " +
                              std::string(JIRIKI_BINARY) + " 2>&1");
  INFO(out);
  CHECK(out.find("info string " + line + "\n") != std::string::npos);
  CHECK(out.find("readyok") != std::string::npos);
}
