// The USI state machine in this process: every command in every state (idle, thinking, pondering),
// checked for the state it leaves, the bestmoves it releases, and that afterwards every go has had
// exactly one bestmove, legal in the position of the last accepted `position` (or resign when there
// is none).
#include <catch2/catch.hpp>

#include "shogi/movegen.h"
#include "tests/usi_session.h"
#include "usi/engine.h"

using namespace jiriki;
using jiriki::testing::UsiLines;
using usi::State;

namespace {

const State IDLE = State::IDLE, THINKING = State::THINKING, PONDERING = State::PONDERING;

// An engine with the tiny network, loaded.
struct Session {
  UsiLines lines;
  usi::Engine engine{lines.stream};
  Session() {
    engine.command("setoption name ModelFile value " + jiriki::testing::tiny_model_path());
    engine.command("setoption name MinimumThinkingTime value 0");
    engine.command("isready");
    for (;;) {
      auto l = lines.next(30000);
      REQUIRE(l);
      if (*l == "readyok") break;
    }
  }
  // The lines written so far.
  std::vector<std::string> drain() { return lines.drain(); }
};

int count_prefix(const std::vector<std::string>& lines, const std::string& prefix) {
  int n = 0;
  for (const auto& l : lines) n += l.rfind(prefix, 0) == 0;
  return n;
}

// Checks a bestmove line: a legal move of `pos`, or resign when `pos` is absent.
void check_bestmove(const std::string& line, const std::optional<Position>& pos) {
  INFO(line);
  REQUIRE(line.rfind("bestmove ", 0) == 0);
  std::string move = line.substr(9, line.find(' ', 9) == std::string::npos ? std::string::npos : line.find(' ', 9) - 9);
  if (!pos) {
    CHECK(move == "resign");
    return;
  }
  INFO("in " << pos->sfen());
  Move m = move_from_usi(*pos, move);
  CHECK(m != MOVE_NONE);
  CHECK(pos->is_legal(m));
}

Position after_7g7f() {
  Position p;
  p.do_move(move_from_usi(p, "7g7f"));
  return p;
}

struct Row {
  const char* command;
  State after[3];     // the state left, from idle, thinking, pondering
  int bestmoves[3];   // bestmove lines the command releases (the running search's answer)
  const char* reply;  // a line the command must write (prefix), or "" for none required
};

// The table: each command's effect in each state, as engine.cpp's command() says it.
const Row ROWS[] = {
    {"usi", {IDLE, THINKING, PONDERING}, {0, 0, 0}, "usiok"},
    {"isready", {IDLE, THINKING, PONDERING}, {0, 0, 0}, "readyok"},
    {"setoption name MultiPV value 2", {IDLE, THINKING, PONDERING}, {0, 0, 0}, ""},
    {"setoption name MultiPV value two", {IDLE, THINKING, PONDERING}, {0, 0, 0}, "info string error: option MultiPV"},
    {"usinewgame", {IDLE, IDLE, IDLE}, {0, 1, 1}, ""},
    {"position startpos moves 7g7f", {IDLE, THINKING, PONDERING}, {0, 0, 0}, ""},
    {"position sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL q - 1",
     {IDLE, THINKING, PONDERING},
     {0, 0, 0},
     "info string error: position:"},
    {"position startpos moves 7g7f 7g7f", {IDLE, THINKING, PONDERING}, {0, 0, 0}, "info string error: position:"},
    {"go infinite", {THINKING, THINKING, THINKING}, {0, 1, 1}, ""},
    {"go ponder btime 0 wtime 0 byoyomi 10000", {PONDERING, PONDERING, PONDERING}, {0, 1, 1}, ""},
    {"stop", {IDLE, IDLE, IDLE}, {0, 1, 1}, ""},
    {"ponderhit", {IDLE, THINKING, THINKING}, {0, 0, 0}, ""},
    {"gameover win", {IDLE, IDLE, IDLE}, {0, 0, 0}, ""},
    {"quit", {IDLE, IDLE, IDLE}, {0, 1, 1}, ""},
    {"foo", {IDLE, THINKING, PONDERING}, {0, 0, 0}, "info string error: unknown command 'foo'"},
    {"", {IDLE, THINKING, PONDERING}, {0, 0, 0}, ""},
};

}  // namespace

TEST_CASE("usi states: every command in every state", "[usi][state]") {
  const char* enter[3] = {nullptr, "go infinite", "go ponder btime 0 wtime 0 byoyomi 10000"};
  for (const Row& row : ROWS) {
    for (int s = 0; s < 3; ++s) {
      const State from = State(s);
      DYNAMIC_SECTION(usi::state_name(from) << ": '" << row.command << "'") {
        Session e;
        e.engine.command("position startpos");
        std::optional<Position> pos = Position();  // the last accepted position
        std::vector<std::optional<Position>> gos;  // the position of each go, in order
        if (enter[s]) {
          e.engine.command(enter[s]);
          gos.push_back(pos);
        }
        REQUIRE(e.engine.state() == from);
        e.drain();

        const bool running = e.engine.command(row.command);
        CHECK(running == (std::string(row.command) != "quit"));
        std::vector<std::string> out = e.drain();
        INFO("replies: " << out.size());
        CHECK(e.engine.state() == row.after[s]);
        CHECK(count_prefix(out, "bestmove") == row.bestmoves[s]);
        if (*row.command == 0) CHECK(out.empty());
        if (*row.reply) CHECK(count_prefix(out, row.reply) == 1);

        // Bring every answer in: what is owed now comes at stop.
        const std::string cmd = row.command;
        if (cmd.rfind("position", 0) == 0)
          pos = cmd.find("moves 7g7f 7g7f") == std::string::npos && cmd.find(" q ") == std::string::npos
                    ? std::optional<Position>(after_7g7f())
                    : std::nullopt;
        if (cmd.rfind("go", 0) == 0) gos.push_back(pos);
        const bool withdrawn = cmd == "gameover win" && s != 0;  // gameover takes the answer back
        e.engine.command("stop");
        for (const auto& l : e.drain()) out.push_back(l);
        std::vector<std::string> answers;
        for (const auto& l : out)
          if (l.rfind("bestmove", 0) == 0) answers.push_back(l);
        REQUIRE(answers.size() == gos.size() - (withdrawn ? 1 : 0));
        for (size_t i = 0; i < answers.size(); ++i) check_bestmove(answers[i], gos[i]);

        // And the next go plays in the last accepted position, or resigns when there is none.
        e.engine.command("go nodes 16");
        auto answer = e.lines.next(10000);
        while (answer && answer->rfind("bestmove", 0) != 0) answer = e.lines.next(10000);
        REQUIRE(answer);
        check_bestmove(*answer, pos);
        CHECK(e.engine.state() == IDLE);
      }
    }
  }
}

TEST_CASE("usi states: go mate in every state answers the running search, then checkmate", "[usi][state]") {
  const char* enter[3] = {nullptr, "go infinite", "go ponder btime 0 wtime 0 byoyomi 10000"};
  for (int s = 0; s < 3; ++s) {
    Session e;
    e.engine.command("position sfen 4k4/9/4P4/9/9/9/9/9/4K4 b G 1");
    if (enter[s]) e.engine.command(enter[s]);
    e.drain();
    e.engine.command("go mate 2000");
    std::vector<std::string> out = e.drain();
    CHECK(count_prefix(out, "bestmove") == (s == 0 ? 0 : 1));
    // The answer may already be among the lines drained above (a mate in 1 is found at once).
    std::optional<std::string> l;
    for (const std::string& x : out)
      if (x.rfind("checkmate", 0) == 0) l = x;
    if (!l) {
      do l = e.lines.next(20000);  // generous: a loaded machine once took over 5 s here
      while (l && l->rfind("checkmate", 0) != 0);
    }
    REQUIRE(l);
    CHECK(*l == "checkmate G*5b");
    CHECK(e.engine.state() == IDLE);
  }
}

TEST_CASE("usi states: a search that ends by itself leaves thinking for idle", "[usi][state]") {
  Session e;
  e.engine.command("position startpos");
  e.engine.command("go nodes 16");
  std::optional<std::string> l;
  do l = e.lines.next(10000);
  while (l && l->rfind("bestmove", 0) != 0);
  REQUIRE(l);
  check_bestmove(*l, Position());
  CHECK(e.engine.state() == IDLE);
  // stop and gameover after it has answered release nothing more.
  e.engine.command("stop");
  e.engine.command("gameover lose");
  CHECK(count_prefix(e.drain(), "bestmove") == 0);
}
