// The evaluation queue: workers that merge waiting batches into network calls.
#include "engine/search/eval_queue.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace jiriki::search {

EvalBatch::EvalBatch(int capacity)
    : capacity_(capacity),
      features_(size_t(capacity) * nn::PACKED_INPUT_BYTES),
      policy_(size_t(capacity) * nn::POLICY_SIZE),
      value_(size_t(capacity)) {}

EvalQueue::EvalQueue(std::vector<std::unique_ptr<nn::Evaluator>> evaluators, Dispatch dispatch)
    : evaluators_(std::move(evaluators)), dispatch_(dispatch) {
  if (evaluators_.empty()) throw std::invalid_argument("evaluation queue without an evaluator");
  max_batch_ = evaluators_[0]->max_batch();
  for (auto& e : evaluators_)
    if (e->max_batch() != max_batch_) throw std::invalid_argument("evaluators of one queue must share a batch size");
  for (int i = 0; i < int(evaluators_.size()); ++i) {
    if (dispatch_ == Dispatch::CALLER) free_.push_back(i);
    else workers_.emplace_back([this, i] { worker_loop(i); });
  }
}

EvalQueue::~EvalQueue() {
  {
    std::lock_guard lock(mutex_);
    quit_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

std::string EvalQueue::name() const {
  return evaluators_[0]->name() + (evaluators_.size() > 1 ? " x" + std::to_string(evaluators_.size()) : "");
}

EvalQueue::Stats EvalQueue::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void EvalQueue::reset_stats() {
  std::lock_guard lock(mutex_);
  stats_ = Stats{};
}

void EvalQueue::warm_up() {
  EvalBatch batch(max_batch_);
  while (!batch.full()) std::fill_n(batch.add(), nn::PACKED_INPUT_BYTES, uint8_t(0));
  std::vector<int> sizes;
  for (int n = 1; n < max_batch_; n *= 2) sizes.push_back(n);
  sizes.push_back(max_batch_);
  for (auto& e : evaluators_)
    for (int n : sizes) e->evaluate_packed(batch.features_.data(), n, batch.policy_.data(), batch.value_.data());
}

void EvalQueue::submit(EvalBatch& batch, Pending& pending) {
  nn::check_batch_size(batch.size(), max_batch_);
  pending = Pending{&batch, false, nullptr};
  if (dispatch_ == Dispatch::CALLER) return evaluate_on_caller(pending);
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(&pending);
  }
  work_cv_.notify_one();
}

void EvalQueue::wait(Pending& pending) {
  if (dispatch_ == Dispatch::WORKERS) {
    std::unique_lock lock(mutex_);
    done_cv_.wait(lock, [&] { return pending.done; });
  }
  if (pending.error) std::rethrow_exception(pending.error);
}

void EvalQueue::evaluate_on_caller(Pending& pending) {
  EvalBatch& batch = *pending.batch;
  std::unique_lock lock(mutex_);
  if (free_.empty()) {
    ++waiting_;
    done_cv_.wait(lock, [this] { return !free_.empty(); });
    --waiting_;
  }
  const int index = free_.back();
  free_.pop_back();
  stats_.calls += 1;
  stats_.positions += batch.size();
  lock.unlock();
  std::exception_ptr error;
  try {
    evaluators_[index]->evaluate_packed(batch.features_.data(), batch.size(), batch.policy_.data(),
                                        batch.value_.data());
  } catch (...) {
    error = std::current_exception();
  }
  lock.lock();
  free_.push_back(index);
  const bool wake = waiting_ > 0;  // (no notify when none waits: a system call on some platforms)
  lock.unlock();
  if (wake) done_cv_.notify_one();
  pending.error = error;
  pending.done = true;
}

void EvalQueue::worker_loop(int index) {
  nn::Evaluator& eval = *evaluators_[index];
  EvalBatch staging(max_batch_);  // merged input and output of several small requests
  std::vector<Pending*> taken;
  std::unique_lock lock(mutex_);
  for (;;) {
    work_cv_.wait(lock, [this] { return quit_ || !queue_.empty(); });
    if (quit_) return;
    // Take requests in arrival order while they fit in one call.
    taken.clear();
    int total = 0;
    while (!queue_.empty() && total + queue_.front()->batch->size() <= max_batch_) {
      total += queue_.front()->batch->size();
      taken.push_back(queue_.front());
      queue_.pop_front();
    }
    stats_.calls += 1;
    stats_.positions += total;
    lock.unlock();

    std::exception_ptr error;
    try {
      if (taken.size() == 1) {  // no copy: evaluate the client's buffers in place
        EvalBatch& b = *taken[0]->batch;
        eval.evaluate_packed(b.features_.data(), b.size(), b.policy_.data(), b.value_.data());
      } else {
        int off = 0;
        for (Pending* r : taken) {
          const EvalBatch& b = *r->batch;
          std::memcpy(staging.features_.data() + size_t(off) * nn::PACKED_INPUT_BYTES, b.features_.data(),
                      size_t(b.size()) * nn::PACKED_INPUT_BYTES);
          off += b.size();
        }
        eval.evaluate_packed(staging.features_.data(), total, staging.policy_.data(), staging.value_.data());
        off = 0;
        for (Pending* r : taken) {
          EvalBatch& b = *r->batch;
          std::memcpy(b.policy_.data(), staging.policy_.data() + size_t(off) * nn::POLICY_SIZE,
                      sizeof(float) * size_t(b.size()) * nn::POLICY_SIZE);
          std::copy_n(staging.value_.data() + off, b.size(), b.value_.data());
          off += b.size();
        }
      }
    } catch (...) {
      error = std::current_exception();
    }

    lock.lock();
    for (Pending* r : taken) {
      r->error = error;
      r->done = true;
    }
    done_cv_.notify_all();
  }
}

std::unique_ptr<EvalQueue> make_eval_queue(const nn::Model& model, const nn::BackendOptions& options, int evaluators,
                                           Dispatch dispatch) {
  std::vector<std::unique_ptr<nn::Evaluator>> list;
  for (int i = 0; i < std::max(evaluators, 1); ++i) list.push_back(nn::make_evaluator(model, options));
  return std::make_unique<EvalQueue>(std::move(list), dispatch);
}

}  // namespace jiriki::search
