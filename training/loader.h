// The data pipeline: turns a Dataset into a stream of batches, decoding positions and building
// features and targets on worker threads ahead of the trainer.
//
// The stream: stream position s is dataset position perm_e[s mod N] with epoch e = s / N, where
// perm_e is a permutation of 0..N-1 drawn by a generator seeded with (seed, e) (the identity when
// shuffling is off). Every epoch is a full shuffle of all the data: the compact positions of
// training/data.h fit in memory (a window of 10 million takes 480 MB), so the shuffle buffer is the
// whole dataset rather than a sliding window of it. Batch j holds stream positions
// [start + j B, start + (j + 1) B) (or a replica's slice of it, LoaderOptions::stride). What a batch holds depends only
// on (dataset, seed, position), never on timing or the number of threads, so a checkpoint needs only the stream
// position and the seed to continue exactly.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "shogi/position.h"
#include "training/batch.h"
#include "training/data.h"
#include "training/teacher.h"

namespace jiriki::training {

struct LoaderOptions {
  int batch_size = 256;
  uint64_t seed = 1;
  bool shuffle = true;
  uint64_t start = 0;         // stream position of the first batch
  uint64_t end = UINT64_MAX;  // the stream stops here (the last batch may be short)
  // Data parallelism: batch j holds positions [start + j stride + offset, ... + batch_size) of the
  // stream, so that replica r of N takes rows [r b, (r + 1) b) of every global batch of N b
  // (stride N b, offset r b). stride 0 means batch_size.
  uint64_t stride = 0;
  uint64_t offset = 0;
  int threads = 1;  // worker threads
  // Left-right mirror images of half the positions (nn::mirror_features): which ones depends only on
  // (seed, stream position), like the shuffle.
  bool mirror = false;
  int queue = 0;                       // batches built ahead (0: 2 x threads + 1)
  HostAllocator* allocator = nullptr;  // memory of the batches (null: the heap); must outlive the loader
  // Distillation: makes each worker's teacher, whose targets are blended into every batch (null:
  // none). Data with positions without a target of their own (LoadOptions::every_move) needs one.
  std::function<std::unique_ptr<Teacher>()> teacher = nullptr;
  bool timing_only = false;  // the batch tuner's probes: targets are not read, so no teacher is needed
};

class Loader {
 public:
  Loader(const Dataset& data, const LoaderOptions& options);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The next batch in stream order, waiting for the workers if they are behind; nullptr once the
  // stream has ended. The batch stays valid until it is released. Rethrows a worker's exception.
  const Batch* acquire();
  void release(const Batch* batch);

  // Positions built so far and the worker time spent on them (summed over the workers): their
  // ratio is the loader's rate per thread, whether or not the trainer keeps up.
  uint64_t samples_built() const { return samples_built_; }
  double busy_seconds() const { return double(busy_ns_) * 1e-9; }
  int threads() const { return int(workers_.size()); }

 private:
  struct Slot {
    Batch batch;
    uint64_t job = 0;     // the batch number this slot holds next
    bool filled = false;  // built and not yet released
  };
  void worker_loop();
  // The dataset positions of batch `job` and whether each is mirrored; under mutex_.
  void positions_of(uint64_t job, std::vector<uint32_t>& out, std::vector<uint8_t>& mirrored);
  const std::vector<uint32_t>& permutation(uint64_t epoch);  // under mutex_
  void build(const std::vector<uint32_t>& positions, const std::vector<uint8_t>& mirrored, Batch& batch,
             Position& scratch, Teacher* teacher);

  const Dataset& data_;
  LoaderOptions opt_;
  uint64_t batches_;  // in the stream (UINT64_MAX: unbounded)
  std::vector<Slot> slots_;
  std::map<uint64_t, std::vector<uint32_t>> permutations_;  // the epochs in use
  std::mutex mutex_;
  std::condition_variable slot_free_, slot_filled_;
  uint64_t next_job_ = 0, next_acquire_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::atomic<uint64_t> samples_built_{0}, busy_ns_{0};
  std::vector<std::thread> workers_;
};

// Writes the inputs and targets of dataset position `index` into row `row` of `batch`, or those of
// its left-right mirror image when `mirror`.
void build_sample(const Dataset& data, uint32_t index, Batch& batch, int row, Position& scratch, bool mirror = false);

}  // namespace jiriki::training
