// The GPU trainer: the network of training/network.h trained on one CUDA device, with the same
// loss, optimizers and batch-norm semantics as the CPU trainer, in bf16 mixed precision.
//
// Numbers: fp32 master weights, gradients and optimizer state; a bf16 copy of the weights that the
// convolutions and matrix products read (refreshed by the optimizer kernel); bf16 activations
// (NHWC) and activation gradients; fp32 accumulation everywhere, fp32 batch-norm statistics, loss and
// optimizer arithmetic. This is what PyTorch's bf16 autocast computes, so the two agree to bf16
// precision, not fp32's (scripts/torch_train_reference.py, tests/test_train_cuda.cpp).
//
// The device state is self-contained: the nn::Model and Optimizer the caller holds are copied in
// (upload_*) and out (download_*) only when asked, for checkpoints, exports and held-out metrics on
// the host. All parameters live in one flat fp32 buffer (and so do their gradients and optimizer
// state), each tensor at a fixed offset, which is what gradient all-reduce in buckets needs
// (data parallelism, issue 7).
//
// Requirements: the network's channel count is a multiple of 8 (the tensor cores' NHWC alignment),
// a GPU of compute capability 8.0 or newer (bf16), and training batches of exactly the size given
// at construction (evaluation also takes fewer positions).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "nn/backend.h"
#include "nn/layers_backward.h"
#include "nn/model.h"
#include "training/batch.h"
#include "training/comm.h"
#include "training/optimizer.h"

// NCCL's communicator handle (nccl.h declares it the same way), so that this header needs no NCCL.
typedef struct ncclComm* ncclComm_t;

namespace jiriki::training::cuda {

class GpuTrainer {
 public:
  // Copies `model` (weights and running statistics) to device `gpu`, and times cuDNN's convolution
  // algorithms for batches of `batch` positions. Throws std::runtime_error when there is no usable
  // GPU or CUDA fails, std::invalid_argument for an unsupported network or batch.
  // `cuda`: the convolutions' tuning (sweep, unfused path, file of tuned engines), logging, profiling.
  GpuTrainer(const nn::Model& model, const OptimizerConfig& optimizer, int batch, int gpu = 0,
             const nn::CudaSettings& cuda = {});
  ~GpuTrainer();
  GpuTrainer(const GpuTrainer&) = delete;
  GpuTrainer& operator=(const GpuTrainer&) = delete;

  // Page-locked host memory for the loader's batches (LoaderOptions::allocator), so that their
  // copies to the device are asynchronous DMA. Lives as long as the trainer.
  HostAllocator* host_allocator();

  // Weights and batch-norm running statistics from and to a Model of the same architecture.
  void upload_model(const nn::Model& model);
  void download_model(nn::Model& model);
  // Optimizer state (by the names of Optimizer::state()) and step count, from and to the host.
  void upload_optimizer(Optimizer& optimizer);
  void download_optimizer(Optimizer& optimizer);

  // Forward (batch norm in training mode, running statistics updated), fused loss and backward on
  // one batch of exactly the constructor's size, as training::compute_gradients does. The gradients
  // stay on the device (download_gradients copies them out); returns the batch's loss totals.
  // `next`, when given, is the batch the following call will train on: it is copied to the device
  // on a stream of its own while this one computes (see stage()).
  nn::LossTotals compute_gradients(const Batch& batch, float val_lambda, float bn_momentum, float grad_scale,
                                   const Batch* next = nullptr);
  // Starts copying `next` (host memory that stays untouched until it has been trained on; a batch of
  // the constructor's size, else nothing is done) to a device staging buffer on a copy stream,
  // beside the work in flight, so that the step that trains on it starts without waiting for the
  // host: the host-to-device copy of a batch of 256 (12 MB) is a sizeable part of a step. The next
  // call that uploads a batch takes it from there when it is that same batch, and drops it otherwise.
  void stage(const Batch& next);
  // The squared norm of the gradient of the batch's first half alone (batch norm statistics of that
  // half, running statistics untouched): the small batch of the gradient noise scale's two-batch
  // estimate with one replica. Computed on the whole batch's buffers with the first half copied over
  // the second: duplicated rows leave the mean loss and the batch statistics those of the half.
  // The batch must have the constructor's size, an even one. The gradients are left overwritten.
  double half_batch_norm2(const Batch& batch, float val_lambda);
  // The squared norm of the last compute_gradients' gradient (this replica's own).
  double local_norm2() const;
  // The gradients of the last compute_gradients, into a gradient model of the same architecture;
  // and gradients from the host for the next apply_gradients (gradients averaged elsewhere).
  void download_gradients(nn::Model& grads);
  void upload_gradients(const nn::Model& grads);
  // One optimizer step with the gradients of the last compute_gradients, clipped to a global norm of
  // `clip_grad_norm` (0: no clipping). Returns the gradient norm before clipping. Not with host
  // aggregation attached, whose average happens inside train_step only.
  double apply_gradients(double lr, double clip_grad_norm);

  // compute_gradients (grad_scale 1 / batch size) and apply_gradients with a single synchronisation.
  // With NCCL or the host attached the gradients are averaged with the other replicas' in between
  // (a collective: every replica calls it together).
  struct StepResult {
    nn::LossTotals totals;
    double grad_norm = 0;    // of the gradient the optimizer used (averaged over the replicas), before clipping
    double local_norm2 = 0;  // squared norm of this replica's own gradient, before averaging
  };
  StepResult train_step(const Batch& batch, float val_lambda, float bn_momentum, double lr, double clip_grad_norm,
                        const Batch* next = nullptr);

  // Loss totals with batch norm in EVAL mode (running statistics); nothing is updated.
  nn::LossTotals evaluate(const Batch& batch, float val_lambda);

  // Seconds per training step on the device alone: `reps` replays of the step (forward, loss,
  // backward, optimizer) on the batch of the last train_step, timed with CUDA events. The weights
  // are updated as by real steps. With NCCL attached (every replica must call it together) also the
  // step without communication, and the all-reduce of every bucket alone. With the host attached
  // (collective too) the step and the all-reduce are wall-clock times, as the host takes part, and
  // the floor of host aggregation is measured: the whole gradient copied down and up alone, and its
  // mean over the replicas on the host alone.
  struct Timing {
    double step = 0, compute = 0, comm = 0;  // seconds
    double copy = 0, mean = 0;               // host aggregation's floor (seconds), else 0
    // Of `comm` under host aggregation, per step: the replica's thread waiting for buckets to land,
    // and in their mean with the other replicas (barriers included).
    double wait = 0, reduce = 0;
  };
  Timing time_step(int reps);
  double device_seconds_per_step(int reps) { return time_step(reps).step; }

  // ---- data parallelism (training/comm.h, training/buckets.h) ------------------------------------
  // From now on every training step averages its gradients with the other replicas' through `nccl`
  // (this GPU's communicator), in buckets of about `bucket_bytes` all-reduced on a stream of their own
  // as soon as the backward pass has finished them.
  void attach_nccl(ncclComm_t nccl, size_t bucket_bytes);
  // From now on every training step averages its gradients with the other replicas' on the host
  // through `comm` (--allreduce host), in the buckets NCCL would use: each bucket is copied to
  // page-locked host memory on a stream of its own as soon as the backward pass has finished it,
  // averaged there by the replicas' threads while the backward pass goes on, and copied back on
  // another stream; the optimizer waits for the last. The average is comm's, bit for bit.
  void attach_host(HostComm& comm, size_t bucket_bytes);
  // The buckets of attach_nccl or attach_host, for logs: "7 buckets: 1.2, 4.1, ... MB".
  std::string bucket_summary() const;
  // The gradients in the device's flat layout (the same on every replica).
  size_t gradient_floats() const;
  // The gradient the last train_step's optimizer used, into a gradient model of the same
  // architecture: the replicas' average with NCCL or the host attached, else this replica's own.
  void download_update_gradients(nn::Model& grads);
  // A hash of every weight's bits: replicas that stay in step have equal ones.
  uint64_t weights_checksum();

  // The device and the algorithms chosen, for logs.
  std::string description() const;
  // The GPU alone ("NVIDIA H200, device 0, cuDNN 9.19.0"): the same from run to run.
  std::string device_name() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace jiriki::training::cuda
