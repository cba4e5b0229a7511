// The USI protocol engine: reads commands, drives the tree search and the mate solver, and writes
// the answers GUIs (ShogiGUI, Shogidokoro, ShogiHome) expect. All protocol text lives here; the
// search (engine/search/) knows nothing of it. Every bad input is answered with an
// `info string error: ...` line and leaves the engine as it was.
#pragma once
#include <atomic>
#include <iosfwd>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/mate.h"
#include "engine/search/search.h"
#include "usi/book.h"
#include "usi/options.h"

namespace jiriki::usi {

class Engine {
 public:
  explicit Engine(std::ostream& out);
  ~Engine();

  // Reads commands until `quit` or the end of the input; returns the exit code.
  int loop(std::istream& in);
  // Handles one command line; false after `quit`.
  bool command(const std::string& line);

 private:
  void send(const std::string& line);
  void error(const std::string& message) { send("info string error: " + message); }

  void cmd_usi();
  void cmd_isready();
  void cmd_setoption(const std::string& args);
  void cmd_position(const std::string& args);
  void cmd_go(const std::string& args);
  void cmd_go_mate(const std::string& time);
  void stop_all();  // stop, wait for the threads; the answers they owe are still sent

  bool ensure_network();  // (re)builds the evaluation queue when an option changed; false on error
  search::SearchParams search_params() const;
  void send_info(const search::SearchInfo& info);
  void send_result(const search::SearchResult& result);

  std::ostream& out_;
  std::mutex out_mutex_;
  Options options_;
  UsiBook book_;
  search::Searcher searcher_;
  std::unique_ptr<search::EvalQueue> queue_;
  int search_threads_ = 1;  // the threads queue_ serves (Threads, or its default for the backend)
  bool network_dirty_ = true;

  // The position of the last valid `position` command.
  std::string sfen_ = Position::STARTPOS_SFEN;
  std::vector<Move> moves_;
  Position pos_;

  // `go mate`.
  MateSolver mate_solver_;
  std::thread mate_thread_;
  std::atomic<bool> mate_stop_{false};
  std::atomic<bool> mate_running_{false};
  std::atomic<bool> quiet_{false};
  std::atomic<bool> send_ponder_{true};  // USI_Ponder as it was at `go`
  bool stop_sent_ = false;                // `stop` came after the last `go`  // after gameover: the stopped search's bestmove is not wanted
};

}  // namespace jiriki::usi
