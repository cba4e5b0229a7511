// What a GPU training step enqueues: each layer's forward and backward side by side, the sequences
// (forward, backward with its overlapped weight gradients and all-reduces, the optimizer), and
// their capture into CUDA graphs (see gpu_trainer_impl.h for the whole step).
#include "training/cuda/gpu_trainer_impl.h"

namespace jiriki::training::cuda {

// ---- layers ----------------------------------------------------------------------------------

void GpuTrainer::Impl::bn_forward(const BnUnit& u, const uint16_t* x, const uint16_t* residual, uint16_t* out,
                                  bool train) {
  float* s = at<float>(saved, u.saved);
  float* running_mean = at<float>(stats, u.stats);
  float* running_var = running_mean + u.channels;
  const float *gamma = at<float>(params, u.gamma), *beta = at<float>(params, u.beta);
  if (train)
    launch_bn_train_statistics(x, rows, u.channels, gamma, beta, running_mean, running_var, arch.bn_eps,
                               device_params(), s, at<float>(reduce_scratch), stream);
  else launch_bn_eval_statistics(u.channels, gamma, beta, running_mean, running_var, arch.bn_eps, s, stream);
  launch_bn_act_forward(x, s, residual, out, rows, u.channels, arch.activation, stream);
}

void GpuTrainer::Impl::bn_backward(const BnUnit& u, const uint16_t* dy, const uint16_t* x, const uint16_t* residual,
                                   uint16_t* dx, uint16_t* dresidual) {
  launch_bn_act_backward(dy, x, residual, at<float>(saved, u.saved), at<float>(params, u.gamma),
                         at<float>(grads, u.gamma), at<float>(grads, u.beta), dx, dresidual, rows, u.channels,
                         arch.activation, at<float>(reduce_scratch), stream);
}

// cuBLAS is column-major: a row-major [r][c] matrix is its column-major transpose with ld = c.
// Y^T (O x M) = W (as O x I, from the col-major I x O, op T) x X^T (I x M).
void GpuTrainer::Impl::gemm_forward(void* y, cudaDataType_t y_type, const uint16_t* x, const uint16_t* w, int m, int in,
                                    int out) {
  const float one = 1.0f, zero = 0.0f;
  JIRIKI_CUBLAS_CHECK(cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, out, m, in, &one, w, CUDA_R_16BF, in, x,
                                   CUDA_R_16BF, in, &zero, y, y_type, out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}
// dX^T (I x M) = W^T (I x O) x dY^T (O x M); dX = beta dX + ...
void GpuTrainer::Impl::gemm_backward_data(uint16_t* dx, const uint16_t* dy, const uint16_t* w, int m, int in, int out,
                                          float beta) {
  const float one = 1.0f;
  JIRIKI_CUBLAS_CHECK(cublasGemmEx(cublas, CUBLAS_OP_N, CUBLAS_OP_N, in, m, out, &one, w, CUDA_R_16BF, in, dy,
                                   CUDA_R_16BF, out, &beta, dx, CUDA_R_16BF, in, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
}
// dW^T (I x O) = X^T (I x M) x dY (M x O, from the col-major O x M, op T); written in fp32.
void GpuTrainer::Impl::gemm_backward_weight(float* dw, const uint16_t* dy, const uint16_t* x, int m, int in, int out) {
  const float one = 1.0f, zero = 0.0f;
  JIRIKI_CUBLAS_CHECK(cublasGemmEx(cublas, CUBLAS_OP_N, CUBLAS_OP_T, in, out, m, &one, x, CUDA_R_16BF, in, dy,
                                   CUDA_R_16BF, out, &zero, dw, CUDA_R_32F, in, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
}

// ---- the sequences -----------------------------------------------------------------------------

void GpuTrainer::Impl::enqueue_forward(bool train) {
  const float* features = at<float>(input);
  const float* target = features + size_t(batch) * INPUT_SIZE;
  const float* result = target + size_t(batch) * POLICY_SIZE;
  const float* eval = result + batch;
  const int units = int(conv_out.size());

  launch_features_to_nhwc(features, at(x0), batch, stream);
  mark("inputs");
  for (int u = 0; u < units; ++u) {
    conv_forward(u, u == 0 ? at(x0) : at(act_out[u - 1]), at(conv_out[u]));
    mark("conv forward");
    const uint16_t* residual = u > 0 && u % 2 == 0 ? at(act_out[u - 2]) : nullptr;  // a block's input
    bn_forward(bn[u], at(conv_out[u]), residual, at(act_out[u]), train);
    mark("batch norm forward");
  }
  const uint16_t* trunk = at(act_out[units - 1]);

  gemm_forward(heads.get(), CUDA_R_32F, trunk, weight16("policy.conv.weight"), int(rows), channels, HEAD_OUTPUTS);
  launch_heads_split(at<float>(heads), param("policy.bias"), at<float>(policy), at(value_conv), batch, stream);
  bn_forward(bn.back(), at(value_conv), nullptr, at(value_act), train);
  gemm_forward(fc1.get(), CUDA_R_32F, at(value_act), weight16("value.fc1.weight"), batch, POLICY_SIZE, VALUE_HIDDEN);
  launch_value_forward(at<float>(fc1), param("value.fc1.bias"), param("value.fc2.weight"), param("value.fc2.bias"),
                       arch.activation, at<float>(value_logit), batch, stream);
  mark("heads forward");
  launch_loss(at<float>(policy), at<float>(value_logit), target, result, eval, device_params(),
              train ? at<float>(dpolicy) : nullptr, at(dpolicy_nhwc), train ? at<float>(dvalue) : nullptr,
              at<float>(records), batch, stream);
  mark("loss");
}

void GpuTrainer::Impl::enqueue_backward() {
  const int units = int(conv_out.size());
  const uint16_t* trunk = at(act_out[units - 1]);
  float* colsum = at<float>(column_scratch);

  // Value head, from the logit back to the trunk.
  launch_value_backward(at<float>(fc1), param("value.fc1.bias"), param("value.fc2.weight"), at<float>(dvalue),
                        arch.activation, at<float>(dfc1), at(dfc1_16), at<float>(fc2_terms), batch, stream);
  launch_column_sums(at<float>(fc2_terms), batch, VALUE_HIDDEN, grad("value.fc2.weight"), colsum, stream);
  launch_column_sums(at<float>(dvalue), batch, 1, grad("value.fc2.bias"), colsum, stream);
  launch_column_sums(at<float>(dfc1), batch, VALUE_HIDDEN, grad("value.fc1.bias"), colsum, stream);
  gemm_backward_weight(grad("value.fc1.weight"), at(dfc1_16), at(value_act), batch, POLICY_SIZE, VALUE_HIDDEN);
  gemm_backward_data(at(d_value_act), at(dfc1_16), weight16("value.fc1.weight"), batch, POLICY_SIZE, VALUE_HIDDEN,
                     0.0f);
  bn_backward(bn.back(), at(d_value_act), at(value_conv), nullptr, at(d_value_conv), nullptr);

  // Both heads' 1x1 convolutions: weight gradients, and the trunk's gradient as the sum of the two.
  launch_column_sums(at<float>(dpolicy), batch, POLICY_SIZE, grad("policy.bias"), colsum, stream);
  gemm_backward_weight(grad("policy.conv.weight"), at(dpolicy_nhwc), trunk, int(rows), channels, POLICY_LABELS);
  gemm_backward_weight(grad("value.conv.weight"), at(d_value_conv), trunk, int(rows), channels, VALUE_CHANNELS);
  gemm_backward_data(at(dh[0]), at(dpolicy_nhwc), weight16("policy.conv.weight"), int(rows), channels, POLICY_LABELS,
                     0.0f);
  gemm_backward_data(at(dh[0]), at(d_value_conv), weight16("value.conv.weight"), int(rows), channels, VALUE_CHANNELS,
                     1.0f);
  mark("heads backward");
  stage_done(0);

  // Residual blocks, last to first. dh[cur] holds the gradient of the block's output; the block's
  // input gradient goes to dh[1 - cur]: the skip connection's share first, then conv1's.
  int cur = 0, k = 0;  // k: units whose dz this pass has written
  for (int i = arch.blocks - 1; i >= 0; --i) {
    const int u1 = 2 * i + 1, u2 = 2 * i + 2;
    const uint16_t* in = at(act_out[2 * i]);
    uint16_t* din = at(dh[1 - cur]);
    // The skip connection's gradient goes to `skip` when conv1's backward data pass adds it (graph
    // API), else straight into din, which the legacy pass then adds to.
    uint16_t* skip_grad = block_data_add ? at(skip) : din;
    uint16_t* dz2 = dz_buffer(k);
    bn_backward(bn[u2], at(dh[cur]), at(conv_out[u2]), in, dz2, skip_grad);
    mark("batch norm backward");
    weight_gradient(u2, at(act_out[u1]), dz2, k++);
    conv_backward_data(dz2, weight16(unit_weight(bn[u2])), at(scratch), nullptr);
    mark("conv backward data");
    uint16_t* dz1 = dz_buffer(k);
    bn_backward(bn[u1], at(scratch), at(conv_out[u1]), nullptr, dz1, nullptr);
    mark("batch norm backward");
    weight_gradient(u1, in, dz1, k++);
    conv_backward_data(dz1, weight16(unit_weight(bn[u1])), din, skip_grad);
    mark("conv backward data");
    stage_done(arch.blocks - i);
    cur = 1 - cur;
  }

  // The stem: no input gradient.
  uint16_t* dz0 = dz_buffer(k);
  bn_backward(bn[0], at(dh[cur]), at(conv_out[0]), nullptr, dz0, nullptr);
  mark("batch norm backward");
  weight_gradient(0, at(x0), dz0, k++);
  stage_done(arch.blocks + 1);
  // The weight gradients (and their conversions) run behind the chain: join them.
  JIRIKI_CUDA_CHECK(cudaEventRecord(wgrad_done, wgrad_stream));
  JIRIKI_CUDA_CHECK(cudaStreamWaitEvent(stream, wgrad_done, 0));
  mark("wait for the weight gradients");
  launch_norm(at<float>(grads), int64_t(total), at<float>(local_norm), at<double>(norm_scratch), stream);
  if ((nccl || host) && communicate) {  // the step goes on once the last bucket is averaged (NCCL) or landed (host)
    JIRIKI_CUDA_CHECK(cudaEventRecord(comm_done, comm_stream));
    JIRIKI_CUDA_CHECK(cudaStreamWaitEvent(stream, comm_done, 0));
  }
  mark("gradients to fp32, all-reduce");
}

// The buffer for the dz of this pass's k-th unit, once the weight gradient that read it last (unit
// k - DZ_RING) is done with it.
uint16_t* GpuTrainer::Impl::dz_buffer(int k) {
  if (k >= DZ_RING) JIRIKI_CUDA_CHECK(cudaStreamWaitEvent(stream, dz_free[k % DZ_RING], 0));
  return at(dz_ring[k % DZ_RING]);
}

// A unit's weight gradient on wgrad_stream, once the chain has written its dz (the k-th of the pass).
void GpuTrainer::Impl::weight_gradient(int unit, const uint16_t* in, const uint16_t* dz, int k) {
  JIRIKI_CUDA_CHECK(cudaEventRecord(dz_ready, stream));
  JIRIKI_CUDA_CHECK(cudaStreamWaitEvent(wgrad_stream, dz_ready, 0));
  conv_backward_filter(unit, in, dz, at(wgrad16, slot(unit_weight(bn[unit])).offset));
  JIRIKI_CUDA_CHECK(cudaEventRecord(dz_free[k % DZ_RING], wgrad_stream));
}

// The end of a backward stage: its convolutions' weight gradients to fp32, then the all-reduce (or
// the copy to the host) of every bucket it completes, on comm_stream. Both run after wgrad_stream's
// work so far and after what `stream` has done (the stage's other gradients).
void GpuTrainer::Impl::stage_done(int stage) {
  JIRIKI_CUDA_CHECK(cudaEventRecord(stage_ready, stream));
  JIRIKI_CUDA_CHECK(cudaStreamWaitEvent(wgrad_stream, stage_ready, 0));
  if (size_t(stage) < stage_conv_ranges.size())
    for (const auto& [offset, count] : stage_conv_ranges[size_t(stage)])
      launch_bf16_to_f32(at(wgrad16, offset), at<float>(grads, offset), int64_t(count), wgrad_stream);
  if (!(nccl || host) || !communicate) return;
  for (size_t k = 0; k < buckets.size(); ++k) {
    if (buckets[k].ready_stage != stage) continue;
    JIRIKI_CUDA_CHECK(cudaEventRecord(bucket_events[k], wgrad_stream));
    JIRIKI_CUDA_CHECK(cudaStreamWaitEvent(comm_stream, bucket_events[k], 0));
    if (nccl) enqueue_allreduce(buckets[k], comm_stream);
    else enqueue_download(buckets[k], comm_stream);
  }
}

// One bucket: one NCCL group of all-reduces (averages), one per range, from grads into reduced.
void GpuTrainer::Impl::enqueue_allreduce(const Bucket& b, cudaStream_t on) {
#if JIRIKI_HAVE_NCCL
  JIRIKI_NCCL_CHECK(ncclGroupStart());
  for (const auto& [offset, count] : b.ranges)
    JIRIKI_NCCL_CHECK(
        ncclAllReduce(at<float>(grads, offset), at<float>(reduced, offset), count, ncclFloat, ncclAvg, nccl, on));
  JIRIKI_NCCL_CHECK(ncclGroupEnd());
#else
  (void)b, (void)on;
  throw std::logic_error("GPU trainer: NCCL all-reduce in a build without NCCL");
#endif
}

void GpuTrainer::Impl::enqueue_update() {
  launch_norm(update_grads(), int64_t(total), at<float>(norm), at<double>(norm_scratch), stream);
  mark("gradient norm");
  const float wd = float(opt.weight_decay);
  // Two groups: [0, decayed_end) with weight decay and its bf16 copy, then the rest without.
  const int64_t n[2] = {int64_t(decayed_end), int64_t(total - decayed_end)};
  const size_t first[2] = {0, decayed_end};
  for (int k = 0; k < 2; ++k) {
    float* w = at<float>(params, first[k]);
    const float* g = update_grads() + first[k];
    uint16_t* w16 = k == 0 ? at(params16) : nullptr;
    if (opt.kind == OptimizerKind::SGD)
      launch_sgd(w, g, at<float>(opt_first, first[k]), w16, n[k], k == 0 ? wd : 0.0f, float(opt.momentum), opt.nesterov,
                 device_params(), at<float>(norm), stream);
    else
      launch_adamw(w, g, at<float>(opt_first, first[k]), at<float>(opt_second, first[k]), w16, n[k], k == 0 ? wd : 0.0f,
                   opt.beta1, opt.beta2, float(opt.eps), device_params(), at<float>(norm), stream);
  }
  mark("optimizer");
}

void GpuTrainer::Impl::profile_step() {
  std::vector<std::pair<const char*, cudaEvent_t>> events;
  marks = &events;
  mark("start");
  enqueue_gradients();
  enqueue_update();
  marks = nullptr;
  JIRIKI_CUDA_CHECK(cudaEventSynchronize(events.back().second));
  std::vector<std::pair<std::string, double>> stages;  // in order of first appearance
  double total = 0;
  for (size_t i = 1; i < events.size(); ++i) {
    float ms = 0;
    JIRIKI_CUDA_CHECK(cudaEventElapsedTime(&ms, events[i - 1].second, events[i].second));
    auto it = std::find_if(stages.begin(), stages.end(), [&](auto& s) { return s.first == events[i].first; });
    if (it == stages.end()) it = stages.insert(stages.end(), {events[i].first, 0.0});
    it->second += ms;
    total += ms;
  }
  for (auto& e : events) cudaEventDestroy(e.second);
  std::fprintf(stderr, "[cuda train] batch %d, one eager step, ms by stage:", batch);
  for (const auto& [stage, ms] : stages) std::fprintf(stderr, " %s %.3f;", stage.c_str(), ms);
  std::fprintf(stderr, " total %.3f\n", total);
}

// Runs a sequence: eagerly the first time (which also loads every kernel and lets cuBLAS and cuDNN
// set up), captured into a graph right after, and as graph replays from then on. Should capture or
// instantiation fail, the sequence keeps running eagerly (JIRIKI_CUDA_VERBOSE says so).
void GpuTrainer::Impl::run(Graph& g, void (Impl::*enqueue)()) {
  if (g.exec) {
    JIRIKI_CUDA_CHECK(cudaGraphLaunch(g.exec, stream));
    return;
  }
  (this->*enqueue)();
  if (g.tried) return;
  g.tried = true;
  JIRIKI_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaGraph_t graph = nullptr;
  JIRIKI_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  std::string failure;
  try {
    (this->*enqueue)();
  } catch (const std::exception& e) {
    failure = e.what();
  }
  cudaError_t e = cudaStreamEndCapture(stream, &graph);
  if (failure.empty() && e != cudaSuccess) failure = cudaGetErrorString(e);
  if (failure.empty()) {
    e = cudaGraphInstantiate(&g.exec, graph, 0);
    if (e != cudaSuccess) failure = cudaGetErrorString(e), g.exec = nullptr;
  }
  if (graph) cudaGraphDestroy(graph);
  cudaGetLastError();  // a failed capture leaves its error behind
  if (!failure.empty() && settings.verbose)
    std::fprintf(stderr, "[cuda train] no CUDA graph (%s): running eagerly\n", failure.c_str());
}

}  // namespace jiriki::training::cuda
