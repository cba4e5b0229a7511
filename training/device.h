// Where one replica's training steps run: the seam between the training loop (training/trainer.cpp)
// and the hardware, as nn/backend.h is for inference. The CPU device (training/network.h) is in
// device.cpp; the CUDA device (training/cuda/gpu_trainer.h) is in training/cuda/gpu_device.cpp, built
// only with CUDA, and reached through make_device.
#pragma once
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "nn/backend.h"
#include "nn/layers_backward.h"
#include "nn/model.h"
#include "training/batch.h"
#include "training/batch_tuner.h"
#include "training/comm.h"
#include "training/optimizer.h"

namespace jiriki::training {

// What a device needs of the training run's settings (the trainer fills it from its TrainConfig).
struct DeviceSettings {
  nn::BackendKind backend = nn::BackendKind::CPU;
  nn::CudaSettings cuda;  // the GPU trainer's convolutions, logging, profiling
  OptimizerConfig optimizer;
  float val_lambda = 0.333f;    // weight of the eval target in the value loss
  float bn_momentum = 0.1f;     // batch-norm running statistics
  double clip_grad_norm = 0.0;  // 0: no clipping
  // Gradients averaged on the host (GPUs: with one replica too, which then still pays the copies);
  // else by NCCL where a communicator is given, on the host otherwise.
  bool host_allreduce = false;
  double bucket_mb = 4.0;  // GPUs: gradient bucket size, NCCL and host
};

// One replica's steps. The CPU works on the replica's model and optimizer in place; the GPU keeps its
// own copy of both, brought to the host by sync_host() (checkpoints, the export, switching batch
// sizes) and back by load_host(). With several replicas, step() averages the gradients over all of
// them before the update (a collective: every replica calls it together).
class Device {
 public:
  struct Step {
    nn::LossTotals totals;
    double grad_norm = 0;    // of the averaged gradient, before clipping
    double local_norm2 = 0;  // squared norm of this replica's own gradient (batch b), for the noise scale
    // Squared norm of the gradient of the batch's first half alone (asked with measure_half; NaN when
    // not measured): with one replica, the small batch of the noise scale's two-batch estimate.
    double half_norm2 = std::numeric_limits<double>::quiet_NaN();
  };
  virtual ~Device() = default;
  // Forward, loss, backward, the average over the replicas, clipping and the optimizer's update;
  // with measure_half, first the gradient of the batch's first half alone (its norm only: no update,
  // no batch-norm statistics), when the device can. `next` (or null): the batch the following step
  // will take, held unchanged until then, which a GPU copies over while this step computes.
  virtual Step step(const Batch& batch, double lr, bool measure_half, const Batch* next) = 0;
  // Loss totals in EVAL mode; nothing changes.
  virtual nn::LossTotals evaluate(const Batch& batch) = 0;
  virtual void sync_host() {}
  virtual void load_host() {}
  // Seconds per step with and without the gradients' communication, and of the communication alone,
  // over `reps` steps on `batch` (collective; the weights change: callers restore them).
  virtual StepSample time_step(const Batch& batch, int reps) = 0;
  // A hash of the weights' bits, equal on replicas that are in step.
  virtual uint64_t weights_checksum() = 0;
  // Memory for the loaders' batches (null: the heap).
  virtual HostAllocator* allocator() { return nullptr; }
  virtual std::string name() const = 0;
  // What the steps run on and how replicas aggregate, without timings: the same from run to run
  // (the key of the tuner's step-time file, training/tuner_file.h).
  virtual std::string hardware() const = 0;
};

// What a replica is and where it runs.
struct ReplicaPlace {
  int gpu = 0;
  void* nccl = nullptr;  // ::ncclComm_t of this replica (gradients averaged by NCCL in the step), or null
};

// The device of s.backend for one replica training batches of `batch` positions on `model` and
// `optimizer` (the CPU device uses `pool`). Throws std::runtime_error naming the problem when the
// backend cannot run here (built without CUDA, no device).
std::unique_ptr<Device> make_device(const DeviceSettings& s, int batch, nn::Model& model, Optimizer& optimizer,
                                    ThreadPool& pool, HostComm& comm, const ReplicaPlace& place);
// The CUDA device behind make_device (training/cuda/gpu_device.cpp).
std::unique_ptr<Device> make_gpu_device(const DeviceSettings& s, int batch, nn::Model& model, Optimizer& optimizer,
                                        HostComm& comm, const ReplicaPlace& place);

// The NCCL communicators of this process's replicas (--allreduce nccl), destroyed with the object:
// one per GPU of `gpus` (replicas on threads), or this process's own in an mpirun job. Empty: none.
class NcclComms {
 public:
  NcclComms() = default;
  static NcclComms for_gpus(const std::vector<int>& gpus);
  static NcclComms for_process(HostComm& mpi, int gpu);
  NcclComms(NcclComms&& o) noexcept : comms_(std::move(o.comms_)) { o.comms_.clear(); }
  NcclComms& operator=(NcclComms&&) = delete;
  ~NcclComms();
  void* at(size_t replica) const { return replica < comms_.size() ? comms_[replica] : nullptr; }

 private:
  std::vector<void*> comms_;
};

// Every trainable (or every non-trainable: BN running statistics) tensor of a model into one flat
// vector, and back.
std::vector<float> flatten(const nn::Model& m, bool trainable);
void unflatten(const std::vector<float>& flat, nn::Model& m, bool trainable);

// Wall-clock seconds per call of fn over `reps` calls.
double seconds_per_call(int reps, const std::function<void()>& fn);

}  // namespace jiriki::training
