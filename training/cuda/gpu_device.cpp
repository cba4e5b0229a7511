// The CUDA training device behind training/device.h: one replica's steps on cuda::GpuTrainer, the
// gradients averaged by NCCL inside the step or on the host; and the replicas' NCCL communicators.
#include <memory>

#include "training/cuda/gpu_trainer.h"
#include "training/cuda/nccl_setup.h"
#include "training/device.h"

namespace jiriki::training {

namespace cuda {
namespace {

class GpuDevice final : public Device {
 public:
  // nccl: this replica's communicator (gradients averaged by NCCL inside the step), or null (one
  // replica, or host aggregation through `comm`).
  GpuDevice(const DeviceSettings& c, int batch, nn::Model& model, Optimizer& optimizer, HostComm& comm, int gpu,
            ncclComm_t nccl)
      : c_(c),
        model_(model),
        optimizer_(optimizer),
        comm_(comm),
        gpu_(model, c.optimizer, batch, gpu, c.cuda),
        host_(!nccl && (comm.size() > 1 || c.host_allreduce)) {
    gpu_.upload_optimizer(optimizer);
    // Host aggregation: always with several replicas, and with one when asked for (--allreduce host
    // on one GPU), which still pays the copies to host memory and back: the seed's regime, where
    // gradients are aggregated by the CPU, measured on one GPU.
    const size_t bucket_bytes = size_t(c.bucket_mb * 1e6);
    if (nccl) gpu_.attach_nccl(nccl, bucket_bytes);
    else if (host_) gpu_.attach_host(comm, bucket_bytes);
  }
  Step step(const Batch& batch, double lr, bool measure_half, const Batch* next) override {
    Step s;
    if (measure_half && batch.size % 2 == 0) s.half_norm2 = gpu_.half_batch_norm2(batch, c_.val_lambda);
    const auto r = gpu_.train_step(batch, c_.val_lambda, c_.bn_momentum, lr, c_.clip_grad_norm, next);
    s.totals = r.totals, s.grad_norm = r.grad_norm, s.local_norm2 = r.local_norm2;
    return s;
  }
  nn::LossTotals evaluate(const Batch& batch) override { return gpu_.evaluate(batch, c_.val_lambda); }
  void sync_host() override {
    gpu_.download_model(model_);
    gpu_.download_optimizer(optimizer_);
  }
  void load_host() override {
    gpu_.upload_model(model_);
    gpu_.upload_optimizer(optimizer_);
  }
  StepSample time_step(const Batch& batch, int reps) override {
    for (int i = 0; i < 3; ++i) step(batch, 0.0, false, nullptr);  // the first runs eagerly, then graphs are captured
    const auto t = gpu_.time_step(reps);
    return {double(batch.size), t.step, t.compute, t.comm};
  }
  uint64_t weights_checksum() override { return gpu_.weights_checksum(); }
  HostAllocator* allocator() override { return gpu_.host_allocator(); }
  std::string name() const override { return gpu_.description() + aggregation(); }
  std::string hardware() const override { return "cuda (" + gpu_.device_name() + ", bf16)" + aggregation(); }

 private:
  std::string aggregation() const {
    if (comm_.size() == 1 && !host_) return "";
    return ", " + std::to_string(comm_.size()) + (comm_.size() > 1 ? " replicas, " : " replica, ") +
           (host_ ? "host all-reduce, " : "NCCL all-reduce, ") + gpu_.bucket_summary();
  }

  const DeviceSettings c_;
  nn::Model& model_;
  Optimizer& optimizer_;
  HostComm& comm_;
  GpuTrainer gpu_;
  const bool host_;  // gradients averaged on the host
};

}  // namespace
}  // namespace cuda

std::unique_ptr<Device> make_gpu_device(const DeviceSettings& c, int batch, nn::Model& model, Optimizer& optimizer,
                                        HostComm& comm, const ReplicaPlace& place) {
  return std::make_unique<cuda::GpuDevice>(c, batch, model, optimizer, comm, place.gpu,
                                           static_cast<ncclComm_t>(place.nccl));
}

NcclComms NcclComms::for_gpus(const std::vector<int>& gpus) {
  NcclComms n;
  for (ncclComm_t c : cuda::nccl_communicators(gpus)) n.comms_.push_back(c);
  return n;
}

NcclComms NcclComms::for_process(HostComm& mpi, int gpu) {
  NcclComms n;
  n.comms_.push_back(cuda::nccl_communicator(mpi, gpu));
  return n;
}

NcclComms::~NcclComms() {
  for (void* c : comms_) cuda::nccl_destroy(static_cast<ncclComm_t>(c));
}

}  // namespace jiriki::training
