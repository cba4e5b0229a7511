// A fixed set of threads that split loops among themselves: the CPU forward pass's (nn/forward.h) and
// the CPU trainer's only parallelism.
// The caller takes part, so a pool of one thread runs everything inline. Waiting threads (workers
// for the next loop, the caller for the workers) spin a little before they sleep: a forward pass is
// a loop per layer, a fraction of a millisecond each, and a condition variable's wake-up costs
// several microseconds on Linux and far more elsewhere (under Wine a round trip to wineserver).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace jiriki {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // threads >= 1 (0: every hardware thread)
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }

  // Calls fn(begin, end) on size() contiguous chunks that cover [0, n) (empty chunks skipped) and
  // returns when all are done. The chunks depend only on n and size(). The first exception thrown
  // by any chunk is rethrown here.
  void parallel_for(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn);

 private:
  void worker_loop(int index);
  void run_chunk(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int64_t, int64_t)>* task_ = nullptr;
  int64_t task_n_ = 0;
  std::atomic<uint64_t> generation_{0};  // incremented (under mutex_) for every parallel_for
  std::atomic<int> pending_{0};          // workers still running the current task
  std::atomic<bool> stopping_{false};
  int sleeping_workers_ = 0;      // under mutex_: workers waiting on start_cv_
  bool caller_sleeping_ = false;  // under mutex_: the caller waits on done_cv_
  std::exception_ptr error_;
};

}  // namespace jiriki
