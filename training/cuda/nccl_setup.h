// NCCL set-up for data-parallel training, in one place: communicators for the GPUs this process
// drives (one thread each), or for this process's GPU in an mpirun job (the unique id travels
// through the host communicator: MPI is used for nothing else). Also the all-reduce timing that
// `jiriki bench train` compares our buckets against.
#pragma once
#include <cstddef>
#include <vector>

#include "training/comm.h"
#include "training/cuda/gpu_trainer.h"

namespace jiriki::training::cuda {

// True when this jiriki was built with NCCL.
bool have_nccl();

// One communicator per GPU of `gpus`, ranks in that order (ncclCommInitAll).
std::vector<ncclComm_t> nccl_communicators(const std::vector<int>& gpus);
// This process's communicator among comm.size() processes, on GPU `gpu` (ncclCommInitRank).
ncclComm_t nccl_communicator(HostComm& comm, int gpu);
void nccl_destroy(ncclComm_t nccl);

// Seconds per all-reduce (average) of `floats` fp32 values on every GPU of `gpus` at once, timed
// over `reps` calls after a warm-up, one thread per GPU: the figure NCCL reaches for one message of
// that size (bus bandwidth = 2 (n - 1) / n x bytes / seconds).
double nccl_allreduce_seconds(const std::vector<ncclComm_t>& comms, const std::vector<int>& gpus, size_t floats,
                              int reps);

}  // namespace jiriki::training::cuda
