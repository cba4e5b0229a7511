// The search tree: nodes, the edges out of them (one per legal move, carrying the statistics that
// selection reads, so that choosing a child touches one contiguous array), and the pool that
// bounds the tree's memory by USI_Hash and frees subtrees that can no longer be reached.
//
// Every node has exactly one path from the game's root, so nothing here is a transposition table:
// repetitions and the move count are properties of the path, and a node's terminal status stays
// right for as long as the node lives.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "shogi/types.h"

namespace jiriki::search {

struct Node;

// A proven game-theoretic result for the side to move at a node.
enum class Outcome : uint8_t { UNKNOWN, WIN, LOSS, DRAW };

// One legal move out of a node. Values are win probabilities of the side that makes the move.
struct Edge {
  Move move = MOVE_NONE;
  float prior = 0.0f;                    // policy probability (softmax with temperature)
  std::atomic<int32_t> visits{0};        // playouts that have come back through this edge
  std::atomic<int32_t> virtual_loss{0};  // playouts in flight; each counts as a loss until it lands
  std::atomic<double> value_sum{0.0};    // sum of the returned values
  std::atomic<Node*> child{nullptr};     // created on the first visit
};

struct Node {
  // `pending`: the EVALUATING bit while the node waits for the network (or for its creator to
  // classify it), plus the number of playouts that ran into it meanwhile (collisions). Whoever
  // clears the bit takes the count and lands those playouts together with its own, so a collision
  // costs neither a network slot nor a visit. Packing both in one word makes the hand-over atomic.
  static constexpr uint32_t EVALUATING = 1u << 31;
  std::atomic<uint32_t> pending{EVALUATING};
  std::atomic<uint32_t> proof{0};  // Outcome | plies << 8, see outcome()
  bool terminal = false;           // the game is over here (mate, repetition, declaration, move limit)
  int16_t num_edges = 0;
  float value = 0.5f;     // network (or terminal) win probability of the side to move
  Edge* edges = nullptr;  // num_edges entries, valid once the node is ready

  bool ready() const { return !(pending.load(std::memory_order_acquire) & EVALUATING); }
  Outcome outcome() const { return Outcome(proof.load(std::memory_order_acquire) & 0xff); }
  // Plies from this node to the end of the game when the outcome is proven.
  int outcome_plies() const { return int(proof.load(std::memory_order_acquire) >> 8); }
  void set_outcome(Outcome o, int plies) { proof.store(uint32_t(o) | uint32_t(plies) << 8, std::memory_order_release); }
  Edge* begin() const { return edges; }
  Edge* end() const { return edges + num_edges; }
};

// Allocates nodes and edge arrays within a byte budget and frees released subtrees on a thread of
// its own, so that dropping a tree of millions of nodes never delays a move.
class NodePool {
 public:
  explicit NodePool(size_t capacity_bytes);
  ~NodePool();
  NodePool(const NodePool&) = delete;
  NodePool& operator=(const NodePool&) = delete;

  void set_capacity(size_t bytes) { capacity_.store(bytes); }
  size_t capacity() const { return capacity_.load(); }
  size_t used() const { return used_.load(std::memory_order_relaxed); }
  int hashfull() const;  // used / capacity in per mille, as USI reports it
  bool full() const { return full_.load(std::memory_order_relaxed); }
  void clear_full_flag() { full_.store(false); }

  // A fresh node in the EVALUATING state, or nullptr (and the full flag set) when the budget is spent.
  Node* new_node();
  // Gives `node` `n` edges; false (and the full flag set) when the budget is spent.
  bool new_edges(Node* node, int n);
  // Frees a node that was never linked into the tree.
  void free_node(Node* node);
  // Frees a whole subtree, which no search may reach any more, in the background.
  void release(Node* subtree);
  // Blocks until every released subtree has been freed (tests, and before shrinking the budget).
  void wait_reclaimed();

  // Bytes charged for a node and for an edge array; malloc's own header is counted too.
  static constexpr size_t ALLOC_OVERHEAD = 16;
  static size_t node_bytes() { return sizeof(Node) + ALLOC_OVERHEAD; }
  static size_t edge_bytes(int n) { return sizeof(Edge) * size_t(n) + ALLOC_OVERHEAD; }

 private:
  bool charge(size_t bytes);
  void free_subtree(Node* root);
  void reclaim_loop();

  std::atomic<size_t> capacity_;
  std::atomic<size_t> used_{0};
  std::atomic<bool> full_{false};
  std::atomic<bool> reclaiming_{false};  // released subtrees not yet freed
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<Node*> garbage_;
  bool busy_ = false, quit_ = false;
  std::thread reclaimer_;
};

}  // namespace jiriki::search
