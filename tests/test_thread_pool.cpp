// The CPU thread pool: every index of a loop run exactly once by chunks that depend only on n and the
// pool's size, whether its threads were spinning or asleep when the loop began; exceptions reach
// the caller and leave the pool usable.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/thread_pool.h"

using namespace jiriki;

namespace {
// Runs a loop of n on the pool; true when every index was visited exactly once, by the chunk the
// header promises (size() contiguous parts, the k-th [n k / size, n (k + 1) / size)).
bool covers_once(ThreadPool& pool, int64_t n) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::atomic<bool> chunks_right{true};
  pool.parallel_for(n, [&](int64_t begin, int64_t end) {
    bool found = false;
    for (int k = 0; k < pool.size(); ++k) found |= n * k / pool.size() == begin && n * (k + 1) / pool.size() == end;
    if (!found) chunks_right = false;
    for (int64_t i = begin; i < end; ++i) hits[size_t(i)]++;
  });
  for (auto& h : hits)
    if (h != 1) return false;
  return chunks_right;
}
}  // namespace

TEST_CASE("thread pool: each index once, in the promised chunks, back to back and after sleeping", "[pool]") {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    CHECK(pool.size() == threads);
    int wrong = 0;
    // Back to back: the workers are still spinning when the next loop begins.
    for (int rep = 0; rep < 2000; ++rep) wrong += !covers_once(pool, 1 + rep % 13);
    // After a pause long enough for every thread to fall asleep.
    for (int rep = 0; rep < 5; ++rep) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      wrong += !covers_once(pool, 1000 + rep);
    }
    CAPTURE(threads);
    CHECK(wrong == 0);
    pool.parallel_for(0, [&](int64_t, int64_t) { ++wrong; });  // an empty loop calls nothing
    CHECK(wrong == 0);
  }
}

TEST_CASE("thread pool: a chunk's exception reaches the caller once, and the pool goes on", "[pool]") {
  ThreadPool pool(3);
  for (int rep = 0; rep < 50; ++rep) {
    CHECK_THROWS_WITH(pool.parallel_for(30,
                                        [&](int64_t begin, int64_t) {
                                          if (begin >= 10) throw std::runtime_error("chunk failed");
                                        }),
                      "chunk failed");
    CHECK(covers_once(pool, 100));
  }
}
