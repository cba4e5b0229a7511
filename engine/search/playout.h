// The steps of one PUCT playout, shared by the two drivers of the tree search: Searcher (several
// threads on one tree, search.h) and self-play (one thread stepping many games' trees, each by a
// leaf at a time, selfplay/). A playout selects down the tree with virtual loss (select_child),
// classifies a new leaf (the end of the game by shogi/game_rules.h, a short forced mate) or queues it for the network
// (run_playout), and once the network has answered, expands the leaf and lands the playout on
// its path, carrying proven wins and losses upwards (finish_batch, land). A LeafBatch may hold
// leaves of many trees: every leaf knows its own.
#pragma once
#include <atomic>
#include <cstdint>
#include <vector>

#include "engine/search/eval_queue.h"
#include "engine/search/node.h"
#include "shogi/game_rules.h"
#include "shogi/movegen.h"
#include "shogi/position.h"

namespace jiriki::search {

struct SearchParams;

// One step of a playout: the node left and the edge taken.
struct Step {
  Node* node;
  Edge* edge;
};

// A search tree with what its playouts need: the parameters its leaves are judged by, the pool
// it allocates from, its root, and counters of the search in progress.
struct Tree {
  const SearchParams* params = nullptr;
  NodePool* pool = nullptr;
  Node* root = nullptr;
  Color engine = BLACK;              // the side whose draw value applies (to move at the root)
  std::atomic<int64_t> playouts{0};  // playouts landed (a root's own evaluation is none)
  std::atomic<int> seldepth{0};      // the deepest playout
  // The value of a draw for the side to move at a node.
  float draw_value(Color side_to_move) const;
};

// A new leaf waiting for the network, with its tree and its path (a range of LeafBatch::steps).
struct PendingLeaf {
  Tree* tree;
  Node* node;
  Color us;  // side to move at the leaf, for the policy labels
  int first_step, num_steps;
};

// New leaves (of one tree or of many) on their way to the network as one batch, and a playout's
// scratch space. One per thread.
struct LeafBatch {
  explicit LeafBatch(int capacity) : batch(capacity) {}
  EvalBatch batch;
  std::vector<PendingLeaf> leaves;
  std::vector<Step> steps;    // the leaves' paths, one after another
  std::vector<Step> path;     // the playout in progress
  std::vector<float> logits;  // softmax scratch
  void clear() {
    batch.clear();
    leaves.clear();
    steps.clear();
  }
};

enum class PlayoutEnd {
  QUEUED,     // a new leaf went into the batch; the playout lands with it
  LANDED,     // it ended on a finished or proven node and has landed already
  COLLISION,  // it ran into a leaf still waiting for the network and lands with that leaf
  FULL,       // the node pool is spent; nothing was changed
};

// The move to search at `node` by PUCT (search.h gives the formula); `node` must be expanded.
Edge* select_child(const Tree& tree, const Node* node);
// One playout from tree.root, which must be ready and is the position `pos` (restored on return).
// The batch must have room for one more position.
PlayoutEnd run_playout(Tree& tree, Position& pos, LeafBatch& lb);
// Makes tree.root a new node for `pos` with one edge per legal move and queues it for the
// network. False (nothing changed) when the pool is spent. `pos` must have a legal move.
bool queue_root(Tree& tree, const Position& pos, LeafBatch& lb);
// After lb.batch has been evaluated: expands every leaf and lands the playouts that wait on it.
void finish_batch(LeafBatch& lb);
// After the evaluation of lb.batch failed: settles its leaves as unknown draws, so that no
// playout waits on them forever.
void fail_batch(LeafBatch& lb);

// Root moves in the order the engine prefers them: proven wins (quickest first), then unproven
// moves by playouts, then proven losses (slowest first). Greater is better.
int64_t preference(const Edge& e);
// The preferred move of a node among those with playouts, or nullptr.
Edge* most_visited(const Node* n);
// > 0: the move mates in that many plies; < 0: it is mated in -that many; 0: unproven.
int mate_of(const Edge& e);
// The win rate of a move for the side that makes it: 1 or 0 when proven, else its mean value.
float edge_winrate(const Edge& e);

}  // namespace jiriki::search
