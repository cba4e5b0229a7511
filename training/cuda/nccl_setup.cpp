// NCCL set-up (see training/cuda/nccl_setup.h).
#include "training/cuda/nccl_setup.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "nn/cuda/cuda_util.h"

#if JIRIKI_HAVE_NCCL
#include <nccl.h>
#endif

namespace jiriki::training::cuda {

#if JIRIKI_HAVE_NCCL
namespace {
void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw std::runtime_error(std::string("NCCL: ") + what + ": " + ncclGetErrorString(r));
}
}  // namespace

bool have_nccl() { return true; }

std::vector<ncclComm_t> nccl_communicators(const std::vector<int>& gpus) {
  std::vector<ncclComm_t> comms(gpus.size(), nullptr);
  check(ncclCommInitAll(comms.data(), int(gpus.size()), gpus.data()), "ncclCommInitAll");
  return comms;
}

ncclComm_t nccl_communicator(HostComm& comm, int gpu) {
  ncclUniqueId id;
  if (comm.rank() == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  comm.broadcast(&id, sizeof id, 0);
  JIRIKI_CUDA_CHECK(cudaSetDevice(gpu));
  ncclComm_t nccl = nullptr;
  check(ncclCommInitRank(&nccl, comm.size(), id, comm.rank()), "ncclCommInitRank");
  return nccl;
}

void nccl_destroy(ncclComm_t nccl) {
  if (nccl) ncclCommDestroy(nccl);
}

double nccl_allreduce_seconds(const std::vector<ncclComm_t>& comms, const std::vector<int>& gpus, size_t floats,
                              int reps) {
  std::vector<double> seconds(gpus.size());
  std::vector<std::thread> threads;
  std::exception_ptr error;
  std::mutex error_mutex;
  for (size_t r = 0; r < gpus.size(); ++r)
    threads.emplace_back([&, r] {
      try {
        JIRIKI_CUDA_CHECK(cudaSetDevice(gpus[r]));
        nn::cuda::DeviceBuffer send(floats * sizeof(float)), recv(floats * sizeof(float));
        cudaStream_t stream;
        cudaEvent_t begin, end;
        JIRIKI_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        JIRIKI_CUDA_CHECK(cudaEventCreate(&begin));
        JIRIKI_CUDA_CHECK(cudaEventCreate(&end));
        JIRIKI_CUDA_CHECK(cudaMemsetAsync(send.get(), 0, floats * sizeof(float), stream));
        auto once = [&] {
          check(ncclAllReduce(send.get(), recv.get(), floats, ncclFloat, ncclAvg, comms[r], stream), "ncclAllReduce");
        };
        for (int i = 0; i < 3; ++i) once();
        JIRIKI_CUDA_CHECK(cudaEventRecord(begin, stream));
        for (int i = 0; i < reps; ++i) once();
        JIRIKI_CUDA_CHECK(cudaEventRecord(end, stream));
        JIRIKI_CUDA_CHECK(cudaEventSynchronize(end));
        float ms = 0;
        JIRIKI_CUDA_CHECK(cudaEventElapsedTime(&ms, begin, end));
        seconds[r] = 1e-3 * ms / reps;
        cudaEventDestroy(begin), cudaEventDestroy(end), cudaStreamDestroy(stream);
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  double worst = 0;
  for (double s : seconds) worst = std::max(worst, s);
  return worst;
}

#else

bool have_nccl() { return false; }
[[noreturn]] static void no_nccl() {
  throw std::runtime_error("this jiriki was built without NCCL: use --allreduce host");
}
std::vector<ncclComm_t> nccl_communicators(const std::vector<int>&) { no_nccl(); }
ncclComm_t nccl_communicator(HostComm&, int) { no_nccl(); }
void nccl_destroy(ncclComm_t) {}
double nccl_allreduce_seconds(const std::vector<ncclComm_t>&, const std::vector<int>&, size_t, int) { no_nccl(); }

#endif

}  // namespace jiriki::training::cuda
