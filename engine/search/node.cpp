// The node pool: budgeted allocation and background reclamation of unreachable subtrees.
#include "engine/search/node.h"

#include <algorithm>

namespace jiriki::search {

NodePool::NodePool(size_t capacity_bytes) : capacity_(capacity_bytes) {
  reclaimer_ = std::thread([this] { reclaim_loop(); });
}

NodePool::~NodePool() {
  {
    std::lock_guard lock(mutex_);
    quit_ = true;
  }
  cv_.notify_all();
  reclaimer_.join();
  for (Node* n : garbage_) free_subtree(n);
}

int NodePool::hashfull() const {
  size_t cap = std::max<size_t>(capacity(), 1);
  return int(std::min<size_t>(1000, used() * 1000 / cap));
}

// Over budget while a released tree is still being freed (just after a move), waits for the
// reclaimer rather than reporting a full pool.
bool NodePool::charge(size_t bytes) {
  for (bool waited = false;; waited = true) {
    size_t cur = used_.load(std::memory_order_relaxed);
    while (cur + bytes <= capacity_.load(std::memory_order_relaxed))
      if (used_.compare_exchange_weak(cur, cur + bytes, std::memory_order_relaxed)) return true;
    if (waited || !reclaiming_.load()) break;
    wait_reclaimed();
  }
  full_.store(true, std::memory_order_relaxed);
  return false;
}

Node* NodePool::new_node() {
  if (!charge(node_bytes())) return nullptr;
  return new Node;
}

bool NodePool::new_edges(Node* node, int n) {
  if (!charge(edge_bytes(n))) return false;
  node->edges = new Edge[n];
  node->num_edges = int16_t(n);
  return true;
}

void NodePool::free_node(Node* node) {
  if (node->edges) {
    delete[] node->edges;
    used_.fetch_sub(edge_bytes(node->num_edges), std::memory_order_relaxed);
  }
  delete node;
  used_.fetch_sub(node_bytes(), std::memory_order_relaxed);
}

// Iterative, since a line of play can be hundreds of nodes deep.
void NodePool::free_subtree(Node* root) {
  std::vector<Node*> stack{root};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (Edge& e : *n)
      if (Node* c = e.child.load(std::memory_order_relaxed)) stack.push_back(c);
    free_node(n);
  }
}

void NodePool::release(Node* subtree) {
  if (!subtree) return;
  {
    std::lock_guard lock(mutex_);
    garbage_.push_back(subtree);
    reclaiming_.store(true);
  }
  cv_.notify_all();
}

void NodePool::wait_reclaimed() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [this] { return garbage_.empty() && !busy_; });
}

void NodePool::reclaim_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    cv_.wait(lock, [this] { return quit_ || !garbage_.empty(); });
    if (quit_) return;
    std::vector<Node*> work;
    work.swap(garbage_);
    busy_ = true;
    lock.unlock();
    for (Node* n : work) free_subtree(n);
    lock.lock();
    busy_ = false;
    if (garbage_.empty()) reclaiming_.store(false);
    cv_.notify_all();
  }
}

}  // namespace jiriki::search
