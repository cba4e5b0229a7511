// The GPU trainer's public calls (training/cuda/gpu_trainer.h) and its copies between host and
// device; the device state is in gpu_trainer_impl.h.
#include "training/cuda/gpu_trainer_impl.h"

namespace jiriki::training::cuda {

// ---- host <-> device -----------------------------------------------------------------------------

void GpuTrainer::Impl::copy_batch(const Batch& b, int n, float* features, cudaStream_t on) {
  float* target = features + size_t(batch) * INPUT_SIZE;
  float* result = target + size_t(batch) * POLICY_SIZE;
  float* eval = result + batch;
  auto copy = [&](float* to, const float* from, size_t count) {
    JIRIKI_CUDA_CHECK(cudaMemcpyAsync(to, from, count * sizeof(float), cudaMemcpyHostToDevice, on));
  };
  copy(features, b.features, size_t(n) * INPUT_SIZE);
  copy(target, b.policy_target, size_t(n) * POLICY_SIZE);
  copy(result, b.value_result, size_t(n));
  copy(eval, b.value_eval, size_t(n));
}

void GpuTrainer::Impl::upload_batch(const Batch& b, int n) {
  // The pointer alone identifies the staged batch: the trainer stages a batch it holds and trains
  // on it next, and any other upload in between drops the staging.
  const bool from_staging = &b == staged_from && n == batch;
  staged_from = nullptr;
  if (!from_staging) return copy_batch(b, n, at<float>(input), stream);
  JIRIKI_CUDA_CHECK(cudaStreamWaitEvent(stream, staged_ready, 0));
  JIRIKI_CUDA_CHECK(cudaMemcpyAsync(input.get(), staged.get(), input.bytes(), cudaMemcpyDeviceToDevice, stream));
  JIRIKI_CUDA_CHECK(cudaEventRecord(staged_free, stream));
}

void GpuTrainer::Impl::upload_step_params() {
  JIRIKI_CUDA_CHECK(
      cudaMemcpyAsync(step_params.get(), host_params.get(), sizeof(StepParams), cudaMemcpyHostToDevice, stream));
}

nn::LossTotals GpuTrainer::Impl::read_records(int n) const {
  nn::LossTotals t;
  const float* r = host_records.get<float>();
  for (int i = 0; i < n; ++i, r += LOSS_RECORD) {
    t.policy += r[0];
    t.value_result += r[1];
    t.value_eval += r[2];
    t.samples += 1;
    t.policy_correct += r[3] != 0.0f;
    t.value_decisive += r[4] != 0.0f;
    t.value_correct += r[5] != 0.0f;
  }
  return t;
}

// ---- host aggregation ----------------------------------------------------------------------------

// Counts a bucket as landed in host memory. Runs on a CUDA driver thread, in stream order after the
// bucket's copies: it may not call CUDA, and only signals.
static void CUDART_CB bucket_landed(void* p) {
  auto* l = static_cast<GpuTrainer::Impl::Landed*>(p);
  std::lock_guard lock(l->mutex);
  l->count.fetch_add(1, std::memory_order_release);
  if (l->sleeping) l->cv.notify_all();
}

void GpuTrainer::Impl::enqueue_download(const Bucket& b, cudaStream_t on) {
  for (const auto& [offset, count] : b.ranges)
    JIRIKI_CUDA_CHECK(cudaMemcpyAsync(host_grads.get<float>() + offset, at<float>(grads, offset), count * sizeof(float),
                                      cudaMemcpyDeviceToHost, on));
  JIRIKI_CUDA_CHECK(cudaLaunchHostFunc(on, bucket_landed, &landed));
}

int64_t GpuTrainer::Impl::landed_count() { return landed.count.load(std::memory_order_acquire); }

void GpuTrainer::Impl::wait_landed(int64_t count) {
  auto arrived = [&] { return landed.count.load(std::memory_order_acquire) >= count; };
  // Buckets land a tenth of a millisecond apart: spin first (common/spin.h).
  if (spin_until(arrived)) return;
  std::unique_lock lock(landed.mutex);
  landed.sleeping = true;
  // A failed copy or kernel never lands its bucket: look at the streams now and then.
  while (!landed.cv.wait_for(lock, std::chrono::seconds(1), arrived))
    for (cudaStream_t s : {stream, wgrad_stream, comm_stream})
      if (cudaError_t e = cudaStreamQuery(s); e != cudaSuccess && e != cudaErrorNotReady) {
        landed.sleeping = false;
        throw std::runtime_error(std::string("GPU trainer: a gradient bucket never reached the host: ") +
                                 cudaGetErrorString(e));
      }
  landed.sleeping = false;
}

void GpuTrainer::Impl::average_buckets(int64_t base) {
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double>(to - from).count();
  };
  float* h = host_grads.get<float>();
  const auto start = Clock::now();
  host_trip.assign(buckets.size(), {0.0, 0.0});
  for (size_t k = 0; k < buckets.size(); ++k) {
    const auto t0 = Clock::now();
    wait_landed(base + int64_t(k) + 1);
    const auto t1 = Clock::now();
    if (host->size() > 1) host->average_ranges(h, buckets[k].ranges);  // (one replica: the copies alone)
    const auto t2 = Clock::now();
    host_wait_seconds += seconds(t0, t1);
    host_mean_seconds += seconds(t1, t2);
    host_trip[k] = {seconds(start, t1), seconds(start, t2)};
    for (const auto& [offset, count] : buckets[k].ranges)
      JIRIKI_CUDA_CHECK(cudaMemcpyAsync(at<float>(reduced, offset), h + offset, count * sizeof(float),
                                        cudaMemcpyHostToDevice, up_stream));
  }
  JIRIKI_CUDA_CHECK(cudaEventRecord(up_done, up_stream));
  JIRIKI_CUDA_CHECK(cudaStreamWaitEvent(stream, up_done, 0));
}

void GpuTrainer::Impl::run_step() {
  const int64_t base = host ? landed_count() : 0;
  run(gradients_graph, &Impl::enqueue_gradients);
  if (host) average_buckets(base);
  run(update_graph, &Impl::enqueue_update);
}

void GpuTrainer::Impl::plan(size_t bucket_bytes) {
  if (nccl || host) throw std::logic_error("GPU trainer: gradient averaging attached twice");
  // Graphs captured so far hold no communication.
  for (Graph* g : {&gradients_graph, &update_graph, &compute_graph})
    if (g->exec) cudaGraphExecDestroy(g->exec), *g = Graph{};
  std::vector<GradientSlot> gradient_slots;
  for (const auto& [name, slot] : slots)
    gradient_slots.push_back({name, slot.offset, slot.count, backward_stage(name, arch.blocks)});
  buckets = plan_buckets(gradient_slots, std::max<size_t>(1, bucket_bytes / sizeof(float)), ALIGN);
  for (size_t k = 0; k < buckets.size(); ++k) {
    cudaEvent_t e;
    JIRIKI_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    bucket_events.push_back(e);
  }
  JIRIKI_CUDA_CHECK(cudaEventCreateWithFlags(&comm_done, cudaEventDisableTiming));
  JIRIKI_CUDA_CHECK(cudaStreamCreateWithFlags(&comm_stream, cudaStreamNonBlocking));
  reduced = DeviceBuffer(total * sizeof(float));
  zero(reduced);  // pads no range covers stay zero
  JIRIKI_CUDA_CHECK(cudaStreamSynchronize(stream));
}

// ---- the public calls ----------------------------------------------------------------------------

GpuTrainer::GpuTrainer(const nn::Model& model, const OptimizerConfig& optimizer, int batch, int gpu,
                       const nn::CudaSettings& cuda)
    : impl_(std::make_unique<Impl>(model, optimizer, batch, gpu, cuda)) {
  upload_model(model);
  impl_->tune_convolutions();
}

GpuTrainer::~GpuTrainer() = default;

HostAllocator* GpuTrainer::host_allocator() { return &impl_->pinned; }

void GpuTrainer::upload_model(const nn::Model& model) {
  Impl& m = *impl_;
  if (!(model.arch == m.arch)) throw std::invalid_argument("GPU trainer: the model has another architecture");
  JIRIKI_CUDA_CHECK(cudaSetDevice(m.device));
  m.upload_tensors(model, m.params);
  std::vector<float> stats(m.stats.bytes() / sizeof(float));
  std::map<std::string, const nn::Tensor*> by_name;
  for (const auto& t : model.tensors()) by_name[t.name] = t.tensor;
  for (const BnUnit& u : m.bn) {
    std::copy_n(by_name.at(u.prefix + ".bn.mean")->ptr(), u.channels, stats.begin() + u.stats);
    std::copy_n(by_name.at(u.prefix + ".bn.var")->ptr(), u.channels, stats.begin() + u.stats + u.channels);
  }
  m.copy(m.stats.get(), stats.data(), m.stats.bytes(), cudaMemcpyHostToDevice);
  launch_f32_to_bf16(m.at<float>(m.params), m.at(m.params16), int64_t(m.decayed_end), m.stream);
  JIRIKI_CUDA_CHECK(cudaStreamSynchronize(m.stream));
}

void GpuTrainer::download_model(nn::Model& model) {
  Impl& m = *impl_;
  if (!(model.arch == m.arch)) throw std::invalid_argument("GPU trainer: the model has another architecture");
  JIRIKI_CUDA_CHECK(cudaSetDevice(m.device));
  m.download_tensors(m.params, model);
  std::vector<float> stats(m.stats.bytes() / sizeof(float));
  m.copy(stats.data(), m.stats.get(), m.stats.bytes(), cudaMemcpyDeviceToHost);
  std::map<std::string, nn::Tensor*> by_name;
  for (auto& t : model.tensors()) by_name[t.name] = t.tensor;
  for (const BnUnit& u : m.bn) {
    std::copy_n(stats.begin() + u.stats, u.channels, by_name.at(u.prefix + ".bn.mean")->ptr());
    std::copy_n(stats.begin() + u.stats + u.channels, u.channels, by_name.at(u.prefix + ".bn.var")->ptr());
  }
}

void GpuTrainer::download_gradients(nn::Model& grads) {
  Impl& m = *impl_;
  if (!(grads.arch == m.arch)) throw std::invalid_argument("GPU trainer: the gradient model has another architecture");
  JIRIKI_CUDA_CHECK(cudaSetDevice(m.device));
  m.download_tensors(m.grads, grads);
}

void GpuTrainer::upload_gradients(const nn::Model& grads) {
  Impl& m = *impl_;
  if (!(grads.arch == m.arch)) throw std::invalid_argument("GPU trainer: the gradient model has another architecture");
  JIRIKI_CUDA_CHECK(cudaSetDevice(m.device));
  m.upload_tensors(grads, m.grads);
}

// The optimizer's state tensors are named "<kind>.<tensor>": momentum or adam_m in the first state
// buffer, adam_v in the second.
void GpuTrainer::upload_optimizer(Optimizer& optimizer) {
  Impl& m = *impl_;
  JIRIKI_CUDA_CHECK(cudaSetDevice(m.device));
  std::vector<float> first(m.total, 0.0f), second(m.total, 0.0f);
  for (const auto& st : optimizer.state()) {
    const size_t dot = st.name.find('.');
    m.scatter(st.name.substr(dot + 1), *st.tensor, st.name.starts_with("adam_v.") ? second : first);
  }
  m.copy(m.opt_first.get(), first.data(), m.total * sizeof(float), cudaMemcpyHostToDevice);
  if (m.opt_second.bytes()) m.copy(m.opt_second.get(), second.data(), m.total * sizeof(float), cudaMemcpyHostToDevice);
  m.adam_steps = optimizer.steps();
}

void GpuTrainer::download_optimizer(Optimizer& optimizer) {
  Impl& m = *impl_;
  JIRIKI_CUDA_CHECK(cudaSetDevice(m.device));
  std::vector<float> first(m.total), second(m.total);
  m.copy(first.data(), m.opt_first.get(), m.total * sizeof(float), cudaMemcpyDeviceToHost);
  if (m.opt_second.bytes()) m.copy(second.data(), m.opt_second.get(), m.total * sizeof(float), cudaMemcpyDeviceToHost);
  for (const auto& st : optimizer.state()) {
    const size_t dot = st.name.find('.');
    m.gather(st.name.substr(dot + 1), st.name.starts_with("adam_v.") ? second : first, *st.tensor);
  }
  optimizer.set_steps(m.adam_steps);
}

nn::LossTotals GpuTrainer::compute_gradients(const Batch& batch, float val_lambda, float bn_momentum, float grad_scale,
                                             const Batch* next) {
  Impl& m = *impl_;
  if (batch.size != m.batch)
    throw std::invalid_argument("GPU trainer: a training batch of " + std::to_string(batch.size) +
                                " positions, built for " + std::to_string(m.batch));
  JIRIKI_CUDA_CHECK(cudaSetDevice(m.device));
  m.upload_batch(batch, batch.size);
  if (next) stage(*next);
  StepParams& p = m.host_step();
  p.val_lambda = val_lambda;
  p.bn_momentum = bn_momentum;
  p.grad_scale = grad_scale;
  m.upload_step_params();
  m.run(m.gradients_graph, &Impl::enqueue_gradients);
  JIRIKI_CUDA_CHECK(cudaMemcpyAsync(m.host_records.get(), m.records.get(),
                                    size_t(m.batch) * LOSS_RECORD * sizeof(float), cudaMemcpyDeviceToHost, m.stream));
  JIRIKI_CUDA_CHECK(
      cudaMemcpyAsync(m.host_local_norm.get(), m.local_norm.get(), sizeof(float), cudaMemcpyDeviceToHost, m.stream));
  JIRIKI_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  return m.read_records(m.batch);
}

void GpuTrainer::stage(const Batch& next) {
  Impl& m = *impl_;
  if (next.size != m.batch) return;
  JIRIKI_CUDA_CHECK(cudaSetDevice(m.device));
  JIRIKI_CUDA_CHECK(cudaStreamWaitEvent(m.copy_stream, m.staged_free, 0));  // the previous one was copied out
  m.copy_batch(next, next.size, m.staged.get<float>(), m.copy_stream);
  JIRIKI_CUDA_CHECK(cudaEventRecord(m.staged_ready, m.copy_stream));
  m.staged_from = &next;
}

double GpuTrainer::half_batch_norm2(const Batch& batch, float val_lambda) {
  Impl& m = *impl_;
  if (batch.size != m.batch || batch.size % 2 != 0)
    throw std::invalid_argument("GPU trainer: the half of a batch of " + std::to_string(batch.size) +
                                " positions (built for " + std::to_string(m.batch) + ", an even size)");
  JIRIKI_CUDA_CHECK(cudaSetDevice(m.device));
  m.upload_batch(batch, batch.size);
  // Rows [h, 2h) of each of the four arrays become rows [0, h).
  const size_t h = size_t(batch.size / 2);
  float* a = m.at<float>(m.input);
  for (const size_t row : {size_t(INPUT_SIZE), size_t(POLICY_SIZE), size_t(1), size_t(1)}) {
    JIRIKI_CUDA_CHECK(cudaMemcpyAsync(a + h * row, a, h * row * sizeof(float), cudaMemcpyDeviceToDevice, m.stream));
    a += size_t(m.batch) * row;
  }
  StepParams& p = m.host_step();
  p.val_lambda = val_lambda;
  p.bn_momentum = 0;  // running statistics stay as they are
  p.grad_scale = 1.0f / float(batch.size);
  m.upload_step_params();
  m.run(m.gradients_graph, &Impl::enqueue_gradients);
  JIRIKI_CUDA_CHECK(
      cudaMemcpyAsync(m.host_local_norm.get(), m.local_norm.get(), sizeof(float), cudaMemcpyDeviceToHost, m.stream));
  JIRIKI_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  return local_norm2();
}

double GpuTrainer::local_norm2() const {
  const double n = *impl_->host_local_norm.get<float>();
  return n * n;
}

double GpuTrainer::apply_gradients(double lr, double clip_grad_norm) {
  Impl& m = *impl_;
  if (m.host) throw std::logic_error("GPU trainer: with host aggregation, steps go through train_step");
  JIRIKI_CUDA_CHECK(cudaSetDevice(m.device));
  ++m.adam_steps;
  StepParams& p = m.host_step();
  p.lr = float(lr);
  p.clip = float(clip_grad_norm);
  p.bias_correction1 = float(1.0 - std::pow(m.opt.beta1, double(m.adam_steps)));
  p.bias_correction2 = float(1.0 - std::pow(m.opt.beta2, double(m.adam_steps)));
  m.upload_step_params();
  m.run(m.update_graph, &Impl::enqueue_update);
  JIRIKI_CUDA_CHECK(cudaMemcpyAsync(m.host_norm.get(), m.norm.get(), sizeof(float), cudaMemcpyDeviceToHost, m.stream));
  JIRIKI_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  return *m.host_norm.get<float>();
}

GpuTrainer::StepResult GpuTrainer::train_step(const Batch& batch, float val_lambda, float bn_momentum, double lr,
                                              double clip_grad_norm, const Batch* next) {
  Impl& m = *impl_;
  if (batch.size != m.batch)
    throw std::invalid_argument("GPU trainer: a training batch of " + std::to_string(batch.size) +
                                " positions, built for " + std::to_string(m.batch));
  JIRIKI_CUDA_CHECK(cudaSetDevice(m.device));
  ++m.adam_steps;
  StepParams& p = m.host_step();
  p = {.lr = float(lr),
       .bias_correction1 = float(1.0 - std::pow(m.opt.beta1, double(m.adam_steps))),
       .bias_correction2 = float(1.0 - std::pow(m.opt.beta2, double(m.adam_steps))),
       .clip = float(clip_grad_norm),
       .val_lambda = val_lambda,
       .bn_momentum = bn_momentum,
       .grad_scale = 1.0f / float(batch.size)};
  m.upload_batch(batch, batch.size);
  if (next) stage(*next);
  m.upload_step_params();
  m.run_step();
  JIRIKI_CUDA_CHECK(cudaMemcpyAsync(m.host_records.get(), m.records.get(),
                                    size_t(m.batch) * LOSS_RECORD * sizeof(float), cudaMemcpyDeviceToHost, m.stream));
  JIRIKI_CUDA_CHECK(cudaMemcpyAsync(m.host_norm.get(), m.norm.get(), sizeof(float), cudaMemcpyDeviceToHost, m.stream));
  JIRIKI_CUDA_CHECK(
      cudaMemcpyAsync(m.host_local_norm.get(), m.local_norm.get(), sizeof(float), cudaMemcpyDeviceToHost, m.stream));
  JIRIKI_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  const double local = *m.host_local_norm.get<float>();
  return {m.read_records(m.batch), *m.host_norm.get<float>(), local * local};
}

nn::LossTotals GpuTrainer::evaluate(const Batch& batch, float val_lambda) {
  Impl& m = *impl_;
  if (batch.size < 1 || batch.size > m.batch)
    throw std::invalid_argument("GPU trainer: an evaluation batch of " + std::to_string(batch.size) +
                                " positions, built for at most " + std::to_string(m.batch));
  JIRIKI_CUDA_CHECK(cudaSetDevice(m.device));
  m.upload_batch(batch, batch.size);  // the rows after it hold an older batch: each row is evaluated alone
  m.host_step().val_lambda = val_lambda;
  m.upload_step_params();
  m.run(m.eval_graph, &Impl::enqueue_eval);
  JIRIKI_CUDA_CHECK(cudaMemcpyAsync(m.host_records.get(), m.records.get(),
                                    size_t(batch.size) * LOSS_RECORD * sizeof(float), cudaMemcpyDeviceToHost,
                                    m.stream));
  JIRIKI_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  return m.read_records(batch.size);
}

GpuTrainer::Timing GpuTrainer::time_step(int reps) {
  Impl& m = *impl_;
  if (reps < 1) throw std::invalid_argument("reps must be at least 1");
  JIRIKI_CUDA_CHECK(cudaSetDevice(m.device));
  if (m.settings.verbose) m.profile_step();
  cudaEvent_t begin, end;
  JIRIKI_CUDA_CHECK(cudaEventCreate(&begin));
  JIRIKI_CUDA_CHECK(cudaEventCreate(&end));
  // Seconds per repetition of what `enqueue` puts on `on`.
  auto seconds = [&](cudaStream_t on, const std::function<void()>& enqueue) {
    JIRIKI_CUDA_CHECK(cudaEventRecord(begin, on));
    for (int r = 0; r < reps; ++r) enqueue();
    JIRIKI_CUDA_CHECK(cudaEventRecord(end, on));
    JIRIKI_CUDA_CHECK(cudaEventSynchronize(end));
    float ms = 0.0f;
    JIRIKI_CUDA_CHECK(cudaEventElapsedTime(&ms, begin, end));
    return 1e-3 * ms / reps;
  };
  // Seconds per repetition of fn on the host's clock, the replicas started together.
  auto wall = [&](const std::function<void()>& fn) {
    m.host->max(0);
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) fn();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
  };
  // Each variant runs once untimed first: its first run is eager and captures its graph.
  Timing t;
  m.run_step();
  if (m.host) {
    t.step = wall([&] {
      m.run_step();
      JIRIKI_CUDA_CHECK(cudaStreamSynchronize(m.stream));
    });
  } else {
    t.step = seconds(m.stream, [&] { m.run_step(); });
  }
  t.compute = t.step;
  // CudaSettings::profile (JIRIKI_CUDA_PROFILE=1): one more step between cudaProfilerStart and Stop,
  // for a profiler started with profiling off (ncu --profile-from-start off) to see the graphs'
  // kernels alone.
  if (m.settings.profile) {
    JIRIKI_CUDA_CHECK(cudaProfilerStart());
    m.run_step();
    JIRIKI_CUDA_CHECK(cudaStreamSynchronize(m.stream));
    JIRIKI_CUDA_CHECK(cudaProfilerStop());
  }
  if (m.nccl || m.host) {
    m.communicate = false;
    m.run(m.compute_graph, &Impl::enqueue_gradients);
    t.compute = seconds(m.stream, [&] {
      m.run(m.compute_graph, &Impl::enqueue_gradients);
      m.run(m.update_graph, &Impl::enqueue_update);
    });
    m.communicate = true;
  }
  if (m.nccl) {
    for (const Bucket& b : m.buckets) m.enqueue_allreduce(b, m.comm_stream);
    t.comm = seconds(m.comm_stream, [&] {
      for (const Bucket& b : m.buckets) m.enqueue_allreduce(b, m.comm_stream);
    });
  }
  if (m.host) {
    // The buckets' way through the host without the backward pass; then the floor: the whole
    // gradient down and back up on one stream, and the mean of it on the host, each alone.
    const double wait0 = m.host_wait_seconds, mean0 = m.host_mean_seconds;
    t.comm = wall([&] {
      const int64_t base = m.landed_count();
      for (const Bucket& b : m.buckets) m.enqueue_download(b, m.comm_stream);
      m.average_buckets(base);
      JIRIKI_CUDA_CHECK(cudaStreamSynchronize(m.stream));
    });
    t.wait = (m.host_wait_seconds - wait0) / reps;
    t.reduce = (m.host_mean_seconds - mean0) / reps;
    if (m.settings.verbose) {
      std::string line;
      char buf[96];
      for (size_t k = 0; k < m.host_trip.size(); ++k) {
        std::snprintf(buf, sizeof buf, " %zu: %.3f/%.3f;", k, 1e3 * m.host_trip[k].first, 1e3 * m.host_trip[k].second);
        line += buf;
      }
      std::fprintf(stderr, "[cuda train] host trip of the last rep, bucket: ms landed/averaged since the launch:%s\n",
                   line.c_str());
    }
    float* h = m.host_grads.get<float>();
    const size_t bytes = m.total * sizeof(float);
    t.copy = wall([&] {
      JIRIKI_CUDA_CHECK(cudaMemcpyAsync(h, m.grads.get(), bytes, cudaMemcpyDeviceToHost, m.comm_stream));
      JIRIKI_CUDA_CHECK(cudaMemcpyAsync(m.reduced.get(), h, bytes, cudaMemcpyHostToDevice, m.comm_stream));
      JIRIKI_CUDA_CHECK(cudaStreamSynchronize(m.comm_stream));
    });
    t.mean = wall([&] { m.host->average(h, m.total); });
  }
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  return t;
}

void GpuTrainer::attach_nccl(ncclComm_t nccl, size_t bucket_bytes) {
  Impl& m = *impl_;
#if !JIRIKI_HAVE_NCCL
  (void)nccl, (void)bucket_bytes;
  throw std::runtime_error("this jiriki was built without NCCL: use --allreduce host");
#else
  JIRIKI_CUDA_CHECK(cudaSetDevice(m.device));
  m.plan(bucket_bytes);
  m.nccl = nccl;
#endif
}

void GpuTrainer::attach_host(HostComm& comm, size_t bucket_bytes) {
  Impl& m = *impl_;
  JIRIKI_CUDA_CHECK(cudaSetDevice(m.device));
  m.plan(bucket_bytes);
  m.host_grads = PinnedBuffer(m.total * sizeof(float));
  JIRIKI_CUDA_CHECK(cudaStreamCreateWithFlags(&m.up_stream, cudaStreamNonBlocking));
  JIRIKI_CUDA_CHECK(cudaEventCreateWithFlags(&m.up_done, cudaEventDisableTiming));
  m.host = &comm;
}

std::string GpuTrainer::bucket_summary() const {
  const Impl& m = *impl_;
  std::string s = std::to_string(m.buckets.size()) + " buckets (MB, last stage of the backward pass first):";
  char buf[32];
  for (const Bucket& b : m.buckets) {
    std::snprintf(buf, sizeof buf, " %.2f", double(b.floats) * sizeof(float) / 1e6);
    s += buf;
  }
  return s;
}

size_t GpuTrainer::gradient_floats() const { return impl_->total; }

void GpuTrainer::download_update_gradients(nn::Model& grads) {
  Impl& m = *impl_;
  if (!(grads.arch == m.arch)) throw std::invalid_argument("GPU trainer: the gradient model has another architecture");
  JIRIKI_CUDA_CHECK(cudaSetDevice(m.device));
  m.download_tensors(m.nccl || m.host ? m.reduced : m.grads, grads);
}

uint64_t GpuTrainer::weights_checksum() {
  Impl& m = *impl_;
  JIRIKI_CUDA_CHECK(cudaSetDevice(m.device));
  std::vector<uint32_t> bits(m.total);
  m.copy(bits.data(), m.params.get(), m.total * sizeof(float), cudaMemcpyDeviceToHost);
  return fnv1a64_words(bits.data(), bits.size());
}

std::string GpuTrainer::description() const { return impl_->description(); }
std::string GpuTrainer::device_name() const { return impl_->device_name; }

}  // namespace jiriki::training::cuda
