// One USI engine as a child process of the match runner: started through Boost.Process with pipes
// on its standard input and output, a reader thread that time-stamps every line it prints, reads
// with deadlines, and a kill that takes the engine's whole process group (an engine's helper
// processes would otherwise keep the pipe open), so that a crashed or stalled engine can be
// replaced by a fresh one while the match goes on.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace jiriki::match {

using Clock = std::chrono::steady_clock;

// How to run an engine: the --engine value
// "cmd=PATH name=NAME [dir=DIR] [args="a b"] [env.VAR=VALUE ...] [option.N=V ...]", or for a
// jiriki network played in the match's own process (match/arena.h) "model=PATH name=NAME [option.N=V ...]".
struct EngineSpec {
  std::string name;   // display name (defaults to the file name of cmd or model, without extension)
  std::string cmd;    // executable; a name without '/' is looked up in PATH
  std::string model;  // a network file: played in process by the arena, not as a USI engine
  std::string dir;    // working directory ("" = the runner's)
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;      // added to the runner's environment
  std::vector<std::pair<std::string, std::string>> options;  // sent as setoption after usiok
  int64_t nodes = 0;      // nodes=N: this engine's count under --tc nodes (0: the match's), e.g. to give a
                          // faster network proportionally more, as at equal time on slower hardware
  std::vector<int> cpus;  // the CPUs the process is confined to (--cpus-per-game); empty: the runner's
};

// The spec game thread (slot) `slot` runs: an option GPU given as a list ("0,1,2,3") takes its
// entry slot % size, so that the games at once spread over several GPUs; the rest is unchanged.
EngineSpec spec_for_slot(const EngineSpec& spec, int slot);

// The CPUs of game slot `slot` under --cpus-per-game `per_game`: the slot-th run of `per_game` CPUs
// of `allowed` (the runner's own, in order), so that the games played at once never share a core.
std::vector<int> cpus_for_slot(const std::vector<int>& allowed, int per_game, int slot);

// Parses an --engine value; returns an error naming the bad field. Values may be double-quoted.
std::optional<std::string> parse_engine_spec(const std::string& text, EngineSpec& out);

// A line the engine printed and when the reader thread got it.
struct EngineLine {
  std::string text;
  Clock::time_point at;
};

// Every line between the runner and its engines with the milliseconds since the log opened
// ("12.345 jiriki#2 < go ..." for lines sent, ">" for lines read): the --log file.
class TrafficLog {
 public:
  explicit TrafficLog(const std::string& path);  // throws std::runtime_error when it cannot write
  void write(const std::string& engine, char direction, const std::string& line, Clock::time_point at);

 private:
  std::mutex mutex_;
  std::ofstream out_;
  Clock::time_point start_ = Clock::now();
};

class EngineProcess {
 public:
  // `log` (optional) gets every line; `label` names this process in it. `interrupt` (optional): once
  // it is set, every wait for the engine's answer ends at once as a time-out would (the runner was
  // told to stop; engines starting up on busy cores can take a minute to answer).
  explicit EngineProcess(EngineSpec spec, TrafficLog* log = nullptr, std::string label = "",
                         const std::atomic<bool>* interrupt = nullptr);
  ~EngineProcess();  // sends quit, and kills the process group if it does not end at once
  EngineProcess(const EngineProcess&) = delete;
  EngineProcess& operator=(const EngineProcess&) = delete;

  // Starts the process (killing any earlier one) and runs the handshake: usi .. usiok, the
  // options, isready .. readyok, each answer within `timeout`. Returns an error when it cannot
  // start or does not answer in time.
  std::optional<std::string> start(std::chrono::milliseconds timeout);
  // isready .. readyok, dropping whatever the engine printed before (a late bestmove of a search
  // the runner gave up on). False when it does not answer in time or has ended.
  bool sync(std::chrono::milliseconds timeout);
  // Writes one line; false when the engine is gone.
  bool send(const std::string& line);
  // The next line, waiting until `deadline`; nullopt on time-out, on the interrupt, or when the
  // engine has ended and every line it printed was read (then ended() is true).
  std::optional<EngineLine> read_line(Clock::time_point deadline);
  bool ended();
  // Kills the engine and its process group at once.
  void kill();
  const EngineSpec& spec() const { return spec_; }

 private:
  struct Child;  // the Boost.Process objects of one start
  void reader(std::shared_ptr<Child> child);
  void stop_child(bool polite);

  EngineSpec spec_;
  TrafficLog* log_;
  std::string label_;
  const std::atomic<bool>* interrupt_;
  std::shared_ptr<Child> child_;
  std::thread reader_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<EngineLine> lines_;
  bool eof_ = true;
};

}  // namespace jiriki::match
