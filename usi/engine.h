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
  Options options_;
  UsiBook book_;
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
