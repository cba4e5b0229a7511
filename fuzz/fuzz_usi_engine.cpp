// Fuzzes the USI command handler: the input is a stream of command lines for one engine (the
// untrained default network on the CPU). Beyond not crashing, it checks the USI rule: whenever the
// engine is idle after a command, every go has had exactly one answer (only gameover may withdraw
// one), in order, and each bestmove is legal in the position of the last accepted `position` at
// its go (resign when there was none); each go mate gets one checkmate line.
//
// What the harness changes, and why: every go gets " nodes 16" appended (a search costs
// milliseconds, not the seconds a clock would give it), and setoption lines for the options that
// pick resources (ModelFile, Backend, GPU, Threads, BatchSize, USI_Hash) are dropped, so that an
// input cannot load other files or allocate without bound; the option parser itself is exercised
// by every other setoption. One engine serves every input (loading the network per input would be
// most of the time; it is made at the first input); each input starts from `stop`, every option at its default, no position.
#include <algorithm>
#include <cctype>
#include <deque>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz/harness.h"
#include "shogi/movegen.h"
#include "tests/usi_session.h"
#include "usi/engine.h"

using namespace jiriki;

namespace {

std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> w;
  std::string cur;
  for (char c : line) {
    if (c == ' ' || c == '\t') {
      if (!cur.empty()) w.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) w.push_back(std::move(cur));
  return w;
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower((unsigned char)c));
  return s;
}

// A command's arguments as the engine splits them (at any white space).
std::vector<std::string> arguments_of(const std::string& line) {
  std::istringstream is(line);
  std::vector<std::string> w;
  for (std::string t; is >> t;) w.push_back(t);
  return w;
}

// The position a `position` line the engine accepted sets, worked out here with the rules core.
std::optional<Position> position_of(const std::string& line) {
  const std::vector<std::string> w = arguments_of(line);
  Position pos;
  size_t i = 1;
  std::string sfen;
  if (w.size() > 1 && w[1] == "startpos") {
    sfen = Position::STARTPOS_SFEN;
    i = 2;
  } else {
    for (i = 2; i < w.size() && w[i] != "moves"; ++i) sfen += (sfen.empty() ? "" : " ") + w[i];
  }
  if (pos.set_sfen(sfen)) return std::nullopt;
  for (++i; i < w.size(); ++i) {
    Move m = move_from_usi(pos, w[i]);
    if (m == MOVE_NONE || !pos.is_legal(m)) return std::nullopt;
    pos.do_move(m);
  }
  return pos;
}

bool resource_option(const std::vector<std::string>& w) {
  if (w.size() < 3 || w[0] != "setoption") return false;
  const std::string name = lower(w[2]);
  for (const char* n : {"modelfile", "backend", "gpu", "threads", "batchsize", "usi_hash"})
    if (name == n) return true;
  return false;
}

struct Harness {
  testing::UsiLines lines;
  usi::Engine engine{lines.stream};
  std::vector<std::string> reset;  // setoption lines restoring every option's default

  Harness() {
    engine.command("usi");
    for (const std::string& l : lines.drain()) {
      // option name N type T default D ...
      std::vector<std::string> w = words_of(l);
      if (w.size() < 7 || w[0] != "option" || w[5] != "default") continue;
      if (resource_option({"setoption", "name", w[2]})) continue;  // set once, never changed by an input
      reset.push_back("setoption name " + w[2] + " value " + w[6]);
    }
    engine.command("setoption name Backend value cpu");
    engine.command("isready");
    lines.drain();
  }
};

Harness& harness() {
  static Harness* h = new Harness();  // never destroyed: libFuzzer exits without unwinding
  return *h;
}


}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Harness& h = harness();
  usi::Engine& e = h.engine;
  e.command("stop");
  for (const std::string& r : h.reset) e.command(r);
  e.command("position");  // rejected: no position
  h.lines.drain();

  struct Go {
    bool mate;
    std::optional<Position> pos;
  };
  std::deque<Go> owed;  // gos not answered yet, oldest first
  std::optional<Position> current;

  auto take_answers = [&](const std::vector<std::string>& out) {
    for (const std::string& l : out) {
      const bool best = l.rfind("bestmove", 0) == 0, mate = l.rfind("checkmate", 0) == 0;
      if (!best && !mate) continue;
      FUZZ_CHECK(!owed.empty());
      FUZZ_CHECK(owed.front().mate == mate);
      if (best) {
        std::vector<std::string> w = words_of(l);
        FUZZ_CHECK(w.size() == 2 || (w.size() == 4 && w[2] == "ponder"));
        const std::optional<Position>& pos = owed.front().pos;
        if (!pos) {
          FUZZ_CHECK(w[1] == "resign");
        } else if (w[1] != "resign" && w[1] != "win") {
          const Move m = move_from_usi(*pos, w[1]);
          FUZZ_CHECK(m != MOVE_NONE && pos->is_legal(m));
        }
      }
      owed.pop_front();
    }
  };

  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  bool running = true;
  for (std::string line; running && std::getline(in, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
    std::vector<std::string> w = words_of(line);
    if (resource_option(w)) continue;
    const std::string cmd = w.empty() ? "" : w[0];
    if (cmd == "go") {
      const std::vector<std::string> a = arguments_of(line);
      owed.push_back({std::find(a.begin(), a.end(), "mate") != a.end(), current});
      line += " nodes 16";
      running = e.command(line);  // answers the running search first, if any
    } else {
      running = e.command(line);
    }
    std::vector<std::string> out = h.lines.drain();
    if (cmd == "position") {
      bool rejected = false;
      for (const auto& l : out) rejected |= l.rfind("info string error: position", 0) == 0;
      current = rejected ? std::nullopt : position_of(line);
      FUZZ_CHECK(rejected || current);  // what the engine accepted, the rules core accepts too
    }
    take_answers(out);
    if (e.state() == usi::State::IDLE) {
      take_answers(h.lines.drain());
      if (cmd == "gameover") owed.clear();  // the game ended: a running search's answer is withdrawn
      FUZZ_CHECK(owed.empty());
    }
  }
  e.command("stop");
  take_answers(h.lines.drain());
  FUZZ_CHECK(owed.empty());
  return 0;
}
