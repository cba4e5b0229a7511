// Collective operations on host memory between the replicas of data-parallel training: the
// gradients of `--allreduce host`, and the few numbers every mode exchanges (loss totals, gradient
// norms for the noise scale, step times for the tuner, weight checksums).
//
// Three implementations behind one interface: one replica (nothing to exchange), threads of one
// process (ThreadGroup: each rank sums its own slice of every buffer, split further over a few
// threads of its own, so the CPU work of an all-reduce is shared and uses the machine's cores), and
// processes started by mpirun (MPI). Every sum adds the ranks' values in
// rank order, so every rank receives bit-identical results: replicas that apply the same averaged
// gradients keep bit-identical weights.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace jiriki::training {

class HostComm {
 public:
  virtual ~HostComm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // On every rank, data[0, n) becomes the sum over the ranks (added in rank order, in double).
  virtual void sum(float* data, size_t n) = 0;
  virtual void sum(double* data, size_t n) = 0;
  // On every rank, data[0, n) becomes the mean over the ranks: the sum as sum() makes it, rounded to
  // float, times 1/size (a single pass over the data where an implementation can fuse them).
  virtual void average(float* data, size_t n);
  // average() of the elements of several ranges of one buffer at once, (offset, count) each (a
  // bucket of gradients): one collective instead of one per range.
  using Ranges = std::vector<std::pair<size_t, size_t>>;
  virtual void average_ranges(float* data, const Ranges& ranges);
  // Copies `bytes` at `data` from rank `root` to every rank.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;

  // True on every rank when every rank passed the same value (weight checksums).
  bool all_equal(uint64_t value);
  // The mean over the ranks (a convenience over sum()).
  double mean(double value);
  // The maximum over the ranks (step times: a step lasts as long as its slowest replica).
  double max(double value);
};

// One replica: every collective is the identity.
class SoloComm final : public HostComm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void sum(float*, size_t) override {}
  void sum(double*, size_t) override {}
  void broadcast(void*, size_t, int) override {}
};

// `ranks` replicas on threads of this process; comm(r) is rank r's handle, used by its thread only.
// Every rank must enter each collective, in the same order (as with MPI). Each rank sums its slice
// of a large buffer on `threads_per_rank` threads (itself and helpers of its own; 0: the usable
// CPUs of common/cpus.h, half of them shared out among the ranks, at most 8 each: the GPUs' own
// threads, the loaders' and the driver's need the rest, and a mean split over every core ran slower
// inside training steps on 2 H200s, bench/results/batch_size/h200x2/hostagg_sweep_2026-11-29.txt).
class ThreadGroup {
 public:
  explicit ThreadGroup(int ranks, int threads_per_rank = 0);
  ~ThreadGroup();
  HostComm& comm(int rank);
  int size() const;
  int threads_per_rank() const;
  // Makes every collective in progress or to come throw (a replica failed: the others must not wait
  // for it forever).
  void abort();

  struct Shared;

 private:
  std::unique_ptr<Shared> shared_;
  std::vector<std::unique_ptr<HostComm>> comms_;
};

// The replica launcher of `train` and `bench train`: fn(rank, comm) for ranks 0..n-1, each on a
// thread of its own, sharing one ThreadGroup. The first exception aborts the group (the other
// replicas leave their next collective with an error) and is rethrown once every thread has ended.
void run_on_threads(int n, const std::function<void(int rank, HostComm& comm)>& fn, int threads_per_rank = 0);

// The classic host-side gradient aggregation: data[0, n) becomes the mean over the ranks (summed
// by their CPU threads). Returns the squared norm the local values had before (the noise scale's
// small-batch gradient norm), or 0 when `norm` is false (the caller has it already).
double average_on_host(HostComm& comm, float* data, size_t n, bool norm = true);

// The process's place in an mpirun job: rank, size, and the rank within its host (which picks the
// GPU). Without mpirun (or without MPI in the build) the process is rank 0 of 1.
struct ProcessLayout {
  int rank = 0, size = 1, local_rank = 0, local_size = 1;
};
// Reads the launcher's environment (OMPI_COMM_WORLD_* / PMI_* variables) without initialising MPI.
ProcessLayout process_layout();
// Initialises MPI (once) when the process was started by mpirun with more than one rank; returns
// its communicator, or null for a single process. Throws when mpirun started several ranks but this
// jiriki was built without MPI.
std::unique_ptr<HostComm> mpi_comm();

}  // namespace jiriki::training
