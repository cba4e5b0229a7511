// Games of the match referee between scripted engines (tests/data/fake_usi.sh): each engine answers
// `go` with the next line of its script, so a test decides every move and sees only the referee's
// verdict.
#pragma once
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "match/game.h"
#include "match/openings.h"
#include "tests/temp_dir.h"

namespace jiriki::match::testing {

inline const std::string FAKE = std::string(JIRIKI_SOURCE_DIR) + "/tests/data/fake_usi.sh";

// An engine running fake_usi.sh with a script of the given lines (one per ply).
inline EngineSpec fake(const jiriki::testing::TempDir& dir, const std::string& name,
                       const std::vector<std::string>& lines) {
  std::ofstream out(dir.file(name + ".script"));
  for (const auto& l : lines) out << l << "\n";
  EngineSpec spec;
  spec.name = name;
  spec.cmd = FAKE;
  spec.args = {dir.file(name + ".script")};
  return spec;
}

// The CPU lists fake engines reported in a --log traffic file (their `id author cpus LIST`), by the
// process's label ("a#0" -> {"3"}).
inline std::map<std::string, std::set<std::string>> reported_cpus(const std::string& traffic_log) {
  std::map<std::string, std::set<std::string>> reported;
  std::ifstream log(traffic_log);
  for (std::string line; std::getline(log, line);)
    if (const size_t at = line.find(" > id author cpus "); at != std::string::npos) {
      const size_t from = line.find(' ') + 1;
      reported[line.substr(from, at - from)].insert(line.substr(at + 18));
    }
  return reported;
}

// The opening of a line of an openings file; a bad line fails the test.
inline Opening opening(const std::string& line) {
  Opening o;
  REQUIRE_FALSE(parse_opening(line, o));
  return o;
}

// Generous limits: the fake engines answer at once, but a loaded test machine may stall them.
inline GameSettings fast_settings() {
  GameSettings s;
  s.tc.byoyomi_ms = 10000;
  s.timeout_ms = 20000;
  s.grace_ms = 300;
  return s;
}

// One game between two engines that both follow `lines`.
inline PlayedGame play(const std::vector<std::string>& lines, const GameSettings& settings = fast_settings(),
                       const std::string& start = "startpos") {
  jiriki::testing::TempDir dir("match_game");
  EngineSpec spec = fake(dir, "fake", lines);
  EngineProcess black(spec), white(spec);
  REQUIRE_FALSE(black.start(std::chrono::milliseconds(20000)));
  REQUIRE_FALSE(white.start(std::chrono::milliseconds(20000)));
  return play_game(black, white, opening(start), settings);
}

}  // namespace jiriki::match::testing
