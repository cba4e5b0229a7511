// The USI soak: random command sequences, valid and malformed (stop, ponderhit and gameover in
// every state among them), given to one long-lived engine. Every answer is checked by UsiReferee
// against the USI rule, and after each sequence the engine must still answer isready and play a
// legal move. JIRIKI_USI_SOAK sets the number of sequences (default 50; the issue asks 1,000:
// JIRIKI_USI_SOAK=1000 build/jiriki_tests '[soak]').
#include <catch2/catch.hpp>

#include <cstdlib>
#include <random>
#include <thread>

#include "shogi/movegen.h"
#include "tests/usi_session.h"

using namespace jiriki;
using jiriki::testing::UsiLines;
using jiriki::testing::UsiReferee;

namespace {

// A random game prefix from the start position, as USI move text.
std::vector<std::string> random_moves(std::mt19937& rng, int plies) {
  Position pos;
  std::vector<std::string> moves;
  for (int i = 0; i < plies; ++i) {
    MoveList l = legal_moves(pos);
    if (l.size() == 0) break;
    Move m = l.moves[rng() % l.size()];
    moves.push_back(move_to_usi(m));
    pos.do_move(m);
  }
  return moves;
}

std::string join(const std::vector<std::string>& w) {
  std::string s;
  for (const auto& x : w) s += " " + x;
  return s;
}

// One random command: a mix of what GUIs send and what careless scripts send.
std::string random_command(std::mt19937& rng) {
  auto pick = [&](std::initializer_list<std::string> l) { return *(l.begin() + rng() % l.size()); };
  switch (rng() % 12) {
    case 0: return pick({"stop", "stop", "ponderhit", "ponderhit", "gameover win", "gameover lose", "gameover draw"});
    case 1: return pick({"usi", "isready", "usinewgame", "foo", "", "   ", "position", "go mate soon", "go nodes -5"});
    case 2: {  // an accepted position
      std::vector<std::string> moves = random_moves(rng, int(rng() % 8));
      return "position startpos" + (moves.empty() ? "" : " moves" + join(moves));
    }
    case 3: {  // the same as an SFEN
      std::vector<std::string> moves = random_moves(rng, int(rng() % 8));
      Position pos;
      for (const auto& m : moves) pos.do_move(move_from_usi(pos, m));
      return "position sfen " + pos.sfen();
    }
    case 4: {  // a rejected position: an illegal last move, or a malformed SFEN
      std::vector<std::string> moves = random_moves(rng, int(rng() % 4));
      return pick({"position startpos moves" + join(moves) + " 5i5g",
                   "position sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL q - 1",
                   "position sfen 4k4/9/9/9/9/9/9/9/9 b - 1", "position startpos moves 7g7x",
                   "position sfen 8k/9/9/9/9/9/9/9/K8 b GGGGG 1", "position startpos junk"});
    }
    case 5: return "go nodes " + std::to_string(1 + rng() % 64);
    case 6:
      return "go btime " + std::to_string(rng() % 300) + " wtime " + std::to_string(rng() % 300) + " byoyomi " +
             std::to_string(rng() % 200);
    case 7: return pick({"go ponder btime 0 wtime 0 byoyomi 200", "go ponder", "go infinite", "go"});
    case 8: return pick({"go mate 50", "go mate infinite", "go movetime 50"});
    case 9: return pick({"go wtime abc", "go foo", "go btime", "go nodes 10 byoyomi x", "go infinite nodes abc"});
    case 10:
      return pick({"setoption name MultiPV value 2", "setoption name MultiPV value 1",
                   "setoption name USI_Ponder value false", "setoption name USI_Ponder value true",
                   "setoption name MultiPV value two", "setoption name NoSuch value 1", "setoption"});
    default: return pick({"stop", "ponderhit", "gameover lose", "position startpos", "go nodes 8"});
  }
}

}  // namespace

TEST_CASE("usi soak: random command sequences keep the USI rule and leave a working engine", "[usi][soak]") {
  const char* env = std::getenv("JIRIKI_USI_SOAK");
  const int sequences = env ? std::atoi(env) : 50;
  std::mt19937 rng(20261125);
  UsiLines lines;
  usi::Engine engine(lines.stream);
  UsiReferee referee;
  bool running = true;
  auto play = [&](const std::string& line) {
    auto err = referee.play(engine, lines, line, &running);
    INFO("command '" << line << "'");
    REQUIRE_FALSE(err);
  };
  play("setoption name ModelFile value " + jiriki::testing::tiny_model_path());
  play("setoption name MinimumThinkingTime value 0");
  play("setoption name NetworkDelay2 value 0");
  int commands = 0, bestmoves_checked = 0;
  for (int s = 0; s < sequences; ++s) {
    INFO("sequence " << s);
    const int n = 1 + int(rng() % 15);
    for (int i = 0; i < n; ++i, ++commands) play(random_command(rng));
    // Still answers isready ...
    play("isready");
    const auto& r = referee.last_replies();
    REQUIRE(std::find(r.begin(), r.end(), "readyok") != r.end());
    // ... and plays a legal move in a position of its game.
    std::vector<std::string> moves = random_moves(rng, int(rng() % 10));
    const std::string position = "position startpos" + (moves.empty() ? "" : " moves" + join(moves));
    play(position);
    play("go nodes 16");
    for (int wait = 0; wait < 1000 && referee.owed() > 0; ++wait) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      play("isready");
    }
    REQUIRE(referee.owed() == 0);
    ++bestmoves_checked;
  }
  WARN("USI soak: " << sequences << " sequences, " << commands << " random commands, " << bestmoves_checked
                    << " final moves checked legal");
}
