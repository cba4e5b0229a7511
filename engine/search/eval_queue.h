// The evaluation queue between tree searches and the network. A client (a search thread; later a
// self-play game) fills an EvalBatch with encoded positions and hands it over; a worker thread
// per nn::Evaluator runs it. Batches that wait together are merged into one network call, so many
// small clients (self-play games) still fill a GPU, while one full batch goes through without a
// copy. Where every client has an evaluator of its own (a CPU engine's search threads), the client
// runs it itself instead: no hand-over between threads per batch, whose wake-ups cost more than the
// evaluation of a small network on some systems (under Wine each one is a round trip to wineserver).
// The tree search knows nothing of evaluators, threads or devices beyond this interface.
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

// Who runs a batch's network call.
enum class Dispatch {
  WORKERS,  // a worker thread per evaluator, merging the batches that wait together
  CALLER,   // the client, on a free evaluator (waiting for one when all are busy); nothing is merged
};

class EvalQueue {
 public:
  // Every evaluator must take batches of the same maximum size. WORKERS starts one thread per evaluator.
  explicit EvalQueue(std::vector<std::unique_ptr<nn::Evaluator>> evaluators, Dispatch dispatch = Dispatch::WORKERS);
  ~EvalQueue();
  EvalQueue(const EvalQueue&) = delete;
  EvalQueue& operator=(const EvalQueue&) = delete;

  // A batch handed over by submit(); it and its batch must live until wait() has returned.
  struct Pending {
    EvalBatch* batch = nullptr;
    bool done = false;
    std::exception_ptr error;
  };
  // Evaluates every position of `batch` (1 <= size <= max_batch()); blocks until done. Thread-safe.
  // Rethrows what the evaluator threw.
  void evaluate(EvalBatch& batch) {
    Pending p;
    submit(batch, p);
    wait(p);
  }
  // evaluate() in two halves, so that one thread can have batches in several queues at once (the
  // arena's worker: one batch per network): submit() hands `batch` over and returns (CALLER:
  // once evaluated); wait() blocks until it is done and rethrows what the evaluator threw.
  void submit(EvalBatch& batch, Pending& pending);
  void wait(Pending& pending);
  int max_batch() const { return max_batch_; }
  Dispatch dispatch() const { return dispatch_; }
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
  void worker_loop(int index);
  void evaluate_on_caller(Pending& pending);

  std::vector<std::unique_ptr<nn::Evaluator>> evaluators_;
  int max_batch_;
  Dispatch dispatch_;
  mutable std::mutex mutex_;
  std::condition_variable work_cv_, done_cv_;  // CALLER: done_cv_ says an evaluator became free
  std::deque<Pending*> queue_;
  std::vector<int> free_;  // CALLER: the evaluators no client is running
  int waiting_ = 0;        // CALLER: clients waiting for a free evaluator
  Stats stats_;
  bool quit_ = false;
  std::vector<std::thread> workers_;
};

// A queue over `evaluators` evaluators of `model` made with `options`.
std::unique_ptr<EvalQueue> make_eval_queue(const nn::Model& model, const nn::BackendOptions& options, int evaluators,
                                           Dispatch dispatch = Dispatch::WORKERS);

}  // namespace jiriki::search
