#include "common/thread_pool.h"

#include "common/cpus.h"
#include "common/spin.h"

#include <algorithm>
#include <utility>

namespace jiriki {

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = usable_cpus().count;
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunk(int index) {
  const int64_t parts = size();
  const int64_t begin = task_n_ * index / parts, end = task_n_ * (index + 1) / parts;
  if (begin >= end) return;
  try {
    (*task_)(begin, end);
  } catch (...) {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = std::current_exception();
  }
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    auto started = [&] { return stopping_.load() || generation_.load(std::memory_order_acquire) != seen; };
    if (!spin_until(started)) {
      std::unique_lock lock(mutex_);
      ++sleeping_workers_;
      start_cv_.wait(lock, started);
      --sleeping_workers_;
    }
    if (stopping_) return;
    seen = generation_.load(std::memory_order_acquire);
    run_chunk(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard lock(mutex_);
      if (caller_sleeping_) done_cv_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (workers_.empty()) {
    fn(0, n);
    return;
  }
  bool wake;
  {
    std::lock_guard lock(mutex_);
    task_ = &fn;
    task_n_ = n;
    pending_ = int(workers_.size());
    error_ = nullptr;
    generation_.fetch_add(1, std::memory_order_release);  // (under the mutex: a worker going to sleep sees it)
    wake = sleeping_workers_ > 0;
  }
  if (wake) start_cv_.notify_all();
  run_chunk(0);
  auto finished = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  std::unique_lock lock(mutex_, std::defer_lock);
  if (spin_until(finished)) {
    lock.lock();
  } else {
    lock.lock();
    caller_sleeping_ = true;
    done_cv_.wait(lock, finished);
    caller_sleeping_ = false;
  }
  task_ = nullptr;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

}  // namespace jiriki
