// The jiriki binary as a GUI runs it: a child process on pipes, with every read under a timeout so
// that a hung engine fails the test instead of hanging CI; and helpers that check its moves with the
// rules core. Shared by the USI tests that drive the real binary.
#pragma once
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "shogi/movegen.h"
#include "tests/usi_session.h"

namespace jiriki::testing {

using Clock = std::chrono::steady_clock;

inline int64_t ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

// The engine in a child process.
class EngineProcess {
 public:
  // The executable the tests run: this build's, or $JIRIKI_TEST_ENGINE (an older build, to show
  // that a test fails there).
  static std::string default_binary() {
    const char* other = std::getenv("JIRIKI_TEST_ENGINE");
    return other && *other ? other : JIRIKI_BINARY;
  }
  // `binary`: the jiriki executable (a copy elsewhere, to test what it reads beside itself).
  // `pin_cpus` > 0: the engine may use only that many of the CPUs this process may (as taskset does).
  explicit EngineProcess(const std::string& binary = default_binary(), int pin_cpus = 0) {
    signal(SIGPIPE, SIG_IGN);  // a dead engine must fail the test, not kill it
    int in[2], out[2];
    REQUIRE(pipe(in) == 0);
    REQUIRE(pipe(out) == 0);
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      close(in[0]), close(in[1]), close(out[0]), close(out[1]);
      if (pin_cpus > 0) {
        cpu_set_t allowed, pinned;
        CPU_ZERO(&pinned);
        sched_getaffinity(0, sizeof allowed, &allowed);
        for (int c = 0, n = 0; c < CPU_SETSIZE && n < pin_cpus; ++c)
          if (CPU_ISSET(c, &allowed)) CPU_SET(c, &pinned), ++n;
        if (sched_setaffinity(0, sizeof pinned, &pinned) != 0) _exit(126);
      }
      execl(binary.c_str(), binary.c_str(), (char*)nullptr);  // no arguments: what a GUI runs
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to_ = in[1];
    from_ = out[0];
  }
  ~EngineProcess() {
    if (to_ >= 0) close(to_);
    if (pid_ > 0 && wait_exit(0) == -2) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(from_);
  }

  void send(const std::string& line) {
    std::string s = line + "\n";
    transcript_ += "> " + line + "\n";
    CHECK(write(to_, s.data(), s.size()) == ssize_t(s.size()));
  }

  // The next line, or nullopt when none comes within timeout_ms (or the engine closed stdout).
  std::optional<std::string> line(int64_t timeout_ms) {
    auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      size_t nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string l = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        transcript_ += "< " + l + "\n";
        return l;
      }
      int64_t left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left < 0) return std::nullopt;
      pollfd p{from_, POLLIN, 0};
      if (poll(&p, 1, int(left)) <= 0) continue;
      char chunk[4096];
      ssize_t n = read(from_, chunk, sizeof chunk);
      if (n <= 0) return std::nullopt;
      buf_.append(chunk, size_t(n));
    }
  }

  // Reads until a line starting with `prefix`; lines before it go to `seen`. Fails the test with
  // the transcript when it does not come in time.
  std::string expect(const std::string& prefix, int64_t timeout_ms, std::vector<std::string>* seen = nullptr) {
    auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      int64_t left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      auto l = line(std::max<int64_t>(left, 0));
      if (!l) FAIL("no '" << prefix << "' within " << timeout_ms << " ms; transcript:\n" << transcript_);
      if (l->rfind(prefix, 0) == 0) return *l;
      if (seen) seen->push_back(*l);
    }
  }

  // Sends isready and expects readyok; returns the lines before it.
  std::vector<std::string> sync(int64_t timeout_ms = 30000) {
    send("isready");
    std::vector<std::string> seen;
    expect("readyok", timeout_ms, &seen);
    return seen;
  }

  // Sends a bad command and expects an error line (before readyok), then proves the engine usable.
  void expect_error(const std::string& command, const std::string& words) {
    send(command);
    std::vector<std::string> seen = sync();
    REQUIRE(seen.size() == 1);
    CHECK(seen[0].rfind("info string error:", 0) == 0);
    CHECK_THAT(seen[0], Catch::Contains(words));
  }

  // Exit status, -1 when killed by a signal, -2 when still running after timeout_ms.
  int wait_exit(int64_t timeout_ms) {
    auto t0 = Clock::now();
    for (;;) {
      int status = 0;
      pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      if (ms_since(t0) >= timeout_ms) return -2;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  const std::string& transcript() const { return transcript_; }

 private:
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  std::string buf_, transcript_;
};

// usi + the tiny network + isready.
inline void start(EngineProcess& e, const std::vector<std::string>& options = {}) {
  e.send("usi");
  e.expect("usiok", 10000);
  e.send("setoption name ModelFile value " + tiny_model_path());
  e.send("setoption name PV_Interval value 200");
  for (const auto& o : options) e.send("setoption name " + o);
  e.sync();
}

inline std::vector<std::string> split(const std::string& s) {
  std::istringstream is(s);
  std::vector<std::string> w;
  for (std::string t; is >> t;) w.push_back(t);
  return w;
}

// The move of a `bestmove` line (and its ponder move), checked legal in `pos`.
inline Move best_of(const std::string& line, const Position& pos, Move* ponder = nullptr) {
  std::vector<std::string> w = split(line);
  REQUIRE(w.size() >= 2);
  REQUIRE(w[0] == "bestmove");
  Move m = move_from_usi(pos, w[1]);
  INFO(line << " in " << pos.sfen());
  REQUIRE(m != MOVE_NONE);
  REQUIRE(pos.is_legal(m));
  if (ponder) {
    *ponder = MOVE_NONE;
    if (w.size() == 4 && w[2] == "ponder") {
      Position next = pos;
      next.do_move(m);
      *ponder = move_from_usi(next, w[3]);
      REQUIRE(next.is_legal(*ponder));
    }
  }
  return m;
}

inline std::string moves_text(const std::vector<Move>& moves) {
  std::string s;
  for (Move m : moves) s += " " + move_to_usi(m);
  return s;
}

}  // namespace jiriki::testing
