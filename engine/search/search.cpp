// PUCT tree search: selection, new leaves, batched evaluation, landing, the solver, and the
// manager thread that watches the clock and decides (see search.h).
#include "engine/search/search.h"

#include <algorithm>
#include <cmath>

#include "engine/mate.h"
#include "nn/features.h"
#include "shogi/movegen.h"

namespace jiriki::search {

using Clock = std::chrono::steady_clock;

int winrate_to_cp(float p) {
  p = std::clamp(p, 1e-6f, 1.0f - 1e-6f);
  return int(std::lround(-756.0 * std::log(1.0 / p - 1.0)));
}

struct Searcher::Worker {
  Position pos;  // at the root between playouts
  LeafBatch lb;
  explicit Worker(int batch_size) : lb(batch_size) {}
};

void Searcher::worker_loop(Worker& w) {
  const int batch = w.lb.batch.capacity();
  try {
    while (!stop_workers_.load(std::memory_order_relaxed)) {
      w.lb.clear();
      int collisions = 0;
      bool last_batch = false;
      for (int attempts = 0; w.lb.batch.size() < batch && collisions <= batch / 2 && attempts < 4 * batch + 16;
           ++attempts) {
        if (stop_workers_.load(std::memory_order_relaxed) || tree_.root->outcome() != Outcome::UNKNOWN) {
          last_batch = true;
          break;
        }
        if (node_limit_ > 0 && playouts_reserved_.fetch_add(1, std::memory_order_relaxed) >= node_limit_) {
          last_batch = true;
          break;
        }
        PlayoutEnd end = run_playout(tree_, w.pos, w.lb);
        if (end == PlayoutEnd::COLLISION) ++collisions;
        if (end == PlayoutEnd::FULL) {
          last_batch = true;
          break;
        }
      }
      if (w.lb.batch.size() > 0) {
        queue_->evaluate(w.lb.batch);
        finish_batch(w.lb);
      } else if (collisions > 0) {
        std::this_thread::yield();  // every leaf in reach is being evaluated by another thread
      }
      if (last_batch) break;
    }
  } catch (...) {
    std::lock_guard lock(error_mutex_);
    if (!worker_error_) worker_error_ = std::current_exception();
    fail_batch(w.lb);  // the leaves of the failed batch can never be evaluated
  }
  {
    std::lock_guard lock(signal_mutex_);
    ++workers_done_;
  }
  signal_cv_.notify_all();
}

// ---- the searcher ----------------------------------------------------------------------------

Searcher::Searcher(size_t hash_bytes) : pool_(hash_bytes) {
  tree_.params = &params_;
  tree_.pool = &pool_;
}

Searcher::~Searcher() {
  stop();
  wait();
  if (tree_.root) pool_.release(tree_.root);
}

void Searcher::set_params(const SearchParams& p) {
  // Terminal values, outcomes and priors stored in the tree depend on these.
  bool stale = p.draw_value_black != params_.draw_value_black || p.draw_value_white != params_.draw_value_white ||
               p.rules != params_.rules || p.leaf_mate_plies != params_.leaf_mate_plies ||
               p.softmax_temperature != params_.softmax_temperature;
  params_ = p;
  if (stale) clear_tree();
}

void Searcher::set_hash_size(size_t bytes) {
  if (bytes < pool_.used()) clear_tree();  // the tree no longer fits
  pool_.set_capacity(bytes);
}

void Searcher::clear_tree() {
  if (tree_.root) pool_.release(tree_.root);
  tree_.root = nullptr;
  tree_moves_.clear();
  tree_sfen_.clear();
}

std::optional<std::string> Searcher::set_position(const std::string& sfen, const std::vector<Move>& moves) {
  Position pos;
  if (auto err = pos.set_sfen(sfen)) return err;
  for (Move m : moves) {
    if (!pos.is_legal(m)) return "illegal move " + move_to_usi(m) + " in " + pos.sfen();
    pos.do_move(m);
  }
  root_pos_ = pos;
  pos_sfen_ = sfen;
  pos_moves_ = moves;
  return std::nullopt;
}

// Moves the tree's root to the position to search, keeping the subtree when the position follows
// from the old root, and makes sure the root is expanded. False when the root could not be
// evaluated (the error is in worker_error_).
bool Searcher::prepare_root() {
  const Color color = root_pos_.side_to_move();
  const bool draw_sided = params_.draw_value_black != params_.draw_value_white;
  Node* keep = nullptr;
  Edge* keep_edge = nullptr;
  if (tree_.root && tree_sfen_ == pos_sfen_ && pos_moves_.size() >= tree_moves_.size() &&
      std::equal(tree_moves_.begin(), tree_moves_.end(), pos_moves_.begin()) &&
      !(draw_sided && color != tree_.engine)) {
    keep = tree_.root;
    for (size_t i = tree_moves_.size(); i < pos_moves_.size() && keep; ++i) {
      keep_edge = nullptr;
      if (keep->ready())
        for (Edge& e : *keep)
          if (e.move == pos_moves_[i]) keep_edge = &e;
      keep = keep_edge ? keep_edge->child.load() : nullptr;
    }
    // A node that ended the game inside the tree (a first repetition) is no root to search from.
    if (keep && (keep->terminal || !keep->ready())) keep = nullptr;
  }
  if (keep != tree_.root) {
    if (keep) keep_edge->child.store(nullptr);  // detach before the rest goes
    if (tree_.root) pool_.release(tree_.root);
    tree_.root = keep;
  }
  tree_sfen_ = pos_sfen_;
  tree_moves_ = pos_moves_;
  tree_.engine = color;
  pool_.clear_full_flag();

  if (!tree_.root) {
    LeafBatch lb(1);
    if (!queue_root(tree_, root_pos_, lb)) {
      // Not even the root fits: fall back on a budget of one root, whatever USI_Hash says.
      const int n = legal_moves(root_pos_).size();
      pool_.set_capacity(std::max(pool_.capacity(), pool_.used() + NodePool::node_bytes() + NodePool::edge_bytes(n)));
      queue_root(tree_, root_pos_, lb);
    }
    try {
      queue_->evaluate(lb.batch);
    } catch (...) {
      worker_error_ = std::current_exception();
      pool_.release(tree_.root);
      tree_.root = nullptr;
      return false;
    }
    finish_batch(lb);
  }
  return true;
}

void Searcher::start(const SearchLimits& limits, std::function<void(const SearchInfo&)> on_info,
                     std::function<void(const SearchResult&)> on_done, int info_interval_ms) {
  wait();
  start_time_ = Clock::now();
  stop_requested_ = false;
  ponderhit_ = false;
  ponderhit_budget_.reset();
  stop_workers_ = false;
  finished_ = false;
  workers_done_ = 0;
  playouts_reserved_ = 0;
  tree_.playouts = 0;
  tree_.seldepth = 0;
  node_limit_ = limits.nodes;
  worker_error_ = nullptr;
  manager_ = std::thread([this, limits, on_info = std::move(on_info), on_done = std::move(on_done), info_interval_ms] {
    manager(limits, on_info, on_done, info_interval_ms);
  });
}

void Searcher::stop() {
  {
    std::lock_guard lock(signal_mutex_);
    stop_requested_ = true;
  }
  signal_cv_.notify_all();
}

void Searcher::ponderhit(const std::optional<TimeBudget>& budget) {
  {
    std::lock_guard lock(signal_mutex_);
    ponderhit_budget_ = budget;
    ponderhit_ = true;
  }
  signal_cv_.notify_all();
}

void Searcher::wait() {
  if (manager_.joinable()) manager_.join();
}

SearchResult Searcher::run(const SearchLimits& limits) {
  SearchResult result;
  start(limits, nullptr, [&result](const SearchResult& r) { result = r; });
  wait();
  return result;
}

int64_t Searcher::elapsed_ms(Clock::time_point since) const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count();
}

SearchInfo Searcher::info() const {
  SearchInfo info;
  info.nodes = tree_.playouts.load();
  info.time_ms = elapsed_ms(start_time_);
  info.nps = info.nodes * 1000 / std::max<int64_t>(info.time_ms, 1);
  info.hashfull = pool_.hashfull();
  info.seldepth = tree_.seldepth.load();
  if (!tree_.root || !tree_.root->ready()) return info;
  // The workers may still be searching: each edge's preference is read once, before sorting. A
  // comparator that reads the live counts can contradict itself within one sort, and std::sort's
  // unguarded insertion then runs off the array (found by fuzz_usi_engine under ASan).
  std::vector<std::pair<int64_t, const Edge*>> order;
  for (const Edge& e : *tree_.root) order.emplace_back(preference(e), &e);
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  const int lines = std::min<int>(std::max(params_.multipv, 1), int(order.size()));
  for (int i = 0; i < lines; ++i) {
    const Edge& e = *order[i].second;
    RootLine line;
    line.move = e.move;
    line.visits = e.visits.load();
    line.winrate = line.visits > 0 ? float(e.value_sum.load() / line.visits) : 0.5f;
    line.mate = mate_of(e);
    if (line.mate > 0) line.winrate = 1.0f;
    if (line.mate < 0) line.winrate = 0.0f;
    line.pv.push_back(e.move);
    for (const Edge* next = most_visited(e.child.load()); next && line.pv.size() < 128;
         next = most_visited(next->child.load()))
      line.pv.push_back(next->move);
    info.lines.push_back(std::move(line));
  }
  if (root_mate_.size() > 0 && !info.lines.empty() && info.lines[0].mate <= 0) {
    RootLine line;
    line.move = root_mate_[0];
    line.pv = root_mate_;
    line.winrate = 1.0f;
    line.mate = int(root_mate_.size());
    info.lines.insert(info.lines.begin(), std::move(line));
    if (int(info.lines.size()) > lines) info.lines.pop_back();
  }
  info.depth = info.lines.empty() ? 0 : int(info.lines[0].pv.size());
  info.seldepth = std::max(info.seldepth, info.depth);
  return info;
}

SearchResult Searcher::decide() const {
  SearchResult r;
  r.info = info();
  if (r.info.lines.empty()) {
    r.kind = SearchResult::RESIGN;
    return r;
  }
  const RootLine& best = r.info.lines[0];
  r.best = best.move;
  if (best.pv.size() > 1) r.ponder = best.pv[1];
  if (best.mate <= 0 && best.winrate < params_.resign_value) r.kind = SearchResult::RESIGN;
  return r;
}

// Looks for the opponent's mate after root move e (evaluated, not proven) within `budget` nodes; a
// move that allows one is proven lost in the tree, so that selection, the clock and the decision
// turn away from it. Returns the solver's verdict.
MateResult::Status Searcher::threat_check(Edge& e, uint64_t budget, const std::atomic<bool>* stop) {
  Position pos = root_pos_;
  pos.do_move(e.move);
  MateLimits ml;
  ml.stop = stop;
  ml.max_nodes = budget;
  ml.shorten_nodes = 0;  // any mate will do
  MateResult m = mate_solver_.solve(pos, ml);
  if (m.status == MateResult::MATE && !m.pv.empty())
    e.child.load(std::memory_order_acquire)->set_outcome(Outcome::WIN, int(m.pv.size()));
  return m.status;
}

namespace {
constexpr uint64_t FIRST_MATE_BUDGET = 4096;  // df-pn nodes, a few milliseconds
constexpr uint64_t MAX_MATE_BUDGET = uint64_t(1) << 40;

// The root move the tree prefers now: the most visited whose position is evaluated and unproven.
Edge* preferred_unproven(const Node* root) {
  Edge* best = nullptr;
  for (Edge& e : *root) {
    const Node* c = e.child.load(std::memory_order_acquire);
    if (!c || !c->ready() || c->terminal || c->outcome() != Outcome::UNKNOWN) continue;
    if (!best || e.visits.load(std::memory_order_relaxed) > best->visits.load(std::memory_order_relaxed)) best = &e;
  }
  return best;
}
}  // namespace

// One thread, in rounds of doubling node budgets: our own mate at the root (until it is proven or
// disproven), then, with root_threat_search, the opponent's mate after the root move the tree
// prefers now (threat_check). Why: in 13 of gpu-v6's 24 games lost to gpsshogi before this search existed, the move
// played just before gpsshogi announced its mate allowed a mate this solver finds with a one-second limit, 5 of them
// played at a score of -300 or better; mates of 5 to 27 plies lie beyond the tree at 60,000 playouts a move
// (scripts/mate_threats.py on the games of bench/results/match_2026-11-28_gpu_gpu-v6_1_games.tar.gz).
void Searcher::root_mate_loop(const std::atomic<bool>& stop) {
  uint64_t own_budget = FIRST_MATE_BUDGET;
  bool own_open = true;
  while (!stop.load(std::memory_order_relaxed)) {
    bool worked = false;
    if (own_open) {
      Position pos = root_pos_;
      MateLimits ml;
      ml.stop = &stop;
      ml.max_nodes = own_budget;
      MateResult m = mate_solver_.solve(pos, ml);
      if (m.status == MateResult::MATE && !m.pv.empty()) {
        {
          std::lock_guard lock(signal_mutex_);
          mate_pv_ = m.pv;
          root_mate_found_ = true;
        }
        signal_cv_.notify_all();
        return;
      }
      own_open = m.status == MateResult::TIMEOUT;
      own_budget = std::min(own_budget * 2, MAX_MATE_BUDGET);
      worked = true;
    }
    if (!params_.root_threat_search) {
      if (!own_open) return;
      continue;
    }
    if (Edge* best = preferred_unproven(tree_.root)) {
      auto it = std::find_if(threats_checked_.begin(), threats_checked_.end(),
                             [&](const ThreatChecked& c) { return c.move == best->move; });
      if (it == threats_checked_.end()) it = threats_checked_.insert(threats_checked_.end(), {best->move, 0, false});
      if (!it->settled) {
        const uint64_t budget = it->budget ? std::min(it->budget * 2, MAX_MATE_BUDGET) : FIRST_MATE_BUDGET;
        const MateResult::Status status = threat_check(*best, budget, &stop);
        // A check cut short by the end of the search is not one: check_decision must not take it
        // for a finished one and play a move no one has looked at.
        if (status == MateResult::TIMEOUT && stop.load(std::memory_order_relaxed)) break;
        it->budget = budget;
        it->settled = status == MateResult::NO_MATE;
        worked = true;
      }
    }
    if (!worked) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Before a move is played: the move about to be chosen, if the thread never looked at it, gets one
// small threat check, and so on down the preference order while checks find mates (at most a few,
// so that the answer is not late).
void Searcher::check_decision() {
  for (int i = 0; i < 8; ++i) {
    Edge* e = most_visited(tree_.root);
    if (!e || mate_of(*e) != 0) return;
    const Node* c = e->child.load(std::memory_order_acquire);
    if (!c || !c->ready() || c->terminal) return;
    auto it = std::find_if(threats_checked_.begin(), threats_checked_.end(),
                           [&](const ThreatChecked& c) { return c.move == e->move; });
    if (it != threats_checked_.end() && it->budget > 0) return;  // a whole check found no mate
    if (it == threats_checked_.end()) it = threats_checked_.insert(threats_checked_.end(), {e->move, 0, false});
    it->budget = FIRST_MATE_BUDGET;
    if (threat_check(*e, FIRST_MATE_BUDGET, nullptr) != MateResult::MATE) return;
  }
}

void Searcher::manager(SearchLimits limits, std::function<void(const SearchInfo&)> on_info,
                       std::function<void(const SearchResult&)> on_done, int info_interval_ms) {
  auto finish = [&](SearchResult r) {
    if (worker_error_) {
      try {
        std::rethrow_exception(worker_error_);
      } catch (const std::exception& e) {
        r.error = e.what();
      }
    }
    if (on_info && !r.info.lines.empty()) on_info(r.info);
    finished_ = true;
    if (on_done) on_done(r);
  };
  // In ponder or infinite mode the answer waits for ponderhit or stop.
  auto hold = [&] {
    std::unique_lock lock(signal_mutex_);
    signal_cv_.wait(lock, [&] { return stop_requested_ || (limits.ponder && ponderhit_ && !limits.infinite); });
  };

  // The root itself: no legal move, or a declaration.
  root_mate_.clear();
  mate_pv_.clear();
  root_mate_found_ = false;
  if (legal_moves(root_pos_).size() == 0 || root_pos_.declaration_win(params_.rules.entering_king_rule)) {
    SearchResult r;
    r.kind = legal_moves(root_pos_).size() == 0 ? SearchResult::RESIGN : SearchResult::WIN;
    if (limits.ponder || limits.infinite) hold();
    finish(r);
    return;
  }
  const bool root_ready = queue_ && prepare_root();
  if (!root_ready) {
    SearchResult r;
    r.kind = SearchResult::RESIGN;
    if (!queue_) r.error = "no network loaded";
    if (limits.ponder || limits.infinite) hold();
    finish(r);
    return;
  }

  // Workers are kept between searches; made again only when their shape changes.
  const int batch = std::clamp(params_.batch_size, 1, queue_->max_batch());
  if (int(workers_.size()) != params_.threads || (workers_.size() && workers_[0]->lb.batch.capacity() != batch)) {
    workers_.clear();
    for (int i = 0; i < params_.threads; ++i) workers_.push_back(std::make_unique<Worker>(batch));
  }
  for (auto& w : workers_) {
    w->pos = root_pos_;
    threads_.emplace_back([this, &w] { worker_loop(*w); });
  }

  // The df-pn solver beside the tree search (root_mate_loop).
  std::atomic<bool> stop_mate{false};
  std::thread mate_thread;
  threats_checked_.clear();
  if (params_.root_mate_search) mate_thread = std::thread([this, &stop_mate] { root_mate_loop(stop_mate); });

  bool ponder = limits.ponder;
  Clock::time_point origin = start_time_;  // the engine's clock: from go, or from ponderhit
  int64_t stop_at = -1;
  int64_t next_info = info_interval_ms;
  Move last_best = MOVE_NONE;
  int64_t last_change = 0;
  for (;;) {
    bool workers_finished, mate_found;
    {
      std::unique_lock lock(signal_mutex_);
      signal_cv_.wait_for(lock, std::chrono::milliseconds(2), [&] {
        return stop_requested_ || (ponder && ponderhit_) ||
               (!ponder && !limits.infinite && (workers_done_ == int(workers_.size()) || root_mate_found_));
      });
      workers_finished = workers_done_ == int(workers_.size());
      mate_found = root_mate_found_;
      if (mate_found && root_mate_.empty()) root_mate_ = mate_pv_;
    }
    if (stop_requested_) break;
    if (ponder && ponderhit_) {
      ponder = false;
      origin = Clock::now();
      std::lock_guard lock(signal_mutex_);
      if (ponderhit_budget_) {
        limits.time = *ponderhit_budget_;
        limits.use_time = true;
        limits.infinite = false;
      }
    }
    const int64_t t_soft = elapsed_ms(start_time_);  // pondering counts towards the optimum
    const int64_t t_hard = elapsed_ms(origin);
    if (on_info && t_soft >= next_info) {
      on_info(info());
      next_info = t_soft + info_interval_ms;
    }
    if (ponder || limits.infinite) continue;

    // The search has nothing more to do.
    if (workers_finished || mate_found || tree_.root->outcome() != Outcome::UNKNOWN) break;
    if (node_limit_ > 0 && tree_.playouts.load() >= node_limit_) break;
    if (!limits.use_time) continue;

    const TimeBudget& tb = limits.time;
    if (t_hard >= tb.maximum || (stop_at >= 0 && t_hard >= stop_at)) break;
    // The two most visited root moves, and when the best one last changed.
    int32_t first = 0, second = 0;
    Move best = MOVE_NONE;
    for (const Edge& e : *tree_.root) {
      if (mate_of(e) < 0) continue;  // proven lost (by the threat search, say): not a candidate
      int32_t n = e.visits.load(std::memory_order_relaxed);
      if (n > first) {
        second = first;
        first = n;
        best = e.move;
      } else if (n > second) {
        second = n;
      }
    }
    if (best != last_best) {
      last_best = best;
      last_change = t_soft;
    }
    if (stop_at >= 0 || t_soft < tb.minimum) continue;
    bool done = false;
    if (t_soft >= tb.optimum) {
      // A best move that changed lately or leads narrowly gets up to twice the optimum.
      bool unsettled = t_soft - last_change < tb.optimum / 4 || first < second * 3 / 2;
      done = !unsettled || t_soft >= 2 * tb.optimum;
    } else {
      // Stop early when the best move cannot be overtaken within the optimum.
      const int64_t rate = tree_.playouts.load() * 1000 / std::max<int64_t>(t_soft, 1);
      done = t_soft >= 100 && first - second > rate * (tb.optimum - t_soft) / 1000;
    }
    if (done) {
      stop_at = stop_time(tb, t_hard);
      if (t_hard >= stop_at) break;
    }
  }

  stop_workers_ = true;
  stop_mate = true;
  if (mate_thread.joinable()) mate_thread.join();
  if (params_.root_mate_search && params_.root_threat_search && !stop_requested_) check_decision();
  finish(decide());
  for (auto& t : threads_) t.join();
  threads_.clear();
}

}  // namespace jiriki::search
