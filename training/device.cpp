// The training devices' common part and the CPU device (training/device.h).
#include "training/device.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "common/fnv1a.h"
#include "nn/backend.h"
#include "training/network.h"

namespace jiriki::training {

std::vector<float> flatten(const nn::Model& m, bool trainable) {
  std::vector<float> flat;
  for (const auto& t : m.tensors())
    if (t.trainable == trainable) flat.insert(flat.end(), t.tensor->data.begin(), t.tensor->data.end());
  return flat;
}

void unflatten(const std::vector<float>& flat, nn::Model& m, bool trainable) {
  size_t at = 0;
  for (auto& t : m.tensors())
    if (t.trainable == trainable) {
      std::copy_n(flat.begin() + std::ptrdiff_t(at), t.tensor->size(), t.tensor->data.begin());
      at += t.tensor->size();
    }
}

double seconds_per_call(int reps, const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
}

namespace {

class CpuDevice final : public Device {
 public:
  CpuDevice(const DeviceSettings& c, int batch, nn::Model& model, Optimizer& optimizer, ThreadPool& pool,
            HostComm& comm)
      : c_(c), model_(model), optimizer_(optimizer), pool_(pool), comm_(comm), ws_(model.arch, batch) {}
  Step step(const Batch& batch, double lr, bool measure_half, const Batch* /*next*/) override {
    Step s;
    if (measure_half && batch.size >= 2) {
      // The first half's rows of the same arrays; momentum 0 leaves the running statistics alone.
      Batch half;
      half.capacity = batch.capacity;
      half.size = batch.size / 2;
      half.features = batch.features;
      half.policy_target = batch.policy_target;
      half.value_result = batch.value_result;
      half.value_eval = batch.value_eval;
      compute_gradients(model_, ws_, half, c_.val_lambda, 0.0f, 1.0f / float(half.size), pool_);
      const double n = gradient_norm(ws_.grads);
      s.half_norm2 = n * n;
    }
    s.totals = compute_gradients(model_, ws_, batch, c_.val_lambda, c_.bn_momentum, 1.0f / float(batch.size), pool_);
    if (comm_.size() > 1) {
      std::vector<float> g = flatten(ws_.grads, true);
      s.local_norm2 = average_on_host(comm_, g.data(), g.size());
      unflatten(g, ws_.grads, true);
    }
    s.grad_norm = gradient_norm(ws_.grads);
    if (comm_.size() == 1) s.local_norm2 = s.grad_norm * s.grad_norm;
    if (c_.clip_grad_norm > 0 && s.grad_norm > c_.clip_grad_norm)
      scale_gradients(ws_.grads, float(c_.clip_grad_norm / s.grad_norm));
    optimizer_.step(model_, ws_.grads, lr);
    return s;
  }
  nn::LossTotals evaluate(const Batch& batch) override {
    return evaluate_batch(model_, ws_.acts, batch, c_.val_lambda, pool_);
  }
  StepSample time_step(const Batch& batch, int reps) override {
    StepSample t{double(batch.size), 0, 0, 0};
    t.step_seconds = seconds_per_call(reps, [&] { step(batch, 0.0, false, nullptr); });
    t.compute_seconds = seconds_per_call(reps, [&] {
      compute_gradients(model_, ws_, batch, c_.val_lambda, c_.bn_momentum, 1.0f / float(batch.size), pool_);
      optimizer_.step(model_, ws_.grads, 0.0);
    });
    std::vector<float> g = flatten(ws_.grads, true);
    t.comm_seconds =
        comm_.size() > 1 ? seconds_per_call(reps, [&] { average_on_host(comm_, g.data(), g.size()); }) : 0.0;
    return t;
  }
  uint64_t weights_checksum() override {
    const std::vector<float> w = flatten(model_, true);
    return fnv1a64_words(reinterpret_cast<const uint32_t*>(w.data()), w.size());
  }
  std::string hardware() const override { return name(); }
  std::string name() const override {
    return "cpu, " + std::to_string(pool_.size()) + " compute threads" +
           (comm_.size() > 1 ? ", " + std::to_string(comm_.size()) + " replicas, host all-reduce" : "");
  }

 private:
  const DeviceSettings c_;
  nn::Model& model_;
  Optimizer& optimizer_;
  ThreadPool& pool_;
  HostComm& comm_;
  Workspace ws_;
};

}  // namespace

std::unique_ptr<Device> make_device(const DeviceSettings& c, int batch, nn::Model& model, Optimizer& optimizer,
                                    ThreadPool& pool, HostComm& comm, const ReplicaPlace& place) {
  if (c.backend == nn::BackendKind::CUDA) return make_gpu_device(c, batch, model, optimizer, comm, place);
  return std::make_unique<CpuDevice>(c, batch, model, optimizer, pool, comm);
}

#if !JIRIKI_HAVE_CUDA
// Built without CUDA: the GPU side of the seam says so.
std::unique_ptr<Device> make_gpu_device(const DeviceSettings&, int, nn::Model&, Optimizer&, HostComm&,
                                        const ReplicaPlace&) {
  throw std::runtime_error("--backend cuda: this jiriki was built without CUDA");
}
NcclComms NcclComms::for_gpus(const std::vector<int>&) {
  throw std::runtime_error("--allreduce nccl: this jiriki was built without CUDA");
}
NcclComms NcclComms::for_process(HostComm&, int) {
  throw std::runtime_error("--allreduce nccl: this jiriki was built without CUDA");
}
NcclComms::~NcclComms() = default;
#endif

}  // namespace jiriki::training
