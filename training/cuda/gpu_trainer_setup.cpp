// The GPU trainer set up: device, handles, the flat buffers and their layout, the activations, and
// the convolutions' algorithms timed (see gpu_trainer_impl.h).
#include <chrono>

#include "training/cuda/gpu_trainer_impl.h"

namespace jiriki::training::cuda {

namespace {
// Milliseconds of the host's clock since `start` (the set-up's own costs, for the description).
double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

// ---- construction ------------------------------------------------------------------------------

GpuTrainer::Impl::Impl(const nn::Model& model, const OptimizerConfig& o, int b, int gpu, const nn::CudaSettings& cuda)
    : settings(cuda),
      arch(model.arch),
      opt(o),
      batch(b),
      device(gpu),
      channels(model.arch.channels),
      rows(int64_t(b) * SQUARES) {
  if (channels % 8 != 0)
    throw std::invalid_argument("the GPU trainer needs a channel count that is a multiple of 8 (the network has " +
                                std::to_string(channels) + ")");
  if (batch < 1) throw std::invalid_argument("the GPU trainer's batch must be at least 1");
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess)
    throw std::runtime_error(std::string("no CUDA device available: ") + cudaGetErrorString(e));
  if (device < 0 || device >= count)
    throw std::invalid_argument("CUDA device " + std::to_string(device) + " does not exist (" + std::to_string(count) +
                                " present)");
  JIRIKI_CUDA_CHECK(cudaSetDevice(device));
  cudaDeviceProp prop;
  JIRIKI_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  if (prop.major < 8)
    throw std::runtime_error(std::string("CUDA device ") + prop.name +
                             " has no bf16 tensor cores (8.0 or newer needed)");
  const int v = int(cudnnGetVersion());
  device_name = std::string(prop.name) + ", device " + std::to_string(device) + ", cuDNN " + std::to_string(v / 10000) +
                "." + std::to_string(v % 10000 / 100) + "." + std::to_string(v % 100);

  JIRIKI_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  JIRIKI_CUDNN_CHECK(cudnnCreate(&cudnn));
  JIRIKI_CUDNN_CHECK(cudnnSetStream(cudnn, stream));
  JIRIKI_CUBLAS_CHECK(cublasCreate(&cublas));
  JIRIKI_CUBLAS_CHECK(cublasSetStream(cublas, stream));
  // A fixed workspace: cuBLAS must not allocate while a graph is being captured.
  cublas_workspace = DeviceBuffer(CUBLAS_WORKSPACE);
  JIRIKI_CUBLAS_CHECK(cublasSetWorkspace(cublas, cublas_workspace.get(), CUBLAS_WORKSPACE));
  JIRIKI_CUDA_CHECK(cudaStreamCreateWithFlags(&wgrad_stream, cudaStreamNonBlocking));
  JIRIKI_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream, cudaStreamNonBlocking));
  for (cudaEvent_t* e :
       {&dz_ready, &dz_free[0], &dz_free[1], &dz_free[2], &stage_ready, &wgrad_done, &staged_ready, &staged_free})
    JIRIKI_CUDA_CHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
  static_assert(DZ_RING == 3);

  build_layout(model);
  allocate_activations();
  host_params = PinnedBuffer(sizeof(StepParams));
  host_step() = StepParams{};
  step_params = DeviceBuffer(sizeof(StepParams));
  host_records = PinnedBuffer(size_t(batch) * LOSS_RECORD * sizeof(float));
  host_norm = PinnedBuffer(sizeof(float));
  host_local_norm = PinnedBuffer(sizeof(float));
  local_norm = DeviceBuffer(sizeof(float));
  upload_step_params();
}

GpuTrainer::Impl::~Impl() {
  // Members are released after this body, on this thread: make their device the current one.
  cudaSetDevice(device);
  cudaStreamSynchronize(stream);
  if (comm_stream) cudaStreamSynchronize(comm_stream);
  if (up_stream) cudaStreamSynchronize(up_stream);
  if (wgrad_stream) cudaStreamSynchronize(wgrad_stream);
  if (copy_stream) cudaStreamSynchronize(copy_stream);  // a staged copy may still read host memory
  for (Graph* g : {&gradients_graph, &update_graph, &eval_graph, &compute_graph})
    if (g->exec) cudaGraphExecDestroy(g->exec);
  for (cudaEvent_t e : bucket_events) cudaEventDestroy(e);
  if (comm_done) cudaEventDestroy(comm_done);
  if (comm_stream) cudaStreamDestroy(comm_stream);
  if (up_done) cudaEventDestroy(up_done);
  if (up_stream) cudaStreamDestroy(up_stream);
  for (cudaEvent_t e :
       {dz_ready, dz_free[0], dz_free[1], dz_free[2], stage_ready, wgrad_done, staged_ready, staged_free})
    if (e) cudaEventDestroy(e);
  if (wgrad_stream) cudaStreamDestroy(wgrad_stream);
  if (copy_stream) cudaStreamDestroy(copy_stream);
  stem_conv.reset();
  block_conv.reset();
  if (cublas) cublasDestroy(cublas);
  if (cudnn) cudnnDestroy(cudnn);
  if (stream) cudaStreamDestroy(stream);
}

void GpuTrainer::Impl::build_layout(const nn::Model& model) {
  // Tensors of rank >= 2 first (weight decay and a bf16 copy), in the Model's order, which puts the
  // convolutions first and policy.conv.weight just before value.conv.weight: the two heads' 1x1
  // convolutions are one [54][C] matrix.
  size_t offset = 0;
  for (bool decayed : {true, false}) {
    for (const auto& t : model.tensors()) {
      if (!t.trainable || (t.tensor->shape.size() >= 2) != decayed) continue;
      Slot s;
      const auto& shape = t.tensor->shape;
      s.count = t.tensor->size();
      if (shape.size() == 4 && shape[2] == 3) {
        s.layout = Slot::KRSC;
        s.in_padded = t.name == "stem.conv.weight" ? INPUT_CHANNELS_PADDED : shape[1];
        s.count = size_t(shape[0]) * 9 * s.in_padded;
      } else if (t.name == "value.fc1.weight") {
        s.layout = Slot::FC1;
      }
      s.offset = t.name == "value.conv.weight" ? offset : round_up(offset, ALIGN);
      offset = s.offset + s.count;
      if (s.layout == Slot::KRSC) conv_end = offset;
      if (s.layout == Slot::KRSC) {
        const size_t stage = size_t(backward_stage(t.name, arch.blocks));
        if (stage_conv_ranges.size() <= stage) stage_conv_ranges.resize(stage + 1);
        stage_conv_ranges[stage].emplace_back(s.offset, s.count);
      }
      slots[t.name] = s;
    }
    if (decayed) decayed_end = offset = round_up(offset, ALIGN);
  }
  total = round_up(offset, ALIGN);
  if (slot("value.conv.weight").offset != slot("policy.conv.weight").offset + size_t(POLICY_LABELS) * channels)
    throw std::logic_error("GPU trainer: the heads' weights are not adjacent");

  params = DeviceBuffer(total * sizeof(float));
  grads = DeviceBuffer(total * sizeof(float));
  opt_first = DeviceBuffer(total * sizeof(float));
  if (opt.kind == OptimizerKind::ADAMW) opt_second = DeviceBuffer(total * sizeof(float));
  params16 = DeviceBuffer(decayed_end * sizeof(uint16_t));
  wgrad16 = DeviceBuffer(conv_end * sizeof(uint16_t));
  // Pads between tensors stay zero for good: zero weights with zero gradients never move.
  for (DeviceBuffer* d : {&params, &grads, &opt_first, &opt_second, &params16, &wgrad16}) zero(*d);

  // Batch norms: the stem, each block's two, the value head's.
  auto add_bn = [&](const std::string& prefix, int c) {
    BnUnit u;
    u.prefix = prefix;
    u.channels = c;
    u.gamma = slot(prefix + ".bn.gamma").offset;
    u.beta = slot(prefix + ".bn.beta").offset;
    u.stats = bn.empty() ? 0 : bn.back().stats + 2 * size_t(bn.back().channels);
    u.saved = bn.empty() ? 0 : bn.back().saved + 4 * size_t(bn.back().channels);
    bn.push_back(u);
  };
  add_bn("stem.conv", channels);
  for (int i = 0; i < arch.blocks; ++i) {
    add_bn("blocks." + std::to_string(i) + ".conv1", channels);
    add_bn("blocks." + std::to_string(i) + ".conv2", channels);
  }
  add_bn("value.conv", VALUE_CHANNELS);
  stats = DeviceBuffer((bn.back().stats + 2 * VALUE_CHANNELS) * sizeof(float));
  saved = DeviceBuffer((bn.back().saved + 4 * VALUE_CHANNELS) * sizeof(float));
  zero(saved);
}

void GpuTrainer::Impl::allocate_activations() {
  const size_t b = size_t(batch), r = size_t(rows), c = size_t(channels);
  auto bf16s = [](size_t n) { return DeviceBuffer(n * sizeof(uint16_t)); };
  auto floats = [](size_t n) { return DeviceBuffer(n * sizeof(float)); };
  input = floats(b * (INPUT_SIZE + POLICY_SIZE + 2));
  zero(input);  // evaluation reads rows a short batch leaves
  staged = floats(b * (INPUT_SIZE + POLICY_SIZE + 2));
  x0 = bf16s(r * INPUT_CHANNELS_PADDED);
  for (size_t u = 0; u + 1 < bn.size(); ++u) {
    conv_out.push_back(bf16s(r * c));
    act_out.push_back(bf16s(r * c));
  }
  heads = floats(r * HEAD_OUTPUTS);
  policy = floats(b * POLICY_SIZE);
  value_conv = bf16s(r * VALUE_CHANNELS);
  value_act = bf16s(b * POLICY_SIZE);
  fc1 = floats(b * VALUE_HIDDEN);
  value_logit = floats(b);
  dpolicy = floats(b * POLICY_SIZE);
  dpolicy_nhwc = bf16s(r * POLICY_LABELS);
  dvalue = floats(b);
  dfc1 = floats(b * VALUE_HIDDEN);
  dfc1_16 = bf16s(b * VALUE_HIDDEN);
  fc2_terms = floats(b * VALUE_HIDDEN);
  d_value_act = bf16s(b * POLICY_SIZE);
  d_value_conv = bf16s(r * VALUE_CHANNELS);
  for (auto& d : dh) d = bf16s(r * c);
  scratch = bf16s(r * c);
  skip = bf16s(r * c);
  for (auto& d : dz_ring) d = bf16s(r * c);
  records = floats(b * LOSS_RECORD);
  norm = floats(1);
  const int widest = std::max(channels, VALUE_CHANNELS);
  reduce_scratch = floats(channel_sums_scratch(widest) + 3 * size_t(widest));
  column_scratch = floats(column_sums_scratch(POLICY_SIZE));
  norm_scratch = DeviceBuffer(SUM_OF_SQUARES_SCRATCH * sizeof(double));
}

// The key of this trainer's convolutions in the choice file: the device's (the GPU model, its
// compute capability, cuDNN's version), the batch and the channels.
std::string GpuTrainer::Impl::conv_choices_key() const {
  JIRIKI_CUDA_CHECK(cudaSetDevice(device));
  char buf[96];
  std::snprintf(buf, sizeof buf, "/b%d,i%d,c%d,blocks%d", batch, INPUT_CHANNELS_PADDED, channels, int(arch.blocks > 0));
  return nn::cuda::choice_device_key() + buf;
}

// Chooses how each convolution pass is computed: as kept for this shape (training/conv_choices.h),
// else by timing cuDNN's algorithms and the graph API's engines on random bf16 data in the real
// buffers (zeros can run faster than real data), keeping the answer. Then sizes the one workspace
// the chosen algorithms share.
void GpuTrainer::Impl::tune_convolutions() {
  const size_t c = size_t(channels);
  launch_fill_random(at(x0), rows * INPUT_CHANNELS_PADDED, 1, stream);
  launch_fill_random(at(act_out[0]), rows * c, 2, stream);
  launch_fill_random(at(dz_ring[0]), rows * c, 3, stream);
  const std::string key = conv_choices_key();
  std::optional<TrainConvChoices> kept = kept_conv_choices(settings.choice_file, key);
  const auto legacy_start = std::chrono::steady_clock::now();
  stem_conv = std::make_unique<Conv>(batch, INPUT_CHANNELS_PADDED, channels);
  if (arch.blocks > 0) block_conv = std::make_unique<Conv>(batch, channels, channels);
  if (kept && !(stem_conv->use(cudnn, kept->stem, false) && (!block_conv || block_conv->use(cudnn, kept->block, true))))
    kept.reset();  // cuDNN refuses what was kept: time afresh
  if (!kept) {
    DeviceBuffer find_workspace(FIND_WORKSPACE);
    stem_conv->tune(cudnn, at(x0), weight16("stem.conv.weight"), at(conv_out[0]), at(dz_ring[0]), nullptr, at(wgrad16),
                    find_workspace.get(), FIND_WORKSPACE);
    if (block_conv)
      block_conv->tune(cudnn, at(act_out[0]), weight16("blocks.0.conv1.weight"), at(conv_out[1]), at(dz_ring[0]),
                       at(scratch), at(wgrad16), find_workspace.get(), FIND_WORKSPACE);
  }
  size_t workspace = stem_conv->workspace_size();
  if (block_conv) workspace = std::max(workspace, block_conv->workspace_size());
  char legacy_text[96];
  std::snprintf(legacy_text, sizeof legacy_text, "; legacy algorithms %s in %.0f ms", kept ? "kept" : "chosen",
                ms_since(legacy_start));
  graph_text += legacy_text;
  // The graph API's engines where they beat the legacy ones. The legacy calls are timed with a
  // workspace of their own size (cudnn_workspace does not exist yet).
  using nn::cuda::ConvPass;
  TrainConvChoices chosen;
  auto kept_route = [&](ConvPassIndex p) { return kept ? &kept->route[p] : nullptr; };
  DeviceBuffer legacy_ws(std::max<size_t>(workspace, 256));
  stem_forward = graph_conv(
      ConvPass::FORWARD, INPUT_CHANNELS_PADDED, false,
      {at(x0), weight16("stem.conv.weight"), nullptr, nullptr, at(conv_out[0])},
      [&] { stem_conv->forward(cudnn, at(x0), weight16("stem.conv.weight"), at(conv_out[0]), legacy_ws.get()); },
      kept_route(STEM_FORWARD), chosen.route[STEM_FORWARD]);
  stem_filter = graph_conv(
      ConvPass::BACKWARD_FILTER, INPUT_CHANNELS_PADDED, false,
      {at(x0), nullptr, nullptr, nullptr, at(dz_ring[0]), at(wgrad16)},
      [&] { stem_conv->backward_filter(cudnn, at(x0), at(dz_ring[0]), at(wgrad16), legacy_ws.get()); },
      kept_route(STEM_FILTER), chosen.route[STEM_FILTER]);
  if (block_conv) {
    block_forward = graph_conv(
        ConvPass::FORWARD, channels, false,
        {at(act_out[0]), weight16("blocks.0.conv1.weight"), nullptr, nullptr, at(conv_out[1])},
        [&] {
          block_conv->forward(cudnn, at(act_out[0]), weight16("blocks.0.conv1.weight"), at(conv_out[1]),
                              legacy_ws.get());
        },
        kept_route(BLOCK_FORWARD), chosen.route[BLOCK_FORWARD]);
    block_filter = graph_conv(
        ConvPass::BACKWARD_FILTER, channels, false,
        {at(act_out[0]), nullptr, nullptr, nullptr, at(dz_ring[0]), at(wgrad16)},
        [&] { block_conv->backward_filter(cudnn, at(act_out[0]), at(dz_ring[0]), at(wgrad16), legacy_ws.get()); },
        kept_route(BLOCK_FILTER), chosen.route[BLOCK_FILTER]);
    const uint16_t* w = weight16("blocks.0.conv1.weight");
    launch_fill_random(at(skip), rows * c, 4, stream);
    for (bool add : {false, true}) {
      const ConvPassIndex p = add ? BLOCK_DATA_ADD : BLOCK_DATA;
      (add ? block_data_add : block_data) = graph_conv(
          ConvPass::BACKWARD_DATA, channels, add,
          {.w = w, .residual = add ? at(skip) : nullptr, .y = at(dz_ring[0]), .dx = at(scratch)},
          [&] { block_conv->backward_data(cudnn, at(dz_ring[0]), w, at(scratch), add ? 1.0f : 0.0f, legacy_ws.get()); },
          kept_route(p), chosen.route[p]);
    }
  }
  if (!kept) {
    chosen.stem = stem_conv->algorithms();
    if (block_conv) chosen.block = block_conv->algorithms();
    keep_conv_choices(settings.choice_file, key, chosen);
  }
  for (const auto* f : {stem_forward.get(), block_forward.get(), stem_filter.get(), block_filter.get(),
                        block_data.get(), block_data_add.get()})
    if (f) workspace = std::max(workspace, f->workspace_size());
  JIRIKI_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudnn_workspace = DeviceBuffer(std::max<size_t>(workspace, 256));
  wgrad_workspace = DeviceBuffer(std::max<size_t>(workspace, 256));
  // The random values overwrote the first tensor of wgrad16, whose pads must be zero.
  zero(wgrad16);
  if (settings.verbose) std::fprintf(stderr, "[cuda train] %s\n", description().c_str());
}

// Milliseconds per run of `enqueue` on the stream: one run to warm up, then the mean of 20.
float GpuTrainer::Impl::milliseconds(const std::function<void()>& enqueue) const {
  constexpr int REPS = 20;
  cudaEvent_t begin, end;
  JIRIKI_CUDA_CHECK(cudaEventCreate(&begin));
  JIRIKI_CUDA_CHECK(cudaEventCreate(&end));
  enqueue();
  JIRIKI_CUDA_CHECK(cudaEventRecord(begin, stream));
  for (int r = 0; r < REPS; ++r) enqueue();
  JIRIKI_CUDA_CHECK(cudaEventRecord(end, stream));
  JIRIKI_CUDA_CHECK(cudaEventSynchronize(end));
  float ms = 0;
  JIRIKI_CUDA_CHECK(cudaEventElapsedTime(&ms, begin, end));
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  return ms / REPS;
}

// The graph API's engines for one convolution pass, tuned on `args` (its output is overwritten),
// if the best of them is faster than the legacy algorithm run by `legacy`; null otherwise, or when
// cuDNN offers none. The forward and backward data passes try two graphs: the bare convolution and
// the convolution through an identity (ConvShape::identity); `residual` (backward data only): the
// second alone, adding args.residual. `kept`: the route chosen before, built without timing (null:
// choose by timing). `route`: the one taken.
std::unique_ptr<nn::cuda::FusedConv> GpuTrainer::Impl::graph_conv(nn::cuda::ConvPass pass, int in_channels,
                                                                  bool residual, const nn::cuda::ConvArgs& args,
                                                                  const std::function<void()>& legacy,
                                                                  const ConvRoute* kept, ConvRoute& route) {
  using nn::cuda::ConvPass;
  const char* what = pass == ConvPass::FORWARD           ? "forward"
                     : pass == ConvPass::BACKWARD_FILTER ? "backward filter"
                     : residual                          ? "backward data + skip"
                                                         : "backward data";
  char buf[200];
  std::unique_ptr<nn::cuda::FusedConv> best;
  float best_ms = 0;
  route = ConvRoute::LEGACY;
  for (bool identity : {false, true}) {
    if (identity ? pass == ConvPass::BACKWARD_FILTER : residual) continue;
    const ConvRoute here = identity ? ConvRoute::IDENTITY : ConvRoute::BARE;
    if (kept && *kept != here) continue;
    nn::cuda::ConvShape shape;
    shape.batch = batch;
    shape.in_channels = in_channels;
    shape.out_channels = channels;
    shape.epilogue = false;
    shape.identity = identity;
    shape.residual = residual;
    shape.pass = pass;
    try {
      // Building the plan (runtime-compiled engines are compiled here) is most of a device's set-up.
      const auto built = std::chrono::steady_clock::now();
      auto f = std::make_unique<nn::cuda::FusedConv>(cudnn, shape, settings);
      f->tune(cudnn, stream, args);
      const double build_ms = ms_since(built);
      if (kept) {
        std::snprintf(buf, sizeof buf, "; %s %d->%d: graph API as kept (%s; built in %.0f ms)", what, in_channels,
                      channels, f->description().c_str(), build_ms);
        graph_text += buf;
        route = here;
        return f;
      }
      DeviceBuffer ws(f->workspace_size());
      const float ms = milliseconds([&] { f->run(cudnn, stream, args, ws.get()); });
      std::snprintf(buf, sizeof buf, "; %s %d->%d: graph API %.4f ms (%s; built in %.0f ms)", what, in_channels,
                    channels, ms, f->description().c_str(), build_ms);
      graph_text += buf;
      if (!best || ms < best_ms) best = std::move(f), best_ms = ms, route = here;
    } catch (const std::runtime_error& e) {
      graph_text += std::string("; graph API ") + what + (identity ? " through identity " : " ") +
                    std::to_string(in_channels) + "->" + std::to_string(channels) + " unavailable (" + e.what() + ")";
    }
  }
  if (kept) {  // kept legacy, or a kept engine cuDNN no longer builds: the legacy algorithm
    if (*kept != ConvRoute::LEGACY) graph_text += std::string("; ") + what + ": legacy (the kept graph failed)";
    return nullptr;
  }
  if (!best) return nullptr;
  const float legacy_ms = milliseconds(legacy);
  std::snprintf(buf, sizeof buf, "; %s %d->%d: legacy %.4f ms", what, in_channels, channels, legacy_ms);
  graph_text += buf;
  if (best_ms >= legacy_ms) {
    route = ConvRoute::LEGACY;
    return nullptr;
  }
  return best;
}

void GpuTrainer::Impl::conv_forward(int unit, const uint16_t* in, uint16_t* out) const {
  const uint16_t* w = weight16(unit_weight(bn[unit]));
  if (const nn::cuda::FusedConv* f = (unit == 0 ? stem_forward : block_forward).get())
    f->run(cudnn, stream, {in, w, nullptr, nullptr, out}, cudnn_workspace.get());
  else (unit == 0 ? *stem_conv : *block_conv).forward(cudnn, in, w, out, cudnn_workspace.get());
}

// On wgrad_stream, with its own workspace; the handle goes back to `stream`, which the other legacy
// calls take from it.
void GpuTrainer::Impl::conv_backward_filter(int unit, const uint16_t* in, const uint16_t* dy, uint16_t* dw) const {
  if (const nn::cuda::FusedConv* f = (unit == 0 ? stem_filter : block_filter).get()) {
    f->run(cudnn, wgrad_stream, {in, nullptr, nullptr, nullptr, const_cast<uint16_t*>(dy), dw}, wgrad_workspace.get());
  } else {
    JIRIKI_CUDNN_CHECK(cudnnSetStream(cudnn, wgrad_stream));
    (unit == 0 ? *stem_conv : *block_conv).backward_filter(cudnn, in, dy, dw, wgrad_workspace.get());
  }
  JIRIKI_CUDNN_CHECK(cudnnSetStream(cudnn, stream));
}

// dx = d(loss)/d(x) of a block convolution, plus `add` when not null (then dx may not be add; the
// legacy path instead expects dx to hold `add` already, see enqueue_backward).
void GpuTrainer::Impl::conv_backward_data(const uint16_t* dy, const uint16_t* w, uint16_t* dx,
                                          const uint16_t* add) const {
  if (const nn::cuda::FusedConv* f = (add ? block_data_add : block_data).get())
    f->run(cudnn, stream, {.w = w, .residual = add, .y = const_cast<uint16_t*>(dy), .dx = dx}, cudnn_workspace.get());
  else block_conv->backward_data(cudnn, dy, w, dx, add ? 1.0f : 0.0f, cudnn_workspace.get());
}

std::string GpuTrainer::Impl::description() const {
  std::string s = "cuda (" + device_name + ", bf16), batch " + std::to_string(batch) + "; cuDNN algorithms: stem " +
                  stem_conv->description();
  if (block_conv) s += "; blocks " + block_conv->description();
  return s + graph_text;
}

}  // namespace jiriki::training::cuda
