// The steps of one playout (see playout.h): selection, new leaves, landing, the solver.
#include "engine/search/playout.h"

#include <algorithm>
#include <cmath>

#include "engine/mate.h"
#include "engine/search/search.h"
#include "nn/features.h"

namespace jiriki::search {

float Tree::draw_value(Color side_to_move) const {
  const float v = engine == BLACK ? params->draw_value_black : params->draw_value_white;
  return side_to_move == engine ? v : 1.0f - v;
}

namespace {

// Value of a finished or proven node for its side to move.
float settled_value(const Node* n) {
  switch (n->outcome()) {
    case Outcome::WIN: return 1.0f;
    case Outcome::LOSS: return 0.0f;
    default: return n->value;  // terminal draw: the draw value stored at creation
  }
}

// Lands `weight` playouts with `value` (win probability of the side to move at the end of the
// path) on every edge of the path, takes their virtual loss back, and carries a proven outcome of
// the last node up as far as it decides its ancestors.
void land(Tree& tree, const Step* path, int len, float value, int weight, Outcome outcome, int plies) {
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
  if (len > 0) tree.playouts.fetch_add(weight, std::memory_order_relaxed);
}

}  // namespace

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

float edge_winrate(const Edge& e) {
  const int m = mate_of(e);
  if (m != 0) return m > 0 ? 1.0f : 0.0f;
  const int n = e.visits.load(std::memory_order_relaxed);
  return n > 0 ? float(e.value_sum.load(std::memory_order_relaxed) / n) : 0.5f;
}

Edge* select_child(const Tree& tree, const Node* node) {
  const SearchParams& p = *tree.params;
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
  const float fpu = node == tree.root ? p.fpu_reduction_root : p.fpu_reduction;
  const float q_untried =
      sum_n > 0 ? std::max(0.0f, float(sum_w / double(sum_n)) - fpu * std::sqrt(visited_prior)) : 0.0f;
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

PlayoutEnd run_playout(Tree& tree, Position& pos, LeafBatch& lb) {
  const SearchParams& params = *tree.params;
  std::vector<Step>& path = lb.path;
  path.clear();
  Node* node = tree.root;
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
    if (node->terminal || (node != tree.root && (o == Outcome::WIN || o == Outcome::LOSS))) {
      land(tree, path.data(), int(path.size()), settled_value(node), 1, o, node->outcome_plies());
      end = PlayoutEnd::LANDED;
      break;
    }
    Edge* e = select_child(tree, node);
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
    switch (judge_position(pos, params.rules, moves, 1)) {  // the first return ends a line
      case Ending::REPETITION_DRAW:
      case Ending::MAX_MOVES:
        result = Outcome::DRAW;
        value = tree.draw_value(us);
        break;
      case Ending::REPETITION_WIN: result = Outcome::WIN; break;
      case Ending::REPETITION_LOSS:
      case Ending::MATED: result = Outcome::LOSS; break;
      case Ending::DECLARATION:
        result = Outcome::WIN;
        result_plies = 1;
        break;
      case Ending::NONE:
        for (int k = 1; k <= params.leaf_mate_plies; k += 2)
          if (mate_in_ply(pos, k)) {
            result = Outcome::WIN;
            result_plies = k;
            break;
          }
        break;
    }
    Node* fresh = tree.pool->new_node();
    if (fresh && result == Outcome::UNKNOWN && !tree.pool->new_edges(fresh, moves.size())) {
      tree.pool->free_node(fresh);
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
      tree.pool->free_node(fresh);  // another thread linked this leaf first; follow theirs
      node = child;
      continue;
    }
    if (fresh->terminal) {
      uint32_t collisions = fresh->pending.exchange(0, std::memory_order_acq_rel) & ~Node::EVALUATING;
      land(tree, path.data(), int(path.size()), fresh->value, 1 + int(collisions), result, result_plies);
      end = PlayoutEnd::LANDED;
    } else {
      nn::encode_packed_features(pos, lb.batch.add());
      lb.leaves.push_back({&tree, fresh, us, int(lb.steps.size()), int(path.size())});
      lb.steps.insert(lb.steps.end(), path.begin(), path.end());
      end = PlayoutEnd::QUEUED;
    }
    int depth = int(path.size());
    int seen = tree.seldepth.load(std::memory_order_relaxed);
    while (depth > seen && !tree.seldepth.compare_exchange_weak(seen, depth)) {}
    break;
  }
  for (size_t i = 0; i < path.size(); ++i) pos.undo_move();
  return end;
}

bool queue_root(Tree& tree, const Position& pos, LeafBatch& lb) {
  MoveList moves;
  generate<GenType::LEGAL>(pos, moves);
  Node* root = tree.pool->new_node();
  if (!root) return false;
  if (!tree.pool->new_edges(root, moves.size())) {
    tree.pool->free_node(root);
    return false;
  }
  for (int i = 0; i < moves.size(); ++i) root->edges[i].move = moves.moves[i];
  tree.root = root;
  nn::encode_packed_features(pos, lb.batch.add());
  lb.leaves.push_back({&tree, root, pos.side_to_move(), int(lb.steps.size()), 0});
  return true;
}

void finish_batch(LeafBatch& lb) {
  for (int i = 0; i < int(lb.leaves.size()); ++i) {
    const PendingLeaf& leaf = lb.leaves[i];
    Node* n = leaf.node;
    const float inv_t = 1.0f / leaf.tree->params->softmax_temperature;
    const float* policy = lb.batch.policy(i);
    lb.logits.resize(n->num_edges);
    float max_logit = -1e30f;
    for (int j = 0; j < n->num_edges; ++j) {
      lb.logits[j] = policy[nn::move_to_label(n->edges[j].move, leaf.us)] * inv_t;
      max_logit = std::max(max_logit, lb.logits[j]);
    }
    float sum = 0.0f;
    for (int j = 0; j < n->num_edges; ++j) sum += (lb.logits[j] = std::exp(lb.logits[j] - max_logit));
    for (int j = 0; j < n->num_edges; ++j) n->edges[j].prior = lb.logits[j] / sum;
    n->value = lb.batch.value(i);
    uint32_t collisions = n->pending.exchange(0, std::memory_order_acq_rel) & ~Node::EVALUATING;
    land(*leaf.tree, lb.steps.data() + leaf.first_step, leaf.num_steps, n->value, 1 + int(collisions), Outcome::UNKNOWN,
         0);
  }
}

void fail_batch(LeafBatch& lb) {
  for (const PendingLeaf& leaf : lb.leaves) {
    Node* n = leaf.node;
    if (n->ready()) continue;
    n->value = 0.5f;
    n->terminal = true;
    uint32_t collisions = n->pending.exchange(0, std::memory_order_acq_rel) & ~Node::EVALUATING;
    land(*leaf.tree, lb.steps.data() + leaf.first_step, leaf.num_steps, 0.5f, 1 + int(collisions), Outcome::UNKNOWN, 0);
  }
}

}  // namespace jiriki::search
