// Helpers for tests (and fuzz_usi_engine) that drive usi::Engine in this process: a stream that
// collects the engine's lines (written from its search threads) for the test thread to read with a
// timeout; a referee that checks the answers against the USI rule; and a tiny network in a model
// file, so that searches cost little.
#pragma once
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <ostream>
#include <sstream>
#include <streambuf>
#include <string>
#include <vector>

#include <unistd.h>

#include "nn/model_file.h"
#include "shogi/movegen.h"
#include "usi/engine.h"

namespace jiriki::testing {

class UsiLines : private std::streambuf {
 public:
  UsiLines() : stream(this) {}
  std::ostream stream;  // give this to the engine

  // The next complete line, or nullopt when none comes within timeout_ms.
  std::optional<std::string> next(int64_t timeout_ms) {
    std::unique_lock lock(mutex_);
    if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return !lines_.empty(); }))
      return std::nullopt;
    std::string l = std::move(lines_.front());
    lines_.pop_front();
    return l;
  }
  // Every complete line not read yet.
  std::vector<std::string> drain() {
    std::lock_guard lock(mutex_);
    std::vector<std::string> v(lines_.begin(), lines_.end());
    lines_.clear();
    return v;
  }

 private:
  int overflow(int c) override {
    if (c == traits_type::eof()) return 0;
    char ch = char(c);
    xsputn(&ch, 1);
    return c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    std::lock_guard lock(mutex_);
    for (std::streamsize i = 0; i < n; ++i) {
      if (s[i] != '\n') {
        partial_ += s[i];
        continue;
      }
      lines_.push_back(std::move(partial_));
      partial_.clear();
      cv_.notify_all();
    }
    return n;
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::string> lines_;
  std::string partial_;
};

// Checks an engine's answers against the USI rule as command lines go in: whenever the engine is
// idle, every go has had exactly one answer (gameover alone may withdraw one), in order; each
// bestmove is legal in the position of the last accepted `position` at its go, or resign when there
// was none; each go mate gets one checkmate line. A position the engine accepts must be one the
// rules core (Position, move_from_usi) accepts too.
class UsiReferee {
 public:
  // Gives `line` to the engine; returns a description of the first broken rule, or nullopt.
  // `running` receives what Engine::command returned.
  std::optional<std::string> play(usi::Engine& engine, UsiLines& lines, const std::string& line, bool* running) {
    const std::vector<std::string> w = arguments(line);
    const std::string cmd = command_word(line);
    if (cmd == "go") owed_.push_back({std::find(w.begin(), w.end(), "mate") != w.end(), current_});
    *running = engine.command(line);
    std::vector<std::string> out = lines.drain();
    last_replies_ = out;
    if (cmd == "position") {
      bool rejected = false;
      for (const auto& l : out) rejected |= l.rfind("info string error: position", 0) == 0;
      current_ = rejected ? std::nullopt : position_of(w);
      if (!rejected && !current_) return "the engine accepted '" + line + "', the rules core does not";
    }
    if (auto err = take(out)) return err;
    if (engine.state() != usi::State::IDLE) return std::nullopt;
    const std::vector<std::string> late = lines.drain();  // an answer sent while settling
    last_replies_.insert(last_replies_.end(), late.begin(), late.end());
    if (auto err = take(late)) return err;
    if (cmd == "gameover") owed_.clear();  // the game ended: a running search's answer is withdrawn
    if (!owed_.empty()) return "idle after '" + line + "' with " + std::to_string(owed_.size()) + " go unanswered";
    return std::nullopt;
  }
  size_t owed() const { return owed_.size(); }                                    // gos not answered yet
  const std::vector<std::string>& last_replies() const { return last_replies_; }  // the last play's lines

 private:
  struct Go {
    bool mate;
    std::optional<Position> pos;
  };

  // The command word as the engine reads it (up to a space or tab); the arguments at any white space.
  static std::string command_word(std::string line) {
    while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
    size_t b = line.find_first_not_of(" \t");
    if (b == std::string::npos) return "";
    size_t e = line.find_first_of(" \t", b);
    return line.substr(b, e == std::string::npos ? std::string::npos : e - b);
  }
  static std::vector<std::string> arguments(const std::string& line) {
    std::istringstream is(line);
    std::vector<std::string> w;
    for (std::string t; is >> t;) w.push_back(t);
    return w;
  }
  // The position of an accepted `position startpos|sfen ... [moves ...]`, worked out independently.
  static std::optional<Position> position_of(const std::vector<std::string>& w) {
    Position pos;
    size_t i = 2;
    std::string sfen;
    if (w.size() > 1 && w[1] == "startpos") sfen = Position::STARTPOS_SFEN;
    else
      for (; i < w.size() && w[i] != "moves"; ++i) sfen += (sfen.empty() ? "" : " ") + w[i];
    if (pos.set_sfen(sfen)) return std::nullopt;
    for (++i; i < w.size(); ++i) {
      Move m = move_from_usi(pos, w[i]);
      if (m == MOVE_NONE || !pos.is_legal(m)) return std::nullopt;
      pos.do_move(m);
    }
    return pos;
  }
  // Matches answer lines to the oldest owed go.
  std::optional<std::string> take(const std::vector<std::string>& out) {
    for (const std::string& l : out) {
      const bool best = l.rfind("bestmove", 0) == 0, mate = l.rfind("checkmate", 0) == 0;
      if (!best && !mate) continue;
      if (owed_.empty()) return "'" + l + "' answers no go";
      if (owed_.front().mate != mate) return "'" + l + "' answers a go of the other kind";
      if (best) {
        const std::vector<std::string> w = arguments(l);
        if (!(w.size() == 2 || (w.size() == 4 && w[2] == "ponder"))) return "malformed '" + l + "'";
        const std::optional<Position>& pos = owed_.front().pos;
        if (!pos && w[1] != "resign") return "'" + l + "' without a position to play in";
        if (pos && w[1] != "resign" && w[1] != "win") {
          const Move m = move_from_usi(*pos, w[1]);
          if (m == MOVE_NONE || !pos->is_legal(m)) return "'" + l + "' is not legal in " + pos->sfen();
        }
      }
      owed_.pop_front();
    }
    return std::nullopt;
  }

  std::deque<Go> owed_;              // gos not answered yet, oldest first
  std::optional<Position> current_;  // the last accepted position; none at the start
  std::vector<std::string> last_replies_;
};

// A network of 1 block x 16 channels in a model file, made once per test process, removed at exit.
inline const std::string& tiny_model_path() {
  struct File {
    std::string path =
        (std::filesystem::temp_directory_path() / ("jiriki_test_usi_" + std::to_string(getpid()) + ".jnn")).string();
    File() {
      nn::Architecture a;
      a.blocks = 1;
      a.channels = 16;
      nn::Model m(a);
      nn::init_model(m, 11);
      nn::save_model(m, path);
    }
    ~File() { std::filesystem::remove(path); }
  };
  static const File file;
  return file.path;
}

}  // namespace jiriki::testing
