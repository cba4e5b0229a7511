// The command sequences the GUIs people register jiriki in send, replayed against the binary, each
// ending in the answer the GUI waits for. ShogiHome's are those of its src/background/usi/engine.ts:
// usinewgame after every readyok; `go ponder` without a clock and the clock on `ponderhit` when its
// early-ponder option is on; `stop` then `gameover` when a game ends during a search (it then drops
// exactly one bestmove); `go mate <ms>` or `go mate infinite`; in analysis, `stop` before every new
// position. ShogiGUI's and Shogidokoro's follow the USI specification Shogidokoro publishes: `go` with
// btime/wtime and byoyomi or binc/winc, `go ponder` with the clock and a bare `ponderhit`, `go
// infinite` and `stop` for analysis, `go mate` for mate problems, `gameover` and `quit`.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "shogi/movegen.h"
#include "tests/temp_dir.h"
#include "tests/usi_process.h"

using namespace jiriki;
using namespace jiriki::testing;

namespace {

// A game as the GUI keeps it: the moves so far, sent as `position startpos moves ...`.
struct GuiGame {
  Position pos;
  std::vector<Move> moves;
  std::string position() const {
    return "position startpos" + std::string(moves.empty() ? "" : " moves") + moves_text(moves);
  }
  void play(Move m) {
    pos.do_move(m);
    moves.push_back(m);
  }
};

// The handshake every GUI does, with the options its user set (the tiny network for speed).
void handshake(EngineProcess& e, const std::vector<std::string>& options) {
  e.send("usi");
  e.expect("usiok", 10000);
  e.send("setoption name USI_Hash value 256");
  e.send("setoption name USI_Ponder value true");
  e.send("setoption name ModelFile value " + tiny_model_path());
  for (const auto& o : options) e.send("setoption name " + o);
  e.send("isready");
  e.expect("readyok", 30000);
}

// A mate problem as a GUI loads one: the attacker has no king, the defender holds the other pieces.
const char* TSUME_MATE_IN_1 = "position sfen 4k4/9/4P4/9/9/9/9/9/9 b G2r2b3g4s4n4l16p 1";
const char* TSUME_NO_MATE = "position sfen 4k4/9/9/9/9/9/9/9/9 b P2r2b4g4s4n4l16p 1";

}  // namespace

TEST_CASE("gui: ShogiHome, a game with early ponder, a ponder miss and a game ended during ponder", "[usi][gui]") {
  EngineProcess e;
  handshake(e, {"NetworkDelay2 value 200", "MinimumThinkingTime value 100"});
  e.send("usinewgame");
  GuiGame g;
  const std::string clock = "btime 30000 wtime 30000 byoyomi 1000";
  e.send(g.position());
  e.send("go " + clock);
  Move ponder = MOVE_NONE;
  g.play(best_of(e.expect("bestmove", 5000), g.pos, &ponder));
  REQUIRE(ponder != MOVE_NONE);

  // Early ponder: go ponder without a clock; the clock comes with ponderhit. jiriki used to wait
  // for the next go (31 s) here.
  g.play(ponder);
  e.send(g.position());
  e.send("go ponder");
  for (auto t = Clock::now(); ms_since(t) < 300;)
    if (auto l = e.line(50)) CHECK(!l->starts_with("bestmove"));
  // 30 s left and 1 s byoyomi: the budget is the clock's (at most 30000 / 4 + 1000 ms).
  e.send("ponderhit " + clock);
  g.play(best_of(e.expect("bestmove", 8500), g.pos, &ponder));
  REQUIRE(ponder != MOVE_NONE);

  // A ponder miss: stop, the bestmove is dropped, then the real position.
  Move other = MOVE_NONE;
  for (Move m : legal_moves(g.pos))
    if (m != ponder) other = m;
  GuiGame guess = g;
  guess.play(ponder);
  e.send(guess.position());
  e.send("go ponder");
  e.send("stop");
  e.expect("bestmove", 2000);
  g.play(other);
  e.send(g.position());
  e.send("go " + clock);
  g.play(best_of(e.expect("bestmove", 8500), g.pos));  // the clock's budget, as above

  // The game ends while the engine ponders: stop then gameover; ShogiHome drops exactly one
  // bestmove, so exactly one must come.
  g.play(legal_moves(g.pos).moves[0]);
  e.send(g.position());
  e.send("go ponder");
  e.send("stop");
  e.send("gameover lose");
  std::vector<std::string> seen;
  e.send("isready");
  e.expect("readyok", 10000, &seen);
  CHECK(std::count_if(seen.begin(), seen.end(), [](const std::string& l) { return l.starts_with("bestmove"); }) == 1);

  // The next game: usinewgame after readyok, Fischer with no main time.
  e.send("usinewgame");
  e.send("position startpos");
  e.send("go btime 0 wtime 0 binc 2000 winc 2000");
  best_of(e.expect("bestmove", 3000), Position());
  e.send("gameover win");
  e.send("quit");
  CHECK(e.wait_exit(5000) == 0);
}

TEST_CASE("gui: ShogiHome, analysis with stop before each position, and mate problems", "[usi][gui]") {
  EngineProcess e;
  handshake(e, {});
  e.send("usinewgame");
  GuiGame g;
  for (int i = 0; i < 3; ++i) {
    e.send(g.position());
    e.send("go infinite");
    e.expect("info depth", 5000);
    e.send("stop");
    g.play(best_of(e.expect("bestmove", 2000), g.pos));
  }
  // Mate problems: the attacker has no king. jiriki rejected the position and answered timeout.
  e.send(TSUME_MATE_IN_1);
  e.send("go mate 10000");
  CHECK(e.expect("checkmate", 11000) == "checkmate G*5b");
  e.send(TSUME_NO_MATE);
  e.send("go mate infinite");
  CHECK(e.expect("checkmate", 11000) == "checkmate nomate");
  e.send("quit");
  CHECK(e.wait_exit(5000) == 0);
}

TEST_CASE("gui: Shogidokoro, a byoyomi game with ponder and ponderhit, then gameover", "[usi][gui]") {
  EngineProcess e;
  handshake(e, {"NetworkDelay2 value 200", "MinimumThinkingTime value 100"});
  e.send("usinewgame");
  GuiGame g;
  const std::string clock = "btime 0 wtime 0 byoyomi 1000";
  for (int ply = 0; ply < 4; ++ply) {
    e.send(g.position());
    e.send("go " + clock);
    Move ponder = MOVE_NONE;
    g.play(best_of(e.expect("bestmove", 3000), g.pos, &ponder));
    if (ponder == MOVE_NONE) break;
    g.play(ponder);
    e.send(g.position());
    e.send("go ponder " + clock);
    e.send("ponderhit");
    g.play(best_of(e.expect("bestmove", 3000), g.pos));
    g.play(legal_moves(g.pos).moves[0]);  // the opponent's answer
  }
  e.send("gameover draw");
  e.send("isready");
  e.expect("readyok", 10000);
  e.send("quit");
  CHECK(e.wait_exit(5000) == 0);
}

TEST_CASE("gui: ShogiGUI, analysis, a Fischer game and a mate problem stopped by the user", "[usi][gui]") {
  EngineProcess e;
  handshake(e, {"NetworkDelay2 value 200", "MinimumThinkingTime value 100"});
  // Analysis (go infinite, stop) of a position given as an SFEN.
  Position pos;
  REQUIRE(!pos.set_sfen("lnsgkgsnl/1r5b1/ppppppppp/9/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL w - 2"));
  e.send("position sfen " + pos.sfen());
  e.send("go infinite");
  e.expect("info depth", 5000);
  e.send("stop");
  best_of(e.expect("bestmove", 2000), pos);
  // A Fischer game: 10 s + 2 s.
  e.send("usinewgame");
  GuiGame g;
  for (int ply = 0; ply < 2; ++ply) {
    e.send(g.position());
    e.send("go btime 10000 wtime 10000 binc 2000 winc 2000");
    g.play(best_of(e.expect("bestmove", 12000), g.pos));
  }
  e.send("gameover win");
  // A mate problem, stopped before it is solved: a checkmate line still answers it.
  e.send(TSUME_NO_MATE);
  e.send("go mate infinite");
  e.send("stop");
  e.expect("checkmate", 5000);
  e.send(TSUME_MATE_IN_1);
  e.send("go mate 5000");
  CHECK(e.expect("checkmate", 6000) == "checkmate G*5b");
  e.send("quit");
  CHECK(e.wait_exit(5000) == 0);
}

TEST_CASE("gui: the names dlshogi and YaneuraOu users type, and engine_options.txt beside the executable",
          "[usi][gui]") {
  // A copy of the binary in a folder of its own, so that its engine_options.txt is the test's alone.
  TempDir dir("usi_engine_options");
  const std::filesystem::path exe = dir.path / "jiriki";
  std::filesystem::copy_file(EngineProcess::default_binary(), exe);
  auto threads_line = [](const std::vector<std::string>& info) {
    for (const auto& l : info)
      if (l.rfind("info string backend: ", 0) == 0) return l;
    return std::string("(none)");
  };
  {
    // Aliases through setoption.
    EngineProcess e(exe.string());
    e.send("usi");
    e.expect("usiok", 10000);
    e.send("setoption name DNN_Model value " + tiny_model_path());
    e.send("setoption name Backend value cpu");
    e.send("setoption name UCT_Threads value 3");
    e.send("setoption name DNN_Batch_Size value 4");
    e.send("setoption name PvInterval value 300");
    std::vector<std::string> info = e.sync();
    CHECK_THAT(threads_line(info), Catch::Contains("3 search threads"));
    for (const auto& l : info) CHECK(!l.starts_with("info string error"));
    e.send("quit");
    CHECK(e.wait_exit(5000) == 0);
  }
  {
    // The file's values replace the GUI's at isready; a bad line is named and skipped.
    std::ofstream(dir.path / "engine_options.txt") << "# set by hand\n"
                                                   << "UCT_Threads 2\n"
                                                   << "DNN_Model=" << tiny_model_path() << "\n"
                                                   << "\n"
                                                   << "setoption name Backend value cpu\n"
                                                   << "NoSuchOption 1\n";
    EngineProcess e(exe.string());
    e.send("usi");
    e.expect("usiok", 10000);
    e.send("setoption name Threads value 5");
    std::vector<std::string> info = e.sync();
    CHECK_THAT(threads_line(info), Catch::Contains("2 search threads"));
    bool named = false, counted = false;
    for (const auto& l : info) {
      named |= l.starts_with("info string error: ") && l.find("engine_options.txt line 6") != std::string::npos &&
               l.find("unknown option 'NoSuchOption'") != std::string::npos;
      counted |= l.find("engine_options.txt: 3 options set") != std::string::npos;
    }
    CHECK(named);
    CHECK(counted);
    // go depth is not supported, and says so; the go is answered all the same.
    e.send("position startpos");
    e.send("go depth 5");
    std::vector<std::string> seen;
    best_of(e.expect("bestmove", 5000, &seen), Position());
    REQUIRE(!seen.empty());
    CHECK_THAT(seen[0], Catch::StartsWith("info string error: go: depth is not supported"));
    e.send("quit");
    CHECK(e.wait_exit(5000) == 0);
  }
}
