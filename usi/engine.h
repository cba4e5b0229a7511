// The USI protocol engine: reads commands, drives the tree search and the mate solver, and writes
// the answers GUIs (ShogiGUI, Shogidokoro, ShogiHome) expect. All protocol text lives here; the
// search (engine/search/) knows nothing of it. Every bad input is answered with an
// `info string error: ...` line and leaves the engine as it was, except that a rejected `position`
// leaves no position: a following `go` resigns rather than play a move of an older one. Every `go`
// is answered by exactly one `bestmove` (a `go mate` by one `checkmate`); only `gameover` withdraws
// the answer of a search still running.
#pragma once
#include <atomic>
#include <iosfwd>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/mate.h"
#include "engine/network_setup.h"
#include "engine/search/search.h"
#include "usi/book.h"
#include "usi/options.h"

namespace jiriki::usi {

// What the engine is doing, as the command thread sees it. A search that has sent its bestmove by
// itself counts as finished at the next command.
enum class State {
  IDLE,       // no search: the last go (if any) has been answered
  THINKING,   // a go (or go mate) is running; it owes one answer
  PONDERING,  // a go ponder is running; it answers after ponderhit (-> THINKING) or stop
};
const char* state_name(State s);

// The engine's search: SearchParams' own, with the df-pn solver on the root (the engine has a
// thread to spare for it; self-play and benchmarks do not).
inline search::SearchParams engine_search_params() {
  search::SearchParams p;
  p.root_mate_search = true;
  return p;
}

// What the USI options set, with the engine's defaults: the search's (SearchParams), the clock's
// (TimeOptions) and those of the engine alone. Each field is filled by the option that declares it
// in Engine's constructor.
struct EngineSettings {
  search::SearchParams search = engine_search_params();
  search::TimeOptions time;
  int64_t hash_mb = 1024;  // USI_Hash
  bool ponder = true;      // USI_Ponder
  int threads = 0;         // 0: 8 on the GPU, 2 on a CPU backend (fewer CPUs usable: that many)
  std::string model = engine::DEFAULT_MODEL;
  std::string backend = "auto";
  nn::Precision precision = nn::Precision::AUTO;
  int gpu = 0;
  int batch = 0;  // leaves per network call per thread; 0: 16 on a CPU backend, 128 on the GPU
  // Resigning, in the units of the family each name comes from: ResignValue as YaneuraOu's (resign
  // at an evaluation of -ResignValue centipawns or below; 99999 never), Resign_Threshold as
  // dlshogi's (resign below this win rate, per mille; 0 never). Either one resigns.
  int resign_cp = 99999;
  int resign_permille = 0;
  // LeafMateSearchPly, AUTO_PLIES: 3 plies on a CPU backend (+54 [+8, +102] Elo against 1 at
  // byoyomi 300 ms, 200 games, 2026-11-27), 1 on the GPU, where the search threads set the pace and 3
  // was not measured.
  static constexpr int AUTO_PLIES = -1;
  int leaf_mate_plies = AUTO_PLIES;
  int pv_interval_ms = 1000;  // PV_Interval: ms between info lines
};

class Engine {
 public:
  explicit Engine(std::ostream& out);
  ~Engine();

  // Reads commands until `quit` or the end of the input; returns the exit code.
  int loop(std::istream& in);
  // Handles one command line; false after `quit`.
  bool command(const std::string& line);
  // The state after the commands so far (for tests and the fuzz harness).
  State state();
  // The option table `usi` announces.
  const Options& options() const { return options_; }

 private:
  // The game to play in: the last accepted `position`.
  struct Game {
    std::string sfen;
    std::vector<Move> moves;
    Position pos;
  };

  void send(const std::string& line);
  // An error line; a message quoting a huge input (a 1 MB garbage line) is cut, saying so.
  void error(const std::string& message);

  void settle();                  // THINKING whose search has answered -> IDLE
  void finish(bool send_answer);  // any state -> IDLE; the running search answers unless told not to
  void cmd_usi();
  void cmd_isready();
  void cmd_setoption(const std::string& args);
  static bool parse_setoption(const std::string& args, std::string* name, std::string* value);
  std::optional<std::string> set_option(const std::string& name, const std::string& value);  // error or none
  void read_engine_options();
  void cmd_position(const std::string& args);
  void cmd_go(const std::string& args);
  void start_search(const std::vector<std::string>& words);
  void cmd_ponderhit(const std::string& args);
  bool read_clock(const std::string& cmd, const std::vector<std::string>& words, search::GoClock* clock,
                  search::SearchLimits* limits);
  search::TimeBudget budget(const search::GoClock& clock, Color us, int game_ply) const;
  void start_mate(const std::string& time);

  bool ensure_network();  // (re)builds the evaluation queue when an option changed; false on error
  search::SearchParams search_params() const;
  int leaf_mate_plies() const;  // LeafMateSearchPly, auto resolved for the backend in use
  void send_info(const search::SearchInfo& info);
  void send_result(const search::SearchResult& result);

  std::ostream& out_;
  std::mutex out_mutex_;
  EngineSettings settings_;
  UsiBook book_;
  Options options_;  // fills settings_ and book_
  search::Searcher searcher_;
  std::unique_ptr<search::EvalQueue> queue_;
  int search_threads_ = 1;  // the threads queue_ serves (Threads, or its default for the backend)
  bool gpu_queue_ = false;  // queue_ evaluates on the GPU (LeafMateSearchPly auto depends on it)
  bool network_dirty_ = true;

  State state_ = State::IDLE;
  std::optional<Game> game_;                                 // empty: none set, or the last was rejected
  std::string no_game_reason_ = "no position has been set";  // why game_ is empty

  // `go mate`.
  MateSolver mate_solver_;
  std::thread mate_thread_;
  std::atomic<bool> mate_stop_{false};
  std::atomic<bool> mate_running_{false};
  std::atomic<bool> quiet_{false};       // the answer of the search being stopped is not wanted (gameover)
  std::atomic<bool> send_ponder_{true};  // USI_Ponder as it was at `go`
  Color pondered_side_ = BLACK;          // the side to move and move number at the last go, for the
  int pondered_ply_ = 1;                 // clock a ponderhit brings
};

}  // namespace jiriki::usi
