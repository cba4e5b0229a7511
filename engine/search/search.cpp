// PUCT tree search: selection, new leaves, batched evaluation, landing, the solver, and the
// manager thread that watches the clock and decides (see search.h).
#include "engine/search/search.h"

#include <algorithm>
#include <cmath>

#include "engine/mate.h"
#include "engine/movegen.h"
#include "nn/features.h"

namespace jiriki::search {

using Clock = std::chrono::steady_clock;

int winrate_to_cp(float p) {
  p = std::clamp(p, 1e-6f, 1.0f - 1e-6f);
  return int(std::lround(-756.0 * std::log(1.0 / p - 1.0)));
}

// One step of a playout: the node left and the edge taken.
struct Step {
  Node* node;
  Edge* edge;
};

// A new leaf waiting in a worker's batch, with its path (a range of Worker::steps).
struct PendingLeaf {
  Node* node;
  Color us;  // side to move at the leaf, for the policy labels
  int first_step, num_steps;
};

struct Searcher::Worker {
  Position pos;                 // at the root between playouts
  EvalBatch batch;
  std::vector<PendingLeaf> leaves;
  std::vector<Step> steps;      // paths of the batch's leaves, one after another
  std::vector<Step> path;       // the playout in progress
  std::vector<float> logits;    // scratch for the softmax
  explicit Worker(int batch_size) : batch(batch_size) {}
};

namespace {

enum class PlayoutEnd { QUEUED, LANDED, COLLISION, FULL };

// Value of a finished or proven node for its side to move.
float settled_value(const Node* n) {
  switch (n->outcome()) {
    case Outcome::WIN: return 1.0f;
    case Outcome::LOSS: return 0.0f;
    default: return n->value;  // terminal draw: the draw value stored at creation
  }
}

// Root moves in the order the engine prefers them: proven wins (quickest first), then unproven
// moves by playouts, then proven losses (slowest first).
int64_t preference(const Edge& e) {
  const Node* c = e.child.load(std::memory_order_acquire);
  const Outcome o = c ? c->outcome() : Outcome::UNKNOWN;
  if (o == Outcome::LOSS) return (int64_t(3) << 40) - c->outcome_plies();
  if (o == Outcome::WIN) return (int64_t(1) << 40) + c->outcome_plies();
  return (int64_t(2) << 40) + (int64_t(e.visits.load(std::memory_order_relaxed)) << 8) + int64_t(e.prior * 255);
}

Edge* most_visited(const Node* n) {
  if (!n || !n->ready() || n->num_edges == 0) return nullptr;
  Edge* best = nullptr;
  for (Edge& e : *n)
    if (e.visits.load(std::memory_order_relaxed) > 0 && (!best || preference(e) > preference(*best))) best = &e;
  return best;
}

int mate_of(const Edge& e) {
  const Node* c = e.child.load(std::memory_order_acquire);
  if (!c) return 0;
  if (c->outcome() == Outcome::LOSS) return c->outcome_plies() + 1;
  if (c->outcome() == Outcome::WIN) return -(c->outcome_plies() + 1);
  return 0;
}

}  // namespace

// ---- selection and playouts ------------------------------------------------------------------

// What a playout needs from the searcher, kept here so that search.h stays small.
struct Playout {
  static Edge* select(const Searcher& s, Node* node, bool is_root);
  static PlayoutEnd run(Searcher& s, Searcher::Worker& w);
  static void land(Searcher& s, const Step* path, int len, float value, int weight, Outcome outcome, int plies);
  static void finish_batch(Searcher& s, Searcher::Worker& w);
};

Edge* Playout::select(const Searcher& s, Node* node, bool is_root) {
  const SearchParams& p = s.params_;
  int64_t sum_n = 0;
  double sum_w = 0.0;
  float visited_prior = 0.0f;
  for (const Edge& e : *node) {
    int n = e.visits.load(std::memory_order_relaxed) + e.virtual_loss.load(std::memory_order_relaxed);
    if (n > 0) {
      sum_n += n;
      sum_w += e.value_sum.load(std::memory_order_relaxed);
      visited_prior += e.prior;
    }
  }
  const float c = p.c_init + std::log((float(sum_n) + p.c_base + 1.0f) / p.c_base);
  const float fpu = is_root ? p.fpu_reduction_root : p.fpu_reduction;
  const float q_untried = sum_n > 0 ? std::max(0.0f, float(sum_w / double(sum_n)) - fpu * std::sqrt(visited_prior)) : 0.0f;
  const float sqrt_n = sum_n > 0 ? std::sqrt(float(sum_n)) : 1.0f;

  Edge* best = node->edges;
  float best_score = -1e30f;
  for (Edge& e : *node) {
    float score;
    const Node* child = e.child.load(std::memory_order_acquire);
    const Outcome o = child ? child->outcome() : Outcome::UNKNOWN;
    if (o == Outcome::LOSS) return &e;  // wins outright
    if (o == Outcome::WIN) {
      score = -1.0f;  // loses: only when nothing else is left
    } else {
      int n = e.visits.load(std::memory_order_relaxed) + e.virtual_loss.load(std::memory_order_relaxed);
      float q = n > 0 ? float(e.value_sum.load(std::memory_order_relaxed) / n) : q_untried;
      score = q + c * e.prior * sqrt_n / float(1 + n);
    }
    if (score > best_score) {
      best_score = score;
      best = &e;
    }
  }
  return best;
}

// Lands `weight` playouts with `value` (win probability of the side to move at the end of the
// path) on every edge of the path, takes their virtual loss back, and carries a proven outcome of
// the last node up as far as it decides its ancestors.
void Playout::land(Searcher& s, const Step* path, int len, float value, int weight, Outcome outcome, int plies) {
  float v = value;
  for (int i = len - 1; i >= 0; --i) {
    v = 1.0f - v;
    Edge* e = path[i].edge;
    Node* n = path[i].node;
    e->value_sum.fetch_add(double(v) * weight, std::memory_order_relaxed);
    e->visits.fetch_add(weight, std::memory_order_relaxed);
    e->virtual_loss.fetch_sub(weight, std::memory_order_relaxed);
    if (outcome == Outcome::LOSS) {  // the mover wins by this move
      if (n->outcome() != Outcome::WIN || n->outcome_plies() > plies + 1) n->set_outcome(Outcome::WIN, plies + 1);
      outcome = Outcome::WIN;
      plies = n->outcome_plies();
    } else if (outcome == Outcome::WIN) {  // the mover loses by this move: lost if every move loses
      int longest = 0;
      for (const Edge& o : *n) {
        const Node* c = o.child.load(std::memory_order_acquire);
        if (!c || c->outcome() != Outcome::WIN) {
          longest = -1;
          break;
        }
        longest = std::max(longest, c->outcome_plies());
      }
      if (longest >= 0) {
        n->set_outcome(Outcome::LOSS, longest + 1);
        outcome = Outcome::LOSS;
        plies = longest + 1;
      } else {
        outcome = Outcome::UNKNOWN;
      }
    } else {
      outcome = Outcome::UNKNOWN;
    }
  }
  s.playouts_done_.fetch_add(weight, std::memory_order_relaxed);
}

PlayoutEnd Playout::run(Searcher& s, Searcher::Worker& w) {
  Position& pos = w.pos;
  std::vector<Step>& path = w.path;
  path.clear();
  Node* node = s.root_;
  PlayoutEnd end;
  for (;;) {
    uint32_t pending = node->pending.load(std::memory_order_acquire);
    if (pending & Node::EVALUATING) {
      // A leaf still waiting for its evaluation: this playout lands with it.
      if (!node->pending.compare_exchange_strong(pending, pending + 1, std::memory_order_acq_rel)) continue;
      end = PlayoutEnd::COLLISION;
      break;
    }
    const Outcome o = node->outcome();
    if (node->terminal || (node != s.root_ && (o == Outcome::WIN || o == Outcome::LOSS))) {
      land(s, path.data(), int(path.size()), settled_value(node), 1, o, node->outcome_plies());
      end = PlayoutEnd::LANDED;
      break;
    }
    Edge* e = select(s, node, node == s.root_);
    e->virtual_loss.fetch_add(1, std::memory_order_relaxed);
    path.push_back({node, e});
    pos.do_move(e->move);
    Node* child = e->child.load(std::memory_order_acquire);
    if (child) {
      node = child;
      continue;
    }

    // A new leaf: is the game over here, or is there a short forced mate? Otherwise it goes to the
    // network. Everything is settled before the node is linked, so that others see it whole.
    const Color us = pos.side_to_move();
    Outcome result = Outcome::UNKNOWN;
    int result_plies = 0;
    float value = 0.5f;
    MoveList moves;
    switch (pos.repetition(1)) {
      case Repetition::DRAW: result = Outcome::DRAW; value = s.draw_value(us); break;
      case Repetition::WIN: result = Outcome::WIN; break;
      case Repetition::LOSE: result = Outcome::LOSS; break;
      case Repetition::NONE: break;
    }
    if (result == Outcome::UNKNOWN) {
      generate<GenType::LEGAL>(pos, moves);
      if (moves.size() == 0) {
        result = Outcome::LOSS;
      } else if (pos.declaration_win(s.params_.entering_king_rule)) {
        result = Outcome::WIN;
        result_plies = 1;
      } else if (s.params_.max_moves_to_draw > 0 && pos.game_ply() > s.params_.max_moves_to_draw) {
        result = Outcome::DRAW;
        value = s.draw_value(us);
      } else {
        for (int k = 1; k <= s.params_.leaf_mate_plies; k += 2)
          if (mate_in_ply(pos, k)) {
            result = Outcome::WIN;
            result_plies = k;
            break;
          }
      }
    }
    Node* fresh = s.pool_.new_node();
    if (fresh && result == Outcome::UNKNOWN && !s.pool_.new_edges(fresh, moves.size())) {
      s.pool_.free_node(fresh);
      fresh = nullptr;
    }
    if (!fresh) {
      for (const Step& st : path) st.edge->virtual_loss.fetch_sub(1, std::memory_order_relaxed);
      end = PlayoutEnd::FULL;
      break;
    }
    if (result == Outcome::UNKNOWN) {
      for (int i = 0; i < moves.size(); ++i) fresh->edges[i].move = moves.moves[i];
    } else {
      fresh->terminal = true;
      fresh->value = result == Outcome::WIN ? 1.0f : result == Outcome::LOSS ? 0.0f : value;
      fresh->set_outcome(result, result_plies);
    }
    if (!e->child.compare_exchange_strong(child, fresh, std::memory_order_acq_rel)) {
      s.pool_.free_node(fresh);  // another thread linked this leaf first; follow theirs
      node = child;
      continue;
    }
    if (fresh->terminal) {
      uint32_t collisions = fresh->pending.exchange(0, std::memory_order_acq_rel) & ~Node::EVALUATING;
      land(s, path.data(), int(path.size()), fresh->value, 1 + int(collisions), result, result_plies);
      end = PlayoutEnd::LANDED;
    } else {
      nn::encode_features(pos, w.batch.add());
      w.leaves.push_back({fresh, us, int(w.steps.size()), int(path.size())});
      w.steps.insert(w.steps.end(), path.begin(), path.end());
      end = PlayoutEnd::QUEUED;
    }
    int depth = int(path.size());
    int seen = s.seldepth_.load(std::memory_order_relaxed);
    while (depth > seen && !s.seldepth_.compare_exchange_weak(seen, depth)) {}
    break;
  }
  for (size_t i = 0; i < path.size(); ++i) pos.undo_move();
  return end;
}

// Expands the batch's leaves with the network's answers and lands their playouts.
void Playout::finish_batch(Searcher& s, Searcher::Worker& w) {
  const float inv_t = 1.0f / s.params_.softmax_temperature;
  for (int i = 0; i < int(w.leaves.size()); ++i) {
    const PendingLeaf& leaf = w.leaves[i];
    Node* n = leaf.node;
    const float* policy = w.batch.policy(i);
    w.logits.resize(n->num_edges);
    float max_logit = -1e30f;
    for (int j = 0; j < n->num_edges; ++j) {
      w.logits[j] = policy[nn::move_to_label(n->edges[j].move, leaf.us)] * inv_t;
      max_logit = std::max(max_logit, w.logits[j]);
    }
    float sum = 0.0f;
    for (int j = 0; j < n->num_edges; ++j) sum += (w.logits[j] = std::exp(w.logits[j] - max_logit));
    for (int j = 0; j < n->num_edges; ++j) n->edges[j].prior = w.logits[j] / sum;
    n->value = w.batch.value(i);
    uint32_t collisions = n->pending.exchange(0, std::memory_order_acq_rel) & ~Node::EVALUATING;
    land(s, w.steps.data() + leaf.first_step, leaf.num_steps, n->value, 1 + int(collisions), Outcome::UNKNOWN, 0);
  }
}

void Searcher::worker_loop(Worker& w) {
  const int batch = w.batch.capacity();
  try {
    while (!stop_workers_.load(std::memory_order_relaxed)) {
      w.batch.clear();
      w.leaves.clear();
      w.steps.clear();
      int collisions = 0;
      bool last_batch = false;
      for (int attempts = 0; w.batch.size() < batch && collisions <= batch / 2 && attempts < 4 * batch + 16; ++attempts) {
        if (stop_workers_.load(std::memory_order_relaxed) || root_->outcome() != Outcome::UNKNOWN) {
          last_batch = true;
          break;
        }
        if (node_limit_ > 0 && playouts_reserved_.fetch_add(1, std::memory_order_relaxed) >= node_limit_) {
          last_batch = true;
          break;
        }
        PlayoutEnd end = Playout::run(*this, w);
        if (end == PlayoutEnd::COLLISION) ++collisions;
        if (end == PlayoutEnd::FULL) {
          last_batch = true;
          break;
        }
      }
      if (w.batch.size() > 0) {
        queue_->evaluate(w.batch);
        Playout::finish_batch(*this, w);
      } else if (collisions > 0) {
        std::this_thread::yield();  // every leaf in reach is being evaluated by another thread
      }
      if (last_batch) break;
    }
  } catch (...) {
    std::lock_guard lock(error_mutex_);
    if (!worker_error_) worker_error_ = std::current_exception();
    // The leaves of the failed batch can never be evaluated: settle them as unknown draws so that
    // no playout waits on them forever.
    for (const PendingLeaf& leaf : w.leaves) {
      Node* n = leaf.node;
      if (!n->ready()) {
        n->value = 0.5f;
        n->terminal = true;
        uint32_t collisions = n->pending.exchange(0, std::memory_order_acq_rel) & ~Node::EVALUATING;
        Playout::land(*this, w.steps.data() + leaf.first_step, leaf.num_steps, 0.5f, 1 + int(collisions), Outcome::UNKNOWN, 0);
      }
    }
  }
  {
    std::lock_guard lock(signal_mutex_);
    ++workers_done_;
  }
  signal_cv_.notify_all();
}

// ---- the searcher ----------------------------------------------------------------------------

Searcher::Searcher(size_t hash_bytes) : pool_(hash_bytes) {}

Searcher::~Searcher() {
  stop();
  wait();
  if (root_) pool_.release(root_);
}

float Searcher::draw_value(Color side_to_move) const {
  const Color engine = root_pos_.side_to_move();
  const float v = engine == BLACK ? params_.draw_value_black : params_.draw_value_white;
  return side_to_move == engine ? v : 1.0f - v;
}

void Searcher::set_params(const SearchParams& p) {
  // Terminal values, outcomes and priors stored in the tree depend on these.
  bool stale = p.draw_value_black != params_.draw_value_black || p.draw_value_white != params_.draw_value_white ||
               p.max_moves_to_draw != params_.max_moves_to_draw ||
               p.entering_king_rule != params_.entering_king_rule || p.leaf_mate_plies != params_.leaf_mate_plies ||
               p.softmax_temperature != params_.softmax_temperature;
  params_ = p;
  if (stale) clear_tree();
}

void Searcher::set_hash_size(size_t bytes) {
  if (bytes < pool_.used()) clear_tree();  // the tree no longer fits
  pool_.set_capacity(bytes);
}

void Searcher::clear_tree() {
  if (root_) pool_.release(root_);
  root_ = nullptr;
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
  if (root_ && tree_sfen_ == pos_sfen_ && pos_moves_.size() >= tree_moves_.size() &&
      std::equal(tree_moves_.begin(), tree_moves_.end(), pos_moves_.begin()) && !(draw_sided && color != tree_color_)) {
    keep = root_;
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
  if (keep != root_) {
    if (keep) keep_edge->child.store(nullptr);  // detach before the rest goes
    if (root_) pool_.release(root_);
    root_ = keep;
  }
  tree_sfen_ = pos_sfen_;
  tree_moves_ = pos_moves_;
  tree_color_ = color;
  pool_.clear_full_flag();

  if (!root_) {
    root_ = pool_.new_node();
    MoveList moves = legal_moves(root_pos_);
    if (!root_ || !pool_.new_edges(root_, moves.size())) {
      // Not even the root fits: fall back on a budget of one root, whatever USI_Hash says.
      if (root_) pool_.free_node(root_);
      pool_.set_capacity(std::max(pool_.capacity(), pool_.used() + NodePool::node_bytes() + NodePool::edge_bytes(moves.size())));
      root_ = pool_.new_node();
      pool_.new_edges(root_, moves.size());
    }
    for (int i = 0; i < moves.size(); ++i) root_->edges[i].move = moves.moves[i];
    Worker w(1);
    nn::encode_features(root_pos_, w.batch.add());
    w.leaves.push_back({root_, color, 0, 0});
    try {
      queue_->evaluate(w.batch);
    } catch (...) {
      worker_error_ = std::current_exception();
      pool_.release(root_);
      root_ = nullptr;
      return false;
    }
    Playout::finish_batch(*this, w);
  }
  return true;
}

void Searcher::start(const SearchLimits& limits, std::function<void(const SearchInfo&)> on_info,
                     std::function<void(const SearchResult&)> on_done, int info_interval_ms) {
  wait();
  start_time_ = Clock::now();
  stop_requested_ = false;
  ponderhit_ = false;
  stop_workers_ = false;
  finished_ = false;
  workers_done_ = 0;
  playouts_reserved_ = 0;
  playouts_done_ = 0;
  seldepth_ = 0;
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

void Searcher::ponderhit() {
  {
    std::lock_guard lock(signal_mutex_);
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
  info.nodes = playouts_done_.load();
  info.time_ms = elapsed_ms(start_time_);
  info.nps = info.nodes * 1000 / std::max<int64_t>(info.time_ms, 1);
  info.hashfull = pool_.hashfull();
  info.seldepth = seldepth_.load();
  if (!root_ || !root_->ready()) return info;
  std::vector<const Edge*> order;
  for (const Edge& e : *root_) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [](const Edge* a, const Edge* b) { return preference(*a) > preference(*b); });
  const int lines = std::min<int>(std::max(params_.multipv, 1), int(order.size()));
  for (int i = 0; i < lines; ++i) {
    const Edge& e = *order[i];
    RootLine line;
    line.move = e.move;
    line.visits = e.visits.load();
    line.winrate = line.visits > 0 ? float(e.value_sum.load() / line.visits) : 0.5f;
    line.mate = mate_of(e);
    if (line.mate > 0) line.winrate = 1.0f;
    if (line.mate < 0) line.winrate = 0.0f;
    line.pv.push_back(e.move);
    for (const Edge* next = most_visited(e.child.load()); next && line.pv.size() < 128; next = most_visited(next->child.load()))
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
  if (legal_moves(root_pos_).size() == 0 || root_pos_.declaration_win(params_.entering_king_rule)) {
    SearchResult r;
    r.kind = legal_moves(root_pos_).size() == 0 ? SearchResult::RESIGN : SearchResult::WIN;
    if (limits.ponder || limits.infinite) hold();
    finish(r);
    return;
  }
  const bool root_ready = queue_ && prepare_root();
  playouts_done_ = 0;  // the root's own evaluation is not a playout
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
  if (int(workers_.size()) != params_.threads || (workers_.size() && workers_[0]->batch.capacity() != batch)) {
    workers_.clear();
    for (int i = 0; i < params_.threads; ++i) workers_.push_back(std::make_unique<Worker>(batch));
  }
  for (auto& w : workers_) {
    w->pos = root_pos_;
    threads_.emplace_back([this, &w] { worker_loop(*w); });
  }

  // A df-pn solver on the root beside the tree search.
  std::atomic<bool> stop_mate{false};
  std::thread mate_thread;
  if (params_.root_mate_search) {
    mate_thread = std::thread([this, &stop_mate] {
      Position pos = root_pos_;
      MateLimits ml;
      ml.stop = &stop_mate;
      MateResult m = mate_solver_.solve(pos, ml);
      if (m.status == MateResult::MATE && !m.pv.empty()) {
        {
          std::lock_guard lock(signal_mutex_);
          mate_pv_ = m.pv;
          root_mate_found_ = true;
        }
        signal_cv_.notify_all();
      }
    });
  }

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
    }
    const int64_t t_soft = elapsed_ms(start_time_);  // pondering counts towards the optimum
    const int64_t t_hard = elapsed_ms(origin);
    if (on_info && t_soft >= next_info) {
      on_info(info());
      next_info = t_soft + info_interval_ms;
    }
    if (ponder || limits.infinite) continue;

    // The search has nothing more to do.
    if (workers_finished || mate_found || root_->outcome() != Outcome::UNKNOWN) break;
    if (node_limit_ > 0 && playouts_done_.load() >= node_limit_) break;
    if (!limits.use_time) continue;

    const TimeBudget& tb = limits.time;
    if (t_hard >= tb.maximum || (stop_at >= 0 && t_hard >= stop_at)) break;
    // The two most visited root moves, and when the best one last changed.
    int32_t first = 0, second = 0;
    Move best = MOVE_NONE;
    for (const Edge& e : *root_) {
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
      const int64_t rate = playouts_done_.load() * 1000 / std::max<int64_t>(t_soft, 1);
      done = t_soft >= 100 && first - second > rate * (tb.optimum - t_soft) / 1000;
    }
    if (done) {
      stop_at = stop_time(tb, t_hard);
      if (t_hard >= stop_at) break;
    }
  }

  stop_workers_ = true;
  stop_mate = true;
  finish(decide());
  for (auto& t : threads_) t.join();
  threads_.clear();
  if (mate_thread.joinable()) mate_thread.join();
}

}  // namespace jiriki::search
