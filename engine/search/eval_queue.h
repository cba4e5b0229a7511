// The evaluation queue between tree searches and the network. A client (a search thread; later a
// self-play game) fills an EvalBatch with encoded positions and hands it over; a worker thread
// per nn::Evaluator runs it. Batches that wait together are merged into one network call, so many
// small clients (self-play games) still fill a GPU, while one full batch goes through without a
// copy. The tree search knows nothing of evaluators, threads or devices beyond this interface.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nn/backend.h"

namespace jiriki::search {

// Positions waiting for the network, and the network's answers once evaluated.
class EvalBatch {
 public:
  explicit EvalBatch(int capacity);
  int capacity() const { return capacity_; }
  int size() const { return n_; }
  bool full() const { return n_ == capacity_; }
  // Appends a position; returns its nn::PACKED_INPUT_BYTES to encode into (nn::encode_packed_features).
  uint8_t* add() { return features_.data() + size_t(n_++) * nn::PACKED_INPUT_BYTES; }
  void clear() { n_ = 0; }
  const float* policy(int i) const { return policy_.data() + size_t(i) * nn::POLICY_SIZE; }  // raw logits
  float value(int i) const { return value_[i]; }  // win probability of the side to move

 private:
  friend class EvalQueue;
  int capacity_, n_ = 0;
  std::vector<uint8_t> features_;  // bit-packed planes
  std::vector<float> policy_, value_;
};

class EvalQueue {
 public:
  // One worker thread per evaluator. Every evaluator must take batches of the same maximum size.
  explicit EvalQueue(std::vector<std::unique_ptr<nn::Evaluator>> evaluators);
  ~EvalQueue();
  EvalQueue(const EvalQueue&) = delete;
  EvalQueue& operator=(const EvalQueue&) = delete;

  // Evaluates every position of `batch` (1 <= size <= max_batch()); blocks until done. Thread-safe.
  // Rethrows what the evaluator threw.
  void evaluate(EvalBatch& batch);
  int max_batch() const { return max_batch_; }
  std::string name() const;  // the evaluators' description
  // Runs every evaluator at each power of two up to max_batch() and at max_batch(), so that the
  // setup a backend does on a batch size's first use (the CUDA backend's kernel choice and graph
  // capture per power-of-two bucket) is not paid inside a timed search, where collisions make
  // batches of any size. Call while no client waits.
  void warm_up();

  // Network calls and positions evaluated since the last reset; positions / (calls * max_batch)
  // is the batch fill.
  struct Stats {
    int64_t calls = 0, positions = 0;
  };
  Stats stats() const;
  void reset_stats();

 private:
  struct Request {
    EvalBatch* batch = nullptr;
    bool done = false;
    std::exception_ptr error;
  };
  void worker_loop(int index);

  std::vector<std::unique_ptr<nn::Evaluator>> evaluators_;
  int max_batch_;
  mutable std::mutex mutex_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<Request*> queue_;
  Stats stats_;
  bool quit_ = false;
  std::vector<std::thread> workers_;
};

// A queue over `evaluators` evaluators of `model` made with `options` (each on its own thread).
std::unique_ptr<EvalQueue> make_eval_queue(const nn::Model& model, const nn::BackendOptions& options, int evaluators);

}  // namespace jiriki::search
