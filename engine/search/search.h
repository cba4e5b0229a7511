// PUCT Monte-Carlo tree search guided by the network (AlphaZero / dlshogi style).
//
// Selection at a node picks the move maximising  Q + c(N) * P * sqrt(N) / (1 + n)  with
// c(N) = c_init + ln((N + c_base + 1) / c_base), N the node's playouts, n and Q the move's
// playouts and mean value, P its prior (the policy softmax at temperature T). A move not yet tried
// gets Q = (node's mean value) - fpu_reduction * sqrt(sum of the priors of the moves tried).
//
// Several threads search one tree. Each collects a batch of new leaves (virtual loss steers them
// apart) and hands it to the EvalQueue. A playout that runs into a leaf still being evaluated is a
// collision: it is not evaluated again; the playout is counted on that leaf and lands with it.
// New leaves are checked for the end of the game (mate, repetition, declaration, move limit) and
// for a short forced mate before they reach the network; proven wins and losses propagate up the
// tree (an MCTS-solver), so the root knows a forced mate when it sees one.
//
// The tree lives on between moves: a new position reached by moves from the old root keeps that
// subtree and frees the rest. Memory is bounded by the node pool; when it is spent the search
// stops as if a node limit were reached.
//
// This file knows nothing of USI: the protocol (usi/) turns SearchInfo and SearchResult into text.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/mate.h"
#include "engine/search/eval_queue.h"
#include "engine/search/node.h"
#include "engine/search/playout.h"
#include "engine/search/time_manager.h"
#include "shogi/game_rules.h"
#include "shogi/position.h"

namespace jiriki::search {

struct SearchParams {
  float c_init = 1.00f;  // dlshogi's 1.44 lost to it by 93 [42, 147] Elo at 800 playouts
                         // (bench/results/match_2026-11-27_gpu_gates_tuning.txt)
  float c_base = 28288.0f;
  float fpu_reduction = 0.27f;
  float fpu_reduction_root = 0.0f;
  float softmax_temperature = 1.74f;
  int threads = 2;                // search threads
  int batch_size = 16;            // leaves per network call per thread (<= the queue's max batch)
  float draw_value_black = 0.5f;  // the engine's value of a draw when it plays Black
  float draw_value_white = 0.5f;  // ... and when it plays White
  // The declaration rule and the ply limit the tree's leaves are judged by; a search alone (analysis,
  // `book build --think`) has no game length: a game sets it (USI's MaxMovesToDraw, self-play, play).
  GameRules rules{.max_plies = 0};
  int leaf_mate_plies = 1;         // forced-mate search at new leaves: 0, 1, 3 or 5 plies
  float resign_value = 0.0f;       // resign when the best move's win rate is below this
  int multipv = 1;                 // root moves reported in SearchInfo::lines
  bool root_mate_search = false;   // run the df-pn solver on the root in a thread of its own
  bool root_threat_search = true;  // ... which also proves lost the root moves that allow a mate
};

// When the search stops. Without a time budget or node limit it runs until stop().
struct SearchLimits {
  int64_t nodes = 0;      // playouts; 0 = no limit
  bool use_time = false;  // `time` applies
  TimeBudget time;
  bool ponder = false;    // never end by itself until ponderhit() (then `time` applies) or stop()
  bool infinite = false;  // never end by itself until stop()
};

// One root move as reported: its line, win rate and proven result.
struct RootLine {
  Move move = MOVE_NONE;
  std::vector<Move> pv;  // starts with `move`
  int32_t visits = 0;
  float winrate = 0.5f;  // for the side to move at the root
  int mate = 0;          // > 0: mates in `mate` plies; < 0: is mated in -mate plies; 0: unproven
};

struct SearchInfo {
  int64_t nodes = 0;  // playouts completed in this search
  int64_t time_ms = 0;
  int64_t nps = 0;
  int hashfull = 0;             // per mille of the node pool
  int depth = 0;                // length of the principal variation
  int seldepth = 0;             // deepest playout
  std::vector<RootLine> lines;  // best first; at most SearchParams::multipv
};

struct SearchResult {
  enum Kind { MOVE, RESIGN, WIN } kind = MOVE;  // WIN: declare the entering-king win
  Move best = MOVE_NONE;
  Move ponder = MOVE_NONE;  // the expected reply, MOVE_NONE when unknown
  SearchInfo info;
  std::string error;  // what went wrong (the network failed), empty when nothing did
};

class Searcher {
 public:
  explicit Searcher(size_t hash_bytes);
  ~Searcher();
  Searcher(const Searcher&) = delete;
  Searcher& operator=(const Searcher&) = delete;

  // The evaluation queue to use from the next search on (not owned; must outlive the searches).
  void set_eval_queue(EvalQueue* queue) { queue_ = queue; }
  // Changes the parameters between searches; drops the tree when its stored results depend on them.
  void set_params(const SearchParams& params);
  const SearchParams& params() const { return params_; }
  void set_hash_size(size_t bytes);  // drops the tree when it does not fit
  void clear_tree();                 // usinewgame: forget everything

  // The position to search: an SFEN and legal moves from it (the caller has checked them).
  // Returns an error message when the SFEN or a move is not valid.
  std::optional<std::string> set_position(const std::string& sfen, const std::vector<Move>& moves);

  // Starts searching in the background. `on_info` is called about every `info_interval_ms` and
  // once at the end; `on_done` exactly once, as soon as the search has decided (in ponder or
  // infinite mode not before ponderhit() or stop()). Both run on the search's manager thread.
  void start(const SearchLimits& limits, std::function<void(const SearchInfo&)> on_info,
             std::function<void(const SearchResult&)> on_done, int info_interval_ms = 1000);
  void stop();  // ends the search promptly (on_done follows)
  // The pondered move was played: the time budget applies from now; `budget`, when given, replaces
  // the one of start() (a GUI that sent `go ponder` without a clock sends it with ponderhit).
  void ponderhit(const std::optional<TimeBudget>& budget = std::nullopt);
  void wait();                                                                 // joins the threads of the last search
  bool searching() const { return manager_.joinable() && !finished_.load(); }  // start() .. on_done

  // Convenience for tests and benchmarks: start, wait, return the result.
  SearchResult run(const SearchLimits& limits);

  // The current root's statistics (between or during searches).
  SearchInfo info() const;
  const NodePool& pool() const { return pool_; }

 private:
  struct Worker;
  void manager(SearchLimits limits, std::function<void(const SearchInfo&)> on_info,
               std::function<void(const SearchResult&)> on_done, int info_interval_ms);
  void worker_loop(Worker& w);
  void root_mate_loop(const std::atomic<bool>& stop);  // the df-pn thread (root_mate_search)
  MateResult::Status threat_check(Edge& e, uint64_t budget, const std::atomic<bool>* stop);
  void check_decision();  // a last threat check of the move about to be played
  bool prepare_root();
  SearchResult decide() const;
  int64_t elapsed_ms(std::chrono::steady_clock::time_point since) const;

  SearchParams params_;
  EvalQueue* queue_ = nullptr;
  NodePool pool_;

  // The tree and the game it belongs to.
  Tree tree_;                     // its `engine`: side to move at the root when its values were made
  std::string tree_sfen_;         // the game the tree belongs to: start SFEN ...
  std::vector<Move> tree_moves_;  // ... and the moves to the tree's root
  Position root_pos_;
  std::string pos_sfen_ = Position::STARTPOS_SFEN;
  std::vector<Move> pos_moves_;

  // The search in progress.
  std::thread manager_;
  std::vector<std::unique_ptr<Worker>> workers_;  // kept between searches
  std::vector<std::thread> threads_;
  int workers_done_ = 0;    // guarded by signal_mutex_
  MateSolver mate_solver_;  // root_mate_loop's, then check_decision's
  struct ThreatChecked {
    Move move;
    uint64_t budget;  // df-pn nodes of its last whole check for the opponent's mate (0: none)
    bool settled;     // no mate at all
  };
  std::vector<ThreatChecked> threats_checked_;  // this search's root moves checked so far
  std::vector<Move> mate_pv_;                   // its answer, guarded by signal_mutex_
  bool root_mate_found_ = false;                // guarded by signal_mutex_
  std::vector<Move> root_mate_;                 // the manager's copy of mate_pv_
  std::atomic<bool> stop_workers_{false};       // workers leave after their current batch
  std::atomic<bool> finished_{true};            // on_done has been called
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> ponderhit_{false};
  std::optional<TimeBudget> ponderhit_budget_;  // guarded by signal_mutex_
  std::mutex signal_mutex_;
  std::condition_variable signal_cv_;
  std::atomic<int64_t> playouts_reserved_{0};
  int64_t node_limit_ = 0;
  std::chrono::steady_clock::time_point start_time_;
  std::exception_ptr worker_error_;
  std::mutex error_mutex_;
};

// Win probability to the centipawn-like score GUIs show: cp = -756 * ln(1/p - 1).
int winrate_to_cp(float p);

}  // namespace jiriki::search
