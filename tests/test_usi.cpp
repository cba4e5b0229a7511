// The USI engine as a GUI sees it: the jiriki binary runs as a child process on pipes
// (tests/usi_process.h), and each test plays a scripted session. Moves the engine plays are checked
// with the rules core.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "common/cpus.h"
#include "engine/network_setup.h"
#include "engine/search/search.h"
#include "nn/model_file.h"
#include "nn/shipped_networks.h"
#include "shogi/movegen.h"
#include "tests/usi_process.h"

using namespace jiriki;
using namespace jiriki::testing;

TEST_CASE("usi: handshake announces every option and isready loads the network", "[usi]") {
  EngineProcess e;
  e.send("usi");
  std::vector<std::string> seen;
  e.expect("usiok", 10000, &seen);
  REQUIRE(seen.size() > 2);
  CHECK(seen[0] == "id name jiriki");
  CHECK(seen[1].rfind("id author ", 0) == 0);
  for (const char* name : {"USI_Hash",
                           "USI_Ponder",
                           "Threads",
                           "ModelFile",
                           "Backend",
                           "GPU",
                           "BatchSize",
                           "MultiPV",
                           "NetworkDelay",
                           "NetworkDelay2",
                           "MinimumThinkingTime",
                           "SlowMover",
                           "ResignValue",
                           "Resign_Threshold",
                           "DrawValueBlack",
                           "DrawValueWhite",
                           "MaxMovesToDraw",
                           "EnteringKingRule",
                           "C_init",
                           "C_base",
                           "C_fpu_reduction",
                           "Softmax_Temperature",
                           "LeafMateSearchPly",
                           "RootMateSearch",
                           "RootThreatSearch"}) {
    bool found = false;
    for (const auto& l : seen) found |= l.rfind(std::string("option name ") + name + " type ", 0) == 0;
    INFO("option " << name);
    CHECK(found);
  }
  // Aliases are taken by setoption but not announced: a GUI would show each option twice.
  for (const char* alias : {"DNN_Model", "DNN_Batch_Size", "UCT_Threads", "PvInterval"})
    for (const auto& l : seen) CHECK(l.find(std::string(" ") + alias + " ") == std::string::npos);
  // The PUCT options' defaults (hundredths) are the search's own, which self-play and `jiriki play`
  // use: the two must not drift apart.
  const search::SearchParams params;
  for (auto [name, value] : {std::pair{"C_init", params.c_init}, std::pair{"C_base", params.c_base},
                             std::pair{"C_fpu_reduction", params.fpu_reduction},
                             std::pair{"Softmax_Temperature", params.softmax_temperature}}) {
    const float scale = std::string(name) == "C_base" ? 1.0f : 100.0f;
    const std::string prefix = std::string("option name ") + name + " type spin default ";
    std::optional<long> announced;
    for (const auto& l : seen)
      if (l.rfind(prefix, 0) == 0) announced = std::stol(l.substr(prefix.size()));
    INFO("option " << name);
    REQUIRE(announced);
    CHECK(*announced == std::lround(value * scale));
  }
  // The default network is the shipped one for the backend (the CPU's here, or a GPU's), or the
  // untrained stand-in in a build that ships none; the engine says which.
  std::vector<std::string> info = e.sync();
  const bool shipped = nn::shipped_network(false).has_value();
  bool said = false;
  for (const auto& l : info)
    said |= l.find(shipped ? "network: the shipped networks/" : "UNTRAINED") != std::string::npos;
  CHECK(said);
  e.send("quit");
  CHECK(e.wait_exit(5000) == 0);
}

TEST_CASE("usi: docs/usi.md lists every option with the type, default and range the engine announces", "[usi]") {
  std::ifstream doc_file(std::string(JIRIKI_SOURCE_DIR) + "/docs/usi.md");
  REQUIRE(doc_file);
  std::vector<std::string> rows;  // the option tables' rows, by the option's name
  for (std::string l; std::getline(doc_file, l);)
    if (l.starts_with("| `")) rows.push_back(l);
  EngineProcess e;
  e.send("usi");
  std::vector<std::string> seen;
  e.expect("usiok", 10000, &seen);
  int options = 0;
  for (const auto& l : seen) {
    if (!l.starts_with("option name ")) continue;
    ++options;
    // option name N type T default D [min A max B] [var V ...]
    const std::vector<std::string> w = split(l);
    REQUIRE(w.size() >= 6);
    std::string expected = "| `" + w[2] + "` | " + w[4] + " | `" + w[6] + "` |";
    if (w[4] == "spin") expected += " " + w[8] + " to " + w[10] + " |";
    if (w[4] == "combo") {
      std::string vars;
      for (size_t i = 7; i + 1 < w.size(); i += 2) vars += (vars.empty() ? "" : ", ") + w[i + 1];
      expected += " " + vars + " |";
    }
    INFO(l);
    CHECK(std::count_if(rows.begin(), rows.end(), [&](const std::string& r) { return r.starts_with(expected); }) == 1);
  }
  // And nothing more: one row per option, one per alias (those rows start "| `ALIAS` | `OPTION` |").
  int alias_rows = 0;
  for (const auto& r : rows)
    alias_rows += r.find("` | `") != std::string::npos && r.find(" | type") == std::string::npos &&
                  std::count(r.begin(), r.end(), '|') == 3;
  CHECK(int(rows.size()) == options + alias_rows);
  e.send("quit");
  CHECK(e.wait_exit(5000) == 0);
}

TEST_CASE("usi: Threads 0 picks the search threads for the backend; a number is taken as it is", "[usi]") {
  // The line `info string backend: ..., N search threads` that isready prints.
  auto threads_line = [](const std::vector<std::string>& info) {
    for (const auto& l : info)
      if (l.rfind("info string backend: ", 0) == 0) return l;
    return std::string("(none)");
  };
  EngineProcess e;
  e.send("usi");
  std::vector<std::string> seen;
  e.expect("usiok", 10000, &seen);
  bool announced = false;
  for (const auto& l : seen) announced |= l == "option name Threads type spin default 0 min 0 max 256";
  CHECK(announced);
  e.send("setoption name ModelFile value " + tiny_model_path());
  e.send("setoption name Backend value cpu");
  const int cpus = usable_cpus().count;
  CHECK_THAT(threads_line(e.sync()),
             Catch::EndsWith(", " + std::to_string(std::min(2, cpus)) + " search threads"));  // the CPU default
  e.send("setoption name Threads value 3");
  CHECK_THAT(threads_line(e.sync()), Catch::EndsWith(", 3 search threads"));
  e.send("quit");
  CHECK(e.wait_exit(5000) == 0);
}

TEST_CASE("usi: pinned to one CPU, Threads 0 starts one search thread of one oneDNN thread, and says why", "[usi]") {
  // Pinned to 1 core of a 2-core machine it started 2 search threads; pinned to 2 cores of 64, 32
  // oneDNN threads per search thread.
  EngineProcess e(EngineProcess::default_binary(), 1);
  e.send("usi");
  e.expect("usiok", 10000);
  e.send("setoption name ModelFile value " + tiny_model_path());
  e.send("setoption name Backend value cpu");
  const std::vector<std::string> info = e.sync();
  bool cpus = false, backend = false;
  for (const auto& l : info) {
    cpus |= l.starts_with("info string CPUs: 1 (1 of ") && l.find(" in the affinity mask") != std::string::npos;
    backend |= l.starts_with("info string backend: ") && l.find(" 1 threads") != std::string::npos &&
               l.ends_with(", 1 search threads");
  }
  INFO(e.transcript());
  CHECK(cpus);
  CHECK(backend);
  e.send("quit");
  CHECK(e.wait_exit(5000) == 0);
}

TEST_CASE("usi: LeafMateSearchPly auto is 3 plies on a CPU backend, and says so at isready", "[usi]") {
  EngineProcess e;
  e.send("usi");
  std::vector<std::string> seen;
  e.expect("usiok", 10000, &seen);
  bool announced = false;
  for (const auto& l : seen)
    announced |= l == "option name LeafMateSearchPly type combo default auto var auto var 0 var 1 var 3 var 5";
  CHECK(announced);
  e.send("setoption name ModelFile value " + tiny_model_path());
  e.send("setoption name Backend value cpu");
  const auto info = e.sync();
  CHECK(std::find(info.begin(), info.end(), "info string leaf mate search 3 plies") != info.end());
  e.expect_error("setoption name LeafMateSearchPly value 2", "one of");
  e.send("quit");
  CHECK(e.wait_exit(5000) == 0);
}

TEST_CASE("usi: bad input gets an info string error and the engine stays usable", "[usi]") {
  EngineProcess e;
  start(e);
  e.expect_error("foo bar", "unknown command 'foo'");
  {
    // A 1 MB garbage line is not echoed back in full (it was).
    e.send(std::string(1 << 20, 'x'));
    const std::vector<std::string> seen = e.sync();
    REQUIRE(seen.size() == 1);
    CHECK(seen[0].size() < 400);
    CHECK_THAT(seen[0], Catch::StartsWith("info string error: unknown command 'xxx") &&
                            Catch::EndsWith("(1048594 characters, cut)"));
  }
  e.expect_error("setoption name USI_Hash value 0", "out of range");
  e.expect_error("setoption name Threads value 100000", "out of range");
  e.expect_error("setoption name MultiPV value two", "integer");
  e.expect_error("setoption name USI_Ponder value maybe", "true or false");
  e.expect_error("setoption name Backend value tpu", "one of");
  e.expect_error("setoption name NoSuchOption value 1", "unknown option");
  e.expect_error("setoption", "expected");
  e.expect_error("position", "expected");
  e.expect_error("position sfen lnsgkgsnl/9 b - 1", "");
  e.expect_error("position sfen", "");
  e.expect_error("position startpos moves 7g7f 7g7f", "illegal move '7g7f'");
  e.expect_error("position startpos moves 7g7x", "malformed move");
  e.expect_error("position startpos moves 7g7f xyz", "malformed move");
  // A go mate that cannot be read is still answered: the GUI waits for its checkmate line.
  for (const char* bad : {"go mate", "go mate soon"}) {
    e.send(bad);
    std::vector<std::string> seen;
    CHECK(e.expect("checkmate", 5000, &seen) == "checkmate timeout");
    REQUIRE(seen.size() == 1);
    CHECK_THAT(seen[0], Catch::StartsWith("info string error: go mate: expected a time"));
  }
  e.send("");  // blank lines are ignored
  e.send("   ");
  e.sync();

  e.send("position startpos moves 7g7f");
  e.expect_error("position startpos moves 7g7f 3c3d 2g2f 2g2f", "illegal move");
  e.send("position startpos moves 7g7f");
  e.send("go nodes 100");
  Position pos;
  pos.do_move(move_from_usi(pos, "7g7f"));
  best_of(e.expect("bestmove", 20000), pos);

  // A malformed go parameter is reported; the search still runs and answers.
  e.send("go nodes abc btime 1000 wtime 1000 byoyomi 500");
  std::vector<std::string> seen;
  best_of(e.expect("bestmove", 5000, &seen), pos);
  CHECK(seen.at(0).rfind("info string error: go: nodes needs a non-negative integer", 0) == 0);

  // stop, ponderhit and gameover with nothing running do nothing.
  e.send("stop");
  e.send("ponderhit");
  e.send("gameover draw");
  CHECK(e.sync().empty());
  e.send("quit");
  CHECK(e.wait_exit(5000) == 0);
}

TEST_CASE("usi: a game with ponder and ponderhit then a ponder miss then gameover and quit", "[usi][time]") {
  EngineProcess e;
  start(e, {"USI_Ponder value true", "NetworkDelay2 value 200", "MinimumThinkingTime value 100"});
  e.send("usinewgame");
  Position pos;
  std::vector<Move> game;
  const std::string clock = " btime 0 wtime 0 byoyomi 1000";

  auto think = [&](const std::string& go) {
    e.send("position startpos" + std::string(game.empty() ? "" : " moves") + moves_text(game));
    e.send(go);
  };
  // The engine moves and predicts the reply.
  think("go" + clock);
  Move ponder;
  Move m = best_of(e.expect("bestmove", 5000), pos, &ponder);
  REQUIRE(ponder != MOVE_NONE);
  pos.do_move(m);
  game.push_back(m);

  // It ponders on the predicted reply; the opponent plays it: ponderhit.
  game.push_back(ponder);
  think("go ponder" + clock);
  for (auto t = Clock::now(); ms_since(t) < 700;)  // no answer while pondering
    if (auto l = e.line(50)) CHECK(!l->starts_with("bestmove"));
  auto t0 = Clock::now();
  e.send("ponderhit");
  pos.do_move(ponder);
  m = best_of(e.expect("bestmove", 2000), pos, &ponder);
  CHECK(ms_since(t0) < 1000);  // within the byoyomi
  pos.do_move(m);
  game.push_back(m);
  REQUIRE(ponder != MOVE_NONE);

  // A ponder miss: the opponent plays something else; the GUI stops the ponder search, ignores
  // its bestmove, and asks again.
  Move other = MOVE_NONE;
  for (Move x : legal_moves(pos))
    if (x != ponder) other = x;
  game.push_back(ponder);
  think("go ponder" + clock);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  t0 = Clock::now();
  e.send("stop");
  e.expect("bestmove", 1000);
  CHECK(ms_since(t0) < 300);
  game.back() = other;
  pos.do_move(other);
  think("go" + clock);
  m = best_of(e.expect("bestmove", 3000), pos);

  // The game ends while the engine ponders: no bestmove is owed after gameover.
  pos.do_move(m);
  game.push_back(m);
  game.push_back(legal_moves(pos).moves[0]);
  think("go ponder" + clock);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  e.send("gameover lose");
  for (const auto& l : e.sync()) CHECK(!l.starts_with("bestmove"));
  e.send("usinewgame");
  e.send("position startpos");
  e.send("go nodes 50");
  best_of(e.expect("bestmove", 5000), Position());
  e.send("quit");
  CHECK(e.wait_exit(5000) == 0);
}

TEST_CASE("usi: go infinite reports info lines and stops promptly", "[usi]") {
  EngineProcess e;
  start(e, {"MultiPV value 3"});
  e.send("position startpos moves 7g7f");
  e.send("go infinite");
  auto t0 = Clock::now();
  std::vector<std::string> seen;
  while (ms_since(t0) < 700) {
    auto l = e.line(100);
    if (l) seen.push_back(*l);
  }
  for (const auto& l : seen) CHECK(!l.starts_with("bestmove"));
  // Info lines carry every field, with multipv 1..3 and a legal pv.
  int multipv_seen = 0;
  Position pos;
  pos.do_move(move_from_usi(pos, "7g7f"));
  for (const auto& l : seen) {
    if (!l.starts_with("info depth")) continue;
    std::vector<std::string> w = split(l);
    for (const char* k : {"seldepth", "time", "nodes", "nps", "hashfull", "multipv", "score", "pv"})
      CHECK(std::find(w.begin(), w.end(), k) != w.end());
    auto pv = std::find(w.begin(), w.end(), "pv");
    Position p = pos;
    for (auto it = pv + 1; it != w.end(); ++it) {
      Move m = move_from_usi(p, *it);
      REQUIRE(p.is_legal(m));
      p.do_move(m);
    }
    auto mp = std::find(w.begin(), w.end(), "multipv");
    if (mp != w.end()) multipv_seen = std::max(multipv_seen, std::stoi(*(mp + 1)));
    auto sc = std::find(w.begin(), w.end(), "score");
    CHECK((*(sc + 1) == "cp" || *(sc + 1) == "mate"));
  }
  CHECK(multipv_seen == 3);
  t0 = Clock::now();
  e.send("stop");
  best_of(e.expect("bestmove", 1000), pos);
  CHECK(ms_since(t0) < 300);
  // A GUI that sends the next position and go right after stop, without waiting for bestmove,
  // gets both answers in order.
  e.send("go infinite");
  e.send("stop");
  e.send("position startpos");
  e.send("go infinite");
  e.send("stop");
  best_of(e.expect("bestmove", 1000), pos);
  best_of(e.expect("bestmove", 1000), Position());
  e.send("quit");
  CHECK(e.wait_exit(5000) == 0);
}

TEST_CASE("usi: declaration and resignation and go mate", "[usi]") {
  EngineProcess e;
  start(e);
  // A valid 27-point declaration: bestmove win at once.
  e.send("position sfen +P+P+PS1S+P+P+P/1R2K2B1/9/9/9/9/9/9/4k4 b 10P 1");
  e.send("go btime 10000 wtime 10000 byoyomi 1000");
  auto t0 = Clock::now();
  CHECK(e.expect("bestmove", 2000) == "bestmove win");
  CHECK(ms_since(t0) < 500);
  // Checkmated: nothing to play.
  e.send("position sfen 4k4/4G4/4P4/9/9/9/9/9/4K4 w - 1");
  e.send("go btime 10000 wtime 10000 byoyomi 1000");
  CHECK(e.expect("bestmove", 2000) == "bestmove resign");
  // go mate: a mate in 1 and a position without a mate.
  e.send("position sfen 4k4/9/4P4/9/9/9/9/9/4K4 b G 1");
  e.send("go mate 5000");
  CHECK(e.expect("checkmate", 6000) == "checkmate G*5b");
  e.send("position sfen 4k4/9/9/9/9/9/9/9/4K4 b P 1");
  e.send("go mate infinite");
  CHECK(e.expect("checkmate", 6000) == "checkmate nomate");
  // go nodes: the last info line before bestmove counts exactly that many playouts.
  e.send("position startpos");
  e.send("go nodes 300");
  std::vector<std::string> seen;
  best_of(e.expect("bestmove", 10000, &seen), Position());
  REQUIRE(!seen.empty());
  std::vector<std::string> w = split(seen.back());
  auto nodes = std::find(w.begin(), w.end(), "nodes");
  REQUIRE(nodes != w.end());
  CHECK(*(nodes + 1) == "300");
  // go movetime 500: 500 ms less NetworkDelay (120 ms).
  e.send("go movetime 500");
  t0 = Clock::now();
  best_of(e.expect("bestmove", 2000), Position());
  CHECK(ms_since(t0) >= 350);
  CHECK(ms_since(t0) < 500);
  // ResignValue is YaneuraOu's, in centipawns: 1000 resigns at -1000 or below, which the start
  // position is far from. Resign_Threshold is dlshogi's, a win rate per mille: at 1000 no unproven
  // position is worth that much.
  e.send("setoption name ResignValue value 1000");
  e.send("go nodes 100");
  CHECK(e.expect("bestmove", 10000) != "bestmove resign");
  e.send("setoption name Resign_Threshold value 1000");
  e.send("go nodes 100");
  CHECK(e.expect("bestmove", 10000) == "bestmove resign");
  e.send("quit");
  CHECK(e.wait_exit(5000) == 0);
}

namespace {

// Two engines play each other from the start position under a clock, as a GUI would run them,
// for at most max_plies. The GUI's clock: the time from sending go to reading bestmove is charged
// to the mover, whose clock gets the increment as the move starts (as YaneuraOu reads binc/winc).
// Returns each move's elapsed time and the time it was allowed.
struct TimedMove {
  int64_t elapsed, allowed;
};
std::vector<TimedMove> play_clocked_game(int64_t time_ms, int64_t inc_ms, int64_t byoyomi_ms, int max_plies,
                                         const std::vector<std::string>& options) {
  EngineProcess engines[2];
  for (auto& e : engines) {
    start(e, options);
    e.send("usinewgame");
  }
  int64_t left[2] = {time_ms, time_ms};
  Position pos;
  std::vector<Move> game;
  std::vector<TimedMove> record;
  for (int ply = 0; ply < max_plies && legal_moves(pos).size() > 0; ++ply) {
    const int side = pos.side_to_move();
    EngineProcess& e = engines[side];
    e.send("position startpos" + std::string(game.empty() ? "" : " moves") + moves_text(game));
    std::ostringstream go;
    go << "go btime " << left[0] << " wtime " << left[1];
    if (byoyomi_ms > 0) go << " byoyomi " << byoyomi_ms;
    else go << " binc " << inc_ms << " winc " << inc_ms;
    auto t0 = Clock::now();
    e.send(go.str());
    const int64_t allowed = left[side] + inc_ms + byoyomi_ms;
    std::string line = e.expect("bestmove", allowed + 5000);
    const int64_t elapsed = ms_since(t0);
    record.push_back({elapsed, allowed});
    INFO("ply " << ply << ": " << line << " after " << elapsed << " ms of " << allowed);
    REQUIRE(elapsed <= allowed);  // no time loss
    left[side] = std::max<int64_t>(left[side] + inc_ms - elapsed, 0);
    if (line == "bestmove resign" || line == "bestmove win") break;
    Move m = best_of(line, pos);
    pos.do_move(m);
    game.push_back(m);
  }
  for (auto& e : engines) {
    e.send("gameover draw");
    e.send("quit");
    CHECK(e.wait_exit(5000) == 0);
  }
  return record;
}

}  // namespace

TEST_CASE("usi: no time loss at byoyomi 1000 ms over a game against itself", "[usi][time]") {
  // NetworkDelay2 200: the engine may think until 800 ms into each byoyomi period.
  auto record = play_clocked_game(0, 0, 1000, 24, {"NetworkDelay2 value 200"});
  REQUIRE(record.size() >= 10);
  int64_t worst = 0;
  for (const auto& m : record) worst = std::max(worst, m.elapsed);
  WARN("byoyomi 1000 ms: " << record.size() << " moves, slowest " << worst << " ms");
  CHECK(worst < 1000);
  CHECK(worst >= 500);  // and it does use the time it has
}

TEST_CASE("usi: no time loss at 10 s + 1 s per move over a game against itself", "[usi][time]") {
  auto record = play_clocked_game(10000, 1000, 0, 24, {"NetworkDelay2 value 200", "MinimumThinkingTime value 500"});
  REQUIRE(record.size() >= 10);
  int64_t worst_margin = 1 << 30;
  for (const auto& m : record) worst_margin = std::min(worst_margin, m.allowed - m.elapsed);
  WARN("10 s + 1 s: " << record.size() << " moves, smallest margin left on the clock " << worst_margin << " ms");
  CHECK(worst_margin > 0);
}

TEST_CASE("usi: Fischer with no main time uses the increment and loses no time", "[usi][time]") {
  // go btime 0 wtime 0 binc 2000 winc 2000 was answered after 18 ms at depth 1. NetworkDelay2 1000:
  // about a second of each increment is used; the rest builds up the clock.
  auto record = play_clocked_game(0, 2000, 0, 8, {"NetworkDelay2 value 1000"});
  REQUIRE(record.size() == 8);
  int64_t worst_margin = 1 << 30, quickest = 1 << 30;
  for (const auto& m : record) {
    worst_margin = std::min(worst_margin, m.allowed - m.elapsed);
    quickest = std::min(quickest, m.elapsed);
  }
  WARN("0 s + 2 s: " << record.size() << " moves, quickest " << quickest << " ms, smallest margin " << worst_margin
                     << " ms");
  CHECK(worst_margin > 0);
  CHECK(quickest >= 700);  // it does think
}

// Issue 18, bug 1: a malformed clock value must not leave a search running. The go is still
// answered by one bestmove, and the next position + go is served, not refused.
TEST_CASE("usi: go with a malformed clock value is answered and leaves no search behind", "[usi][state]") {
  EngineProcess e;
  start(e);
  e.send("position startpos");
  e.send("go wtime abc");
  std::vector<std::string> seen;
  best_of(e.expect("bestmove", 5000, &seen), Position());
  REQUIRE(!seen.empty());
  CHECK_THAT(seen[0], Catch::StartsWith("info string error: go: wtime needs a non-negative integer"));
  e.send("position startpos moves 7g7f");
  e.send("go nodes 50");
  seen.clear();
  Position pos;
  pos.do_move(move_from_usi(pos, "7g7f"));
  best_of(e.expect("bestmove", 5000, &seen), pos);
  for (const auto& l : seen) CHECK(l.find("error") == std::string::npos);
  CHECK(e.sync().empty());  // exactly one bestmove each: nothing more is owed
  e.send("quit");
  CHECK(e.wait_exit(5000) == 0);
}

// Issue 18, bug 2: after a rejected position (or none at all) there is no position to play in:
// go answers bestmove resign and says why, never a move of an older position.
TEST_CASE("usi: go after a rejected position or none resigns and says why", "[usi][state]") {
  EngineProcess e;
  start(e);
  e.send("go nodes 50");  // no position yet
  std::vector<std::string> seen;
  CHECK(e.expect("bestmove", 5000, &seen) == "bestmove resign");
  REQUIRE(seen.size() == 1);
  CHECK_THAT(seen[0], Catch::StartsWith("info string") && Catch::Contains("no position"));

  e.send("position startpos moves 7g7f");
  e.send("position sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL q - 1");
  e.send("go nodes 50");
  seen.clear();
  CHECK(e.expect("bestmove", 5000, &seen) == "bestmove resign");
  REQUIRE(seen.size() == 2);
  CHECK_THAT(seen[0], Catch::StartsWith("info string error: position:") && Catch::Contains("side to move"));
  CHECK_THAT(seen[1], Catch::StartsWith("info string") && Catch::Contains("rejected"));

  // The next accepted position is played again.
  e.send("position startpos moves 7g7f");
  e.send("go nodes 50");
  Position pos;
  pos.do_move(move_from_usi(pos, "7g7f"));
  best_of(e.expect("bestmove", 5000), pos);
  e.send("quit");
  CHECK(e.wait_exit(5000) == 0);
}

TEST_CASE("usi: a book position is answered from the book; the book options reach the choice", "[usi][book]") {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("jiriki_test_usi_book_" + std::to_string(getpid()) + ".db")).string();
  std::ofstream(path) << "#YANEURAOU-DB2016 1.00\n"
                         "sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1\n"
                         "7g7f 3c3d 50 32 10\n";
  EngineProcess e;
  start(e, {"BookFile value " + path});
  auto book_go = [&](const std::string& go) {
    e.send("position startpos");
    e.send(go);
    std::vector<std::string> seen;
    std::string best = e.expect("bestmove", 30000, &seen);
    bool said = false;
    for (const auto& l : seen) said |= l.rfind("info string book move 7g7f", 0) == 0;
    return std::make_pair(best, said);
  };
  CHECK(book_go("go btime 0 wtime 0 byoyomi 1000") == std::make_pair(std::string("bestmove 7g7f ponder 3c3d"), true));
  e.send("setoption name USI_Ponder value false");
  CHECK(book_go("go nodes 10") == std::make_pair(std::string("bestmove 7g7f"), true));
  e.send("setoption name USI_OwnBook value false");  // searched: no book line
  CHECK(book_go("go nodes 10").second == false);
  e.send("setoption name USI_OwnBook value true");
  e.send("setoption name BookOnTheFly value true");
  std::vector<std::string> ready = e.sync();
  REQUIRE(ready.size() == 1);
  CHECK_THAT(ready[0], Catch::Contains("read on the fly"));
  CHECK(book_go("go nodes 10") == std::make_pair(std::string("bestmove 7g7f"), true));
  e.send("setoption name BookMoves value 0");
  CHECK(book_go("go nodes 10").second == false);
  // A bad book is reported at isready and the engine plays on without one.
  e.send("setoption name BookFile value /nonexistent/book.db");
  ready = e.sync();
  REQUIRE(ready.size() == 1);
  CHECK_THAT(ready[0], Catch::Contains("info string error: book not used: cannot open book /nonexistent/book.db"));
  e.send("quit");
  CHECK(e.wait_exit(5000) == 0);
  std::filesystem::remove(path);
}

TEST_CASE("usi: the shipped networks are the files of networks/, embedded whole", "[usi][network]") {
  for (bool gpu : {false, true}) {
    const std::string path = std::string(JIRIKI_SOURCE_DIR) + (gpu ? "/networks/gpu.jnn" : "/networks/cpu.jnn");
    const auto net = nn::shipped_network(gpu);
    INFO(path);
    REQUIRE(net.has_value() == std::filesystem::exists(path));
    if (!net) continue;
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    REQUIRE(net->size == bytes.size());
    CHECK(std::equal(bytes.begin(), bytes.end(), reinterpret_cast<const char*>(net->data)));
    // And it is what `ModelFile <default>` plays with on the CPU backend.
    if (!gpu) {
      engine::NetworkSettings cpu;
      cpu.backend = "cpu";
      CHECK(nn::serialize_model(engine::NetworkSetup::resolve(cpu).load_model()) ==
            nn::serialize_model(nn::load_model(path)));
    }
  }
}
