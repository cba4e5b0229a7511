// The GPU trainer (training/cuda/gpu_trainer.h), readable from top to bottom: the device buffers,
// then each layer's forward and backward side by side as they are enqueued, then the public calls.
//
// One training step on the device (B positions, rows = 81 B, C channels, every tensor NHWC):
//   features [B][119][81] fp32 -> x0 [rows][128] bf16
//   unit u = 0 (stem), 2i+1 (block i conv1), 2i+2 (block i conv2):
//     conv_out[u] = conv3x3(input)                            cuDNN forward
//     statistics of conv_out[u] -> mean, invstd, running stats (our kernels, two-stage reductions)
//     act_out[u] = act(BN(conv_out[u]) [+ act_out[u-2] for conv2])   (one elementwise kernel)
//   heads [rows][54] fp32 = trunk x [policy_conv; value_conv]^T   cuBLAS, one GEMM for both 1x1 convs
//   policy [B][2187] = heads[..][0..27] + bias;  value_conv [rows][27] bf16 = heads[..][27..54]
//   value_act = act(BN(value_conv)) = [B][2187] bf16;  fc1 [B][256] fp32 = value_act x W1^T (cuBLAS)
//   value_logit = fc2(act(fc1 + b1))                          (one warp per position)
//   loss -> per-sample records, dpolicy, dvalue                (one block per position)
// and back: the value head (fc2, fc1 by cuBLAS, BN), both heads' 1x1 convolutions into the trunk's
// gradient (cuBLAS), then the units in reverse: BN + activation backward (two kernels: per-channel
// sums, then the input gradient dz, which also writes the skip connection's gradient), cuDNN
// backward data (adding the skip connection's gradient for conv1) and backward filter (bf16
// weight gradient). Nothing later in the pass reads a weight gradient, so the backward-filter
// convolutions run on a second stream (wgrad_stream) beside the chain of backward-data and batch
// norms, filling the SMs those leave idle; each unit's dz has its own buffer of a small ring
// (dz_ring) so that the chain need not wait for them. As each stage (the heads, a block, the stem)
// finishes, its bf16 convolution weight gradients become fp32 (on wgrad_stream) and, with several
// replicas on NCCL, every bucket of gradients that is then complete starts its all-reduce on the
// communication stream, overlapping the stages still to run (training/buckets.h); the step waits
// for both side streams before the optimizer.
// The optimizer step: the global gradient norm (for clipping and the log), then one fused kernel per
// group of tensors (with and without weight decay) updating the fp32 weights, the optimizer state
// and the bf16 copy.
//
// Each of the three sequences (gradients, optimizer step, held-out evaluation) runs eagerly the
// first time and is then captured into a CUDA graph and replayed, so that a step costs two graph
// launches whatever the number of layers. The per-step scalars (learning rate, Adam's bias
// corrections, ...) sit in a small device struct that the host rewrites before each launch.
//
// Convolutions: cuDNN's legacy API (cudnnConvolutionForward / BackwardData / BackwardFilter with
// the algorithms cudnnFind*AlgorithmEx measures fastest on this GPU; deprecated in cuDNN 9 but
// complete) is the baseline that always runs. Each pass goes through the graph API instead (the
// inference backend's FusedConv: the bare convolution, or the convolution written through a
// pointwise identity, which cuDNN's runtime-fusion engines take; for conv1's backward data an
// addition of the skip connection's gradient; deterministic engines only for weight gradients)
// when that is faster; see graph_conv().
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // cuDNN 9 marks the legacy convolution API
#include "training/cuda/gpu_trainer.h"

#include <cuda_profiler_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <stdexcept>
#include <vector>

#include "common/fnv1a.h"
#include "nn/cuda/cuda_util.h"
#include "nn/cuda/fused_conv.h"
#include "nn/cuda/kernels.h"
#include "training/buckets.h"
#include "training/cuda/train_kernels.h"

#if JIRIKI_HAVE_NCCL
#include <nccl.h>
#define JIRIKI_NCCL_CHECK(call)                                                                       \
  do {                                                                                                \
    if (ncclResult_t r_ = (call); r_ != ncclSuccess)                                                  \
      throw std::runtime_error(std::string("NCCL: ") + #call + ": " + ncclGetErrorString(r_));        \
  } while (0)
#endif

namespace jiriki::training::cuda {

using nn::INPUT_SIZE;
using nn::POLICY_LABELS;
using nn::POLICY_SIZE;
using nn::SQUARES;
using nn::VALUE_CHANNELS;
using nn::VALUE_HIDDEN;
using nn::cuda::DeviceBuffer;
using nn::cuda::HEAD_OUTPUTS;           // policy and value 1x1 convolutions as one GEMM
using nn::cuda::INPUT_CHANNELS_PADDED;  // the 119 input planes padded, as in the inference backend
using nn::cuda::launch_features_to_nhwc;
using nn::cuda::PinnedBuffer;

namespace {

constexpr size_t ALIGN = 64;                    // floats: every tensor starts 256-byte aligned
constexpr size_t CUBLAS_WORKSPACE = size_t(32) << 20;
constexpr size_t FIND_WORKSPACE = size_t(512) << 20;  // the most an algorithm may take

constexpr size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

// One 3x3 convolution (pad 1, no bias) of NHWC bf16 tensors at a fixed batch, with fp32
// accumulation, and its two backward passes, each with the algorithm cuDNN measured fastest.
class Conv {
 public:
  Conv(int batch, int in_channels, int out_channels) : in_(in_channels), out_(out_channels) {
    JIRIKI_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x_));
    JIRIKI_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y_));
    JIRIKI_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w_));
    JIRIKI_CUDNN_CHECK(
        cudnnSetTensor4dDescriptor(x_, CUDNN_TENSOR_NHWC, CUDNN_DATA_BFLOAT16, batch, in_channels, 9, 9));
    JIRIKI_CUDNN_CHECK(
        cudnnSetTensor4dDescriptor(y_, CUDNN_TENSOR_NHWC, CUDNN_DATA_BFLOAT16, batch, out_channels, 9, 9));
    JIRIKI_CUDNN_CHECK(
        cudnnSetFilter4dDescriptor(w_, CUDNN_DATA_BFLOAT16, CUDNN_TENSOR_NHWC, out_channels, in_channels, 3, 3));
    for (auto* c : {&fwd_conv_, &data_conv_, &filter_conv_}) {
      JIRIKI_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(c));
      JIRIKI_CUDNN_CHECK(
          cudnnSetConvolution2dDescriptor(*c, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
      JIRIKI_CUDNN_CHECK(cudnnSetConvolutionMathType(*c, CUDNN_TENSOR_OP_MATH));
    }
  }
  ~Conv() {
    for (auto c : {fwd_conv_, data_conv_, filter_conv_}) cudnnDestroyConvolutionDescriptor(c);
    cudnnDestroyFilterDescriptor(w_);
    cudnnDestroyTensorDescriptor(y_);
    cudnnDestroyTensorDescriptor(x_);
  }
  Conv(const Conv&) = delete;
  Conv& operator=(const Conv&) = delete;

  // Times cuDNN's algorithms on these buffers (y, dy, dx, dw are overwritten) and keeps the fastest
  // that succeeds; for the backward passes a deterministic one instead when it is at most 25% slower
  // (the same gradients on every run). dx null: no backward data pass (the stem). `workspace` holds
  // `bytes`.
  void tune(cudnnHandle_t h, const void* x, const void* w, void* y, void* dy, void* dx, void* dw, void* workspace,
            size_t bytes) {
    int got = 0;
    cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    JIRIKI_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(h, x_, x, w_, w, fwd_conv_, y_, y,
                                                              CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, fwd, workspace,
                                                              bytes));
    const auto& f = pick(fwd, got, false, "forward");
    fwd_algo_ = f.algo;
    JIRIKI_CUDNN_CHECK(cudnnSetConvolutionMathType(fwd_conv_, f.mathType));
    workspace_ = f.memory;
    text_ = "fwd " + std::to_string(int(f.algo)) + " " + ms(f.time);
    if (dx) {
      cudnnConvolutionBwdDataAlgoPerf_t data[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      JIRIKI_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(h, w_, w, y_, dy, data_conv_, x_, dx,
                                                                     CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, data,
                                                                     workspace, bytes));
      const auto& d = pick(data, got, true, "backward data");
      data_algo_ = d.algo;
      JIRIKI_CUDNN_CHECK(cudnnSetConvolutionMathType(data_conv_, d.mathType));
      workspace_ = std::max(workspace_, d.memory);
      text_ += ", data " + std::to_string(int(d.algo)) + " " + ms(d.time);
    }
    cudnnConvolutionBwdFilterAlgoPerf_t filter[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    JIRIKI_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(h, x_, x, y_, dy, filter_conv_, w_, dw,
                                                                     CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got,
                                                                     filter, workspace, bytes));
    const auto& g = pick(filter, got, true, "backward filter");
    filter_algo_ = g.algo;
    JIRIKI_CUDNN_CHECK(cudnnSetConvolutionMathType(filter_conv_, g.mathType));
    workspace_ = std::max(workspace_, g.memory);
    text_ += ", filter " + std::to_string(int(g.algo)) + " " + ms(g.time);
  }

  size_t workspace_size() const { return workspace_; }
  std::string description() const { return std::to_string(in_) + "->" + std::to_string(out_) + ": " + text_; }

  void forward(cudnnHandle_t h, const void* x, const void* w, void* y, void* ws) const {
    const float one = 1.0f, zero = 0.0f;
    JIRIKI_CUDNN_CHECK(
        cudnnConvolutionForward(h, &one, x_, x, w_, w, fwd_conv_, fwd_algo_, ws, workspace_, &zero, y_, y));
  }
  // dx = beta dx + d(loss)/d(x).
  void backward_data(cudnnHandle_t h, const void* dy, const void* w, void* dx, float beta, void* ws) const {
    const float one = 1.0f;
    JIRIKI_CUDNN_CHECK(
        cudnnConvolutionBackwardData(h, &one, w_, w, y_, dy, data_conv_, data_algo_, ws, workspace_, &beta, x_, dx));
  }
  void backward_filter(cudnnHandle_t h, const void* x, const void* dy, void* dw, void* ws) const {
    const float one = 1.0f, zero = 0.0f;
    JIRIKI_CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, &one, x_, x, y_, dy, filter_conv_, filter_algo_, ws,
                                                      workspace_, &zero, w_, dw));
  }

 private:
  template <class Perf>
  static const Perf& pick(const Perf* perf, int count, bool prefer_deterministic, const char* pass) {
    const Perf* best = nullptr;
    for (int i = 0; i < count; ++i) {  // cuDNN sorts them fastest first
      if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
      if (!best) best = &perf[i];
      if (!prefer_deterministic || perf[i].determinism == CUDNN_DETERMINISTIC) {
        if (perf[i].time <= 1.25f * best->time) return perf[i];
        break;
      }
    }
    if (!best) throw std::runtime_error(std::string("GPU trainer: cuDNN has no convolution algorithm for the ") + pass);
    return *best;
  }
  static std::string ms(float t) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "(%.3f ms)", t);
    return buf;
  }

  int in_, out_;
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  // One descriptor per pass: each carries the math type of its pass's algorithm.
  cudnnConvolutionDescriptor_t fwd_conv_ = nullptr, data_conv_ = nullptr, filter_conv_ = nullptr;
  cudnnConvolutionFwdAlgo_t fwd_algo_{};
  cudnnConvolutionBwdDataAlgo_t data_algo_{};
  cudnnConvolutionBwdFilterAlgo_t filter_algo_{};
  size_t workspace_ = 0;
  std::string text_;
};

struct PinnedAllocator : HostAllocator {
  void* allocate(size_t bytes) override {
    void* p = nullptr;
    JIRIKI_CUDA_CHECK(cudaMallocHost(&p, bytes));
    return p;
  }
  void deallocate(void* p) noexcept override { cudaFreeHost(p); }
};

// Where one trainable tensor lives in the flat buffers, and how its device layout maps to the
// Model's: PLAIN the same; KRSC a convolution's OIHW weights as [out][kh][kw][in_padded] (what cuDNN
// reads for NHWC), input channels beyond the Model's zero; FC1 value fc1's columns in the NHWC
// flattening of its input (27 sq + channel instead of 81 channel + sq).
struct Slot {
  enum Layout { PLAIN, KRSC, FC1 } layout = PLAIN;
  size_t offset = 0, count = 0;  // floats
  int in_padded = 0;             // KRSC

  size_t device_index(const std::vector<int>& shape, size_t i) const {
    switch (layout) {
      case KRSC: {
        const size_t in = size_t(shape[1]), k = size_t(shape[2]);
        const size_t kw = i % k, kh = i / k % k, ci = i / (k * k) % in, o = i / (k * k * in);
        return ((o * k + kh) * k + kw) * size_t(in_padded) + ci;
      }
      case FC1: {
        const size_t o = i / POLICY_SIZE, col = i % POLICY_SIZE;
        return o * POLICY_SIZE + (col % SQUARES) * VALUE_CHANNELS + col / SQUARES;
      }
      case PLAIN:
        break;
    }
    return i;
  }
};

// One batch norm (with the activation after it): where its parameters, running statistics and
// saved per-channel values live.
struct BnUnit {
  std::string prefix;  // "stem.conv", "blocks.3.conv2", "value.conv"
  int channels = 0;
  size_t gamma = 0, beta = 0;  // offsets in params / grads
  size_t stats = 0;            // running mean at stats, running variance at stats + channels
  size_t saved = 0;            // [4][channels]: mean, invstd, scale, shift
};

// A CUDA graph captured from an enqueueing function on first use.
struct Graph {
  cudaGraphExec_t exec = nullptr;
  bool tried = false;
};

}  // namespace

struct GpuTrainer::Impl {
  nn::CudaSettings settings;  // the convolutions' tuning, logging, profiling
  nn::Architecture arch;
  OptimizerConfig opt;
  int batch, device, channels;
  int64_t rows;  // batch x 81
  int64_t adam_steps = 0;
  std::string device_name;

  cudaStream_t stream = nullptr;
  cudnnHandle_t cudnn = nullptr;
  cublasHandle_t cublas = nullptr;
  PinnedAllocator pinned;

  // ---- parameters: one flat buffer each, tensors at the offsets of `slots` ---------------------
  // [0, decayed_end): the tensors of rank >= 2 (weight decay), with a bf16 copy in params16; the
  // convolutions' come first, [0, conv_end), whose bf16 gradients cuDNN writes into wgrad16.
  // [decayed_end, total): gammas, betas and biases.
  std::map<std::string, Slot> slots;
  size_t conv_end = 0, decayed_end = 0, total = 0;
  DeviceBuffer params, grads, opt_first, opt_second, params16, wgrad16;
  std::vector<BnUnit> bn;  // units 0 .. 2 blocks (stem, conv1, conv2, ...), then the value head's
  DeviceBuffer stats, saved;

  // ---- activations (bf16 unless said) and their gradients, for `batch` positions ------------------
  DeviceBuffer input;  // fp32, the Batch's four arrays: features, policy target, result, eval
  DeviceBuffer x0;
  std::vector<DeviceBuffer> conv_out, act_out;  // per unit
  DeviceBuffer heads, policy, value_conv, value_act, fc1, value_logit;      // heads, policy, fc1, logit fp32
  DeviceBuffer dpolicy, dpolicy_nhwc, dvalue, dfc1, dfc1_16, fc2_terms;     // dpolicy, dvalue, dfc1, terms fp32
  DeviceBuffer d_value_act, d_value_conv, dh[2], scratch, skip;
  DeviceBuffer records, norm, reduce_scratch, column_scratch, norm_scratch;
  DeviceBuffer step_params, cudnn_workspace, cublas_workspace;

  // ---- weight gradients beside the backward chain (see the top of this file) ----------------------
  // dz of the k-th unit of a backward pass lives in dz_ring[k % DZ_RING]; dz_free[k % DZ_RING]
  // marks the end of the weight gradient that read it, which the chain waits for before reusing it.
  static constexpr int DZ_RING = 3;
  DeviceBuffer dz_ring[DZ_RING], wgrad_workspace;
  cudaStream_t wgrad_stream = nullptr;
  cudaEvent_t dz_ready = nullptr, dz_free[DZ_RING] = {}, stage_ready = nullptr, wgrad_done = nullptr;
  uint16_t* dz_buffer(int k);
  void weight_gradient(int unit, const uint16_t* in, const uint16_t* dz, int k);
  PinnedBuffer host_params, host_records, host_norm;

  std::unique_ptr<Conv> stem_conv, block_conv;
  // The forward convolutions through cuDNN's graph API instead, where one of its engines beats the
  // legacy algorithm (null otherwise). On an H100, timed eagerly, the legacy forward took 0.24 ms
  // a call against 0.04 ms (batch 256) and 0.09 ms (batch 1024) for the graph API's engine; inside a
  // CUDA graph most of that difference vanished (the whole step 5.09 -> 4.91 ms at batch 256,
  // 12.52 -> 12.51 ms at 1024), so the legacy cost is mostly host work per call, which the first,
  // eager step and any run without graphs still pay.
  std::unique_ptr<nn::cuda::FusedConv> stem_forward, block_forward, stem_filter, block_filter;
  // The blocks' backward data passes likewise: conv2's (dx written) and conv1's, which adds the skip
  // connection's gradient (dx = its gradient + skip) where the graph API runs that addition.
  std::unique_ptr<nn::cuda::FusedConv> block_data, block_data_add;
  std::string graph_text;
  Graph gradients_graph, update_graph, eval_graph;

  // ---- data parallelism ----------------------------------------------------------------------
  // The conv weight gradients each backward stage finishes (offset, count), converted to fp32 at
  // its end; with NCCL, the buckets that stage completes are all-reduced (averaged) from `grads`
  // into `reduced` on comm_stream, and the optimizer reads `reduced`. local_norm is the norm of this
  // replica's own gradient. `communicate` false leaves the all-reduces out (timing the compute alone,
  // captured as compute_graph).
  std::vector<std::vector<std::pair<size_t, size_t>>> stage_conv_ranges;
  ncclComm_t nccl = nullptr;
  cudaStream_t comm_stream = nullptr;
  std::vector<Bucket> buckets;
  std::vector<cudaEvent_t> bucket_events;
  cudaEvent_t comm_done = nullptr;
  DeviceBuffer reduced, local_norm;
  PinnedBuffer host_local_norm;
  bool communicate = true;
  Graph compute_graph;
  const float* update_grads() const { return nccl ? at<float>(reduced) : at<float>(grads); }
  void stage_done(int stage);
  void enqueue_allreduce(const Bucket& b, cudaStream_t on);

  Impl(const nn::Model& model, const OptimizerConfig& o, int b, int gpu, const nn::CudaSettings& cuda);
  ~Impl();

  // ---- typed views ---------------------------------------------------------------------------
  template <class T = uint16_t>
  T* at(const DeviceBuffer& d, size_t offset = 0) const {
    return d.get<T>() + offset;
  }
  const Slot& slot(const std::string& name) const { return slots.at(name); }
  float* param(const std::string& name) const { return at<float>(params, slot(name).offset); }
  float* grad(const std::string& name) const { return at<float>(grads, slot(name).offset); }
  const uint16_t* weight16(const std::string& name) const { return at(params16, slot(name).offset); }
  StepParams* device_params() const { return step_params.get<StepParams>(); }
  StepParams& host_step() const { return *host_params.get<StepParams>(); }
  static std::string unit_weight(const BnUnit& u) { return u.prefix + ".weight"; }

  void build_layout(const nn::Model& model);
  void allocate_activations();
  void tune_convolutions();  // after the weights are uploaded
  std::unique_ptr<nn::cuda::FusedConv> graph_conv(nn::cuda::ConvPass pass, int in_channels, bool residual,
                                                  const nn::cuda::ConvArgs& args, const std::function<void()>& legacy);
  float milliseconds(const std::function<void()>& enqueue) const;
  void conv_forward(int unit, const uint16_t* in, uint16_t* out) const;
  void conv_backward_filter(int unit, const uint16_t* in, const uint16_t* dy, uint16_t* dw) const;
  void conv_backward_data(const uint16_t* dy, const uint16_t* w, uint16_t* dx, const uint16_t* add) const;
  std::string description() const;

  // ---- layers: forward and backward side by side ---------------------------------------------
  void bn_forward(const BnUnit& u, const uint16_t* x, const uint16_t* residual, uint16_t* out, bool train);
  void bn_backward(const BnUnit& u, const uint16_t* dy, const uint16_t* x, const uint16_t* residual, uint16_t* dx,
                   uint16_t* dresidual);
  // Row-major products on cuBLAS: Y[M][O] = X[M][I] W[O][I]^T with bf16 X and W, fp32 accumulation.
  void gemm_forward(void* y, cudaDataType_t y_type, const uint16_t* x, const uint16_t* w, int m, int in, int out);
  void gemm_backward_data(uint16_t* dx, const uint16_t* dy, const uint16_t* w, int m, int in, int out, float beta);
  void gemm_backward_weight(float* dw, const uint16_t* dy, const uint16_t* x, int m, int in, int out);

  // ---- the three sequences -------------------------------------------------------------------
  void enqueue_forward(bool train);
  void enqueue_backward();
  void enqueue_gradients() { enqueue_forward(true), enqueue_backward(); }
  void enqueue_update();
  void enqueue_eval() { enqueue_forward(false); }
  void run(Graph& g, void (Impl::*enqueue)());

  // Where the time of a step goes (JIRIKI_CUDA_VERBOSE): an event after each stage of one eager
  // step, the intervals summed by stage. Eager launches leave gaps that graph replays do not.
  std::vector<std::pair<const char*, cudaEvent_t>>* marks = nullptr;
  void mark(const char* stage) {
    if (!marks) return;
    cudaEvent_t e;
    JIRIKI_CUDA_CHECK(cudaEventCreate(&e));
    JIRIKI_CUDA_CHECK(cudaEventRecord(e, stream));
    marks->emplace_back(stage, e);
  }
  void profile_step();

  // ---- host <-> device -------------------------------------------------------------------------
  // Copies and fills go through `stream`, never the legacy default stream, which does not order
  // itself with a non-blocking stream; each copy from or to pageable memory is complete on return.
  void copy(void* to, const void* from, size_t bytes, cudaMemcpyKind kind) const {
    JIRIKI_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, kind, stream));
    JIRIKI_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  void zero(DeviceBuffer& d) const {
    if (d.bytes()) JIRIKI_CUDA_CHECK(cudaMemsetAsync(d.get(), 0, d.bytes(), stream));
  }
  // A tensor of the Model's layout into / out of a host copy of a flat buffer (device layout).
  void scatter(const std::string& name, const nn::Tensor& t, std::vector<float>& flat) const {
    const Slot& s = slot(name);
    for (size_t i = 0; i < t.size(); ++i) flat[s.offset + s.device_index(t.shape, i)] = t.data[i];
  }
  void gather(const std::string& name, const std::vector<float>& flat, nn::Tensor& t) const {
    const Slot& s = slot(name);
    for (size_t i = 0; i < t.size(); ++i) t.data[i] = flat[s.offset + s.device_index(t.shape, i)];
  }
  // Every trainable tensor of `model` to the flat device buffer `to`, or back.
  void upload_tensors(const nn::Model& model, DeviceBuffer& to) const {
    std::vector<float> host(total, 0.0f);
    for (const auto& t : model.tensors())
      if (t.trainable) scatter(t.name, *t.tensor, host);
    copy(to.get(), host.data(), total * sizeof(float), cudaMemcpyHostToDevice);
  }
  void download_tensors(const DeviceBuffer& from, nn::Model& model) const {
    std::vector<float> host(total);
    copy(host.data(), from.get(), total * sizeof(float), cudaMemcpyDeviceToHost);
    for (auto& t : model.tensors())
      if (t.trainable) gather(t.name, host, *t.tensor);
  }
  void upload_batch(const Batch& b, int n);
  void upload_step_params();
  nn::LossTotals read_records(int n) const;  // after a synchronisation
};

// ---- construction ------------------------------------------------------------------------------

GpuTrainer::Impl::Impl(const nn::Model& model, const OptimizerConfig& o, int b, int gpu, const nn::CudaSettings& cuda)
    : settings(cuda), arch(model.arch), opt(o), batch(b), device(gpu), channels(model.arch.channels), rows(int64_t(b) * SQUARES) {
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
    throw std::runtime_error(std::string("CUDA device ") + prop.name + " has no bf16 tensor cores (8.0 or newer needed)");
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
  for (cudaEvent_t* e : {&dz_ready, &dz_free[0], &dz_free[1], &dz_free[2], &stage_ready, &wgrad_done})
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
  if (wgrad_stream) cudaStreamSynchronize(wgrad_stream);
  for (Graph* g : {&gradients_graph, &update_graph, &eval_graph, &compute_graph})
    if (g->exec) cudaGraphExecDestroy(g->exec);
  for (cudaEvent_t e : bucket_events) cudaEventDestroy(e);
  if (comm_done) cudaEventDestroy(comm_done);
  if (comm_stream) cudaStreamDestroy(comm_stream);
  for (cudaEvent_t e : {dz_ready, dz_free[0], dz_free[1], dz_free[2], stage_ready, wgrad_done})
    if (e) cudaEventDestroy(e);
  if (wgrad_stream) cudaStreamDestroy(wgrad_stream);
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

// Times cuDNN's algorithms on random bf16 data in the real buffers (zeros can run faster than
// real data), then sizes the one workspace the chosen algorithms share.
void GpuTrainer::Impl::tune_convolutions() {
  const size_t c = size_t(channels);
  launch_fill_random(at(x0), rows * INPUT_CHANNELS_PADDED, 1, stream);
  launch_fill_random(at(act_out[0]), rows * c, 2, stream);
  launch_fill_random(at(dz_ring[0]), rows * c, 3, stream);
  DeviceBuffer find_workspace(FIND_WORKSPACE);
  stem_conv = std::make_unique<Conv>(batch, INPUT_CHANNELS_PADDED, channels);
  stem_conv->tune(cudnn, at(x0), weight16("stem.conv.weight"), at(conv_out[0]), at(dz_ring[0]), nullptr, at(wgrad16),
                  find_workspace.get(), FIND_WORKSPACE);
  size_t workspace = stem_conv->workspace_size();
  if (arch.blocks > 0) {
    block_conv = std::make_unique<Conv>(batch, channels, channels);
    block_conv->tune(cudnn, at(act_out[0]), weight16("blocks.0.conv1.weight"), at(conv_out[1]), at(dz_ring[0]),
                     at(scratch), at(wgrad16), find_workspace.get(), FIND_WORKSPACE);
    workspace = std::max(workspace, block_conv->workspace_size());
  }
  find_workspace = DeviceBuffer();
  // The graph API's engines where they beat the legacy ones. The legacy calls are timed with a
  // workspace of their own size (cudnn_workspace does not exist yet).
  using nn::cuda::ConvPass;
  DeviceBuffer legacy_ws(std::max<size_t>(workspace, 256));
  stem_forward = graph_conv(ConvPass::FORWARD, INPUT_CHANNELS_PADDED, false, {at(x0), weight16("stem.conv.weight"), nullptr, nullptr, at(conv_out[0])},
                            [&] { stem_conv->forward(cudnn, at(x0), weight16("stem.conv.weight"), at(conv_out[0]), legacy_ws.get()); });
  stem_filter = graph_conv(ConvPass::BACKWARD_FILTER, INPUT_CHANNELS_PADDED, false, {at(x0), nullptr, nullptr, nullptr, at(dz_ring[0]), at(wgrad16)},
                           [&] { stem_conv->backward_filter(cudnn, at(x0), at(dz_ring[0]), at(wgrad16), legacy_ws.get()); });
  if (block_conv) {
    block_forward = graph_conv(ConvPass::FORWARD, channels, false,
                               {at(act_out[0]), weight16("blocks.0.conv1.weight"), nullptr, nullptr, at(conv_out[1])},
                               [&] {
                                 block_conv->forward(cudnn, at(act_out[0]), weight16("blocks.0.conv1.weight"),
                                                     at(conv_out[1]), legacy_ws.get());
                               });
    block_filter = graph_conv(ConvPass::BACKWARD_FILTER, channels, false,
                              {at(act_out[0]), nullptr, nullptr, nullptr, at(dz_ring[0]), at(wgrad16)}, [&] {
                                block_conv->backward_filter(cudnn, at(act_out[0]), at(dz_ring[0]), at(wgrad16),
                                                            legacy_ws.get());
                              });
    const uint16_t* w = weight16("blocks.0.conv1.weight");
    launch_fill_random(at(skip), rows * c, 4, stream);
    for (bool add : {false, true})
      (add ? block_data_add : block_data) = graph_conv(
          ConvPass::BACKWARD_DATA, channels, add,
          {.w = w, .residual = add ? at(skip) : nullptr, .y = at(dz_ring[0]), .dx = at(scratch)}, [&] {
            block_conv->backward_data(cudnn, at(dz_ring[0]), w, at(scratch), add ? 1.0f : 0.0f, legacy_ws.get());
          });
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
// second alone, adding args.residual.
std::unique_ptr<nn::cuda::FusedConv> GpuTrainer::Impl::graph_conv(nn::cuda::ConvPass pass, int in_channels,
                                                                  bool residual, const nn::cuda::ConvArgs& args,
                                                                  const std::function<void()>& legacy) {
  using nn::cuda::ConvPass;
  const char* what = pass == ConvPass::FORWARD           ? "forward"
                     : pass == ConvPass::BACKWARD_FILTER ? "backward filter"
                     : residual                          ? "backward data + skip"
                                                         : "backward data";
  char buf[200];
  std::unique_ptr<nn::cuda::FusedConv> best;
  float best_ms = 0;
  for (bool identity : {false, true}) {
    if (identity ? pass == ConvPass::BACKWARD_FILTER : residual) continue;
    nn::cuda::ConvShape shape;
    shape.batch = batch;
    shape.in_channels = in_channels;
    shape.out_channels = channels;
    shape.epilogue = false;
    shape.identity = identity;
    shape.residual = residual;
    shape.pass = pass;
    try {
      auto f = std::make_unique<nn::cuda::FusedConv>(cudnn, shape, settings);
      f->tune(cudnn, stream, args);
      DeviceBuffer ws(f->workspace_size());
      const float ms = milliseconds([&] { f->run(cudnn, stream, args, ws.get()); });
      std::snprintf(buf, sizeof buf, "; %s %d->%d: graph API %.4f ms (%s)", what, in_channels, channels, ms,
                    f->description().c_str());
      graph_text += buf;
      if (!best || ms < best_ms) best = std::move(f), best_ms = ms;
    } catch (const std::runtime_error& e) {
      graph_text += std::string("; graph API ") + what + (identity ? " through identity " : " ") +
                    std::to_string(in_channels) + "->" + std::to_string(channels) + " unavailable (" + e.what() + ")";
    }
  }
  if (!best) return nullptr;
  const float legacy_ms = milliseconds(legacy);
  std::snprintf(buf, sizeof buf, "; %s %d->%d: legacy %.4f ms", what, in_channels, channels, legacy_ms);
  graph_text += buf;
  if (best_ms >= legacy_ms) return nullptr;
  return best;
}

void GpuTrainer::Impl::conv_forward(int unit, const uint16_t* in, uint16_t* out) const {
  const uint16_t* w = weight16(unit_weight(bn[unit]));
  if (const nn::cuda::FusedConv* f = (unit == 0 ? stem_forward : block_forward).get())
    f->run(cudnn, stream, {in, w, nullptr, nullptr, out}, cudnn_workspace.get());
  else
    (unit == 0 ? *stem_conv : *block_conv).forward(cudnn, in, w, out, cudnn_workspace.get());
}

// On wgrad_stream, with its own workspace; the handle goes back to `stream`, which the other legacy
// calls take from it.
void GpuTrainer::Impl::conv_backward_filter(int unit, const uint16_t* in, const uint16_t* dy, uint16_t* dw) const {
  if (const nn::cuda::FusedConv* f = (unit == 0 ? stem_filter : block_filter).get()) {
    f->run(cudnn, wgrad_stream, {in, nullptr, nullptr, nullptr, const_cast<uint16_t*>(dy), dw},
           wgrad_workspace.get());
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
  else
    block_conv->backward_data(cudnn, dy, w, dx, add ? 1.0f : 0.0f, cudnn_workspace.get());
}

std::string GpuTrainer::Impl::description() const {
  std::string s = "cuda (" + device_name + ", bf16), batch " + std::to_string(batch) + "; cuDNN algorithms: stem " +
                  stem_conv->description();
  if (block_conv) s += "; blocks " + block_conv->description();
  return s + graph_text;
}

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
  else
    launch_bn_eval_statistics(u.channels, gamma, beta, running_mean, running_var, arch.bn_eps, s, stream);
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
void GpuTrainer::Impl::gemm_forward(void* y, cudaDataType_t y_type, const uint16_t* x, const uint16_t* w, int m,
                                    int in, int out) {
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
  if (nccl && communicate) {  // the step goes on once the last bucket is averaged
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

// The end of a backward stage: its convolutions' weight gradients to fp32, then the all-reduce of
// every bucket it completes, on comm_stream. Both run after wgrad_stream's work so far and after
// what `stream` has done (the stage's other gradients).
void GpuTrainer::Impl::stage_done(int stage) {
  JIRIKI_CUDA_CHECK(cudaEventRecord(stage_ready, stream));
  JIRIKI_CUDA_CHECK(cudaStreamWaitEvent(wgrad_stream, stage_ready, 0));
  if (size_t(stage) < stage_conv_ranges.size())
    for (const auto& [offset, count] : stage_conv_ranges[size_t(stage)])
      launch_bf16_to_f32(at(wgrad16, offset), at<float>(grads, offset), int64_t(count), wgrad_stream);
  if (!nccl || !communicate) return;
  for (size_t k = 0; k < buckets.size(); ++k) {
    if (buckets[k].ready_stage != stage) continue;
    JIRIKI_CUDA_CHECK(cudaEventRecord(bucket_events[k], wgrad_stream));
    JIRIKI_CUDA_CHECK(cudaStreamWaitEvent(comm_stream, bucket_events[k], 0));
    enqueue_allreduce(buckets[k], comm_stream);
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
      launch_sgd(w, g, at<float>(opt_first, first[k]), w16, n[k], k == 0 ? wd : 0.0f, float(opt.momentum),
                 opt.nesterov, device_params(), at<float>(norm), stream);
    else
      launch_adamw(w, g, at<float>(opt_first, first[k]), at<float>(opt_second, first[k]), w16, n[k],
                   k == 0 ? wd : 0.0f, opt.beta1, opt.beta2, float(opt.eps), device_params(),
                   at<float>(norm), stream);
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

// ---- host <-> device -----------------------------------------------------------------------------

void GpuTrainer::Impl::upload_batch(const Batch& b, int n) {
  float* features = at<float>(input);
  float* target = features + size_t(batch) * INPUT_SIZE;
  float* result = target + size_t(batch) * POLICY_SIZE;
  float* eval = result + batch;
  auto copy = [&](float* to, const float* from, size_t count) {
    JIRIKI_CUDA_CHECK(cudaMemcpyAsync(to, from, count * sizeof(float), cudaMemcpyHostToDevice, stream));
  };
  copy(features, b.features, size_t(n) * INPUT_SIZE);
  copy(target, b.policy_target, size_t(n) * POLICY_SIZE);
  copy(result, b.value_result, size_t(n));
  copy(eval, b.value_eval, size_t(n));
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

nn::LossTotals GpuTrainer::compute_gradients(const Batch& batch, float val_lambda, float bn_momentum,
                                             float grad_scale) {
  Impl& m = *impl_;
  if (batch.size != m.batch)
    throw std::invalid_argument("GPU trainer: a training batch of " + std::to_string(batch.size) +
                                " positions, built for " + std::to_string(m.batch));
  JIRIKI_CUDA_CHECK(cudaSetDevice(m.device));
  m.upload_batch(batch, batch.size);
  StepParams& p = m.host_step();
  p.val_lambda = val_lambda;
  p.bn_momentum = bn_momentum;
  p.grad_scale = grad_scale;
  m.upload_step_params();
  m.run(m.gradients_graph, &Impl::enqueue_gradients);
  JIRIKI_CUDA_CHECK(cudaMemcpyAsync(m.host_records.get(), m.records.get(), size_t(m.batch) * LOSS_RECORD * sizeof(float),
                                    cudaMemcpyDeviceToHost, m.stream));
  JIRIKI_CUDA_CHECK(cudaMemcpyAsync(m.host_local_norm.get(), m.local_norm.get(), sizeof(float),
                                    cudaMemcpyDeviceToHost, m.stream));
  JIRIKI_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  return m.read_records(m.batch);
}

double GpuTrainer::local_norm2() const {
  const double n = *impl_->host_local_norm.get<float>();
  return n * n;
}

double GpuTrainer::apply_gradients(double lr, double clip_grad_norm) {
  Impl& m = *impl_;
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
                                              double clip_grad_norm) {
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
  m.upload_step_params();
  m.run(m.gradients_graph, &Impl::enqueue_gradients);
  m.run(m.update_graph, &Impl::enqueue_update);
  JIRIKI_CUDA_CHECK(cudaMemcpyAsync(m.host_records.get(), m.records.get(), size_t(m.batch) * LOSS_RECORD * sizeof(float),
                                    cudaMemcpyDeviceToHost, m.stream));
  JIRIKI_CUDA_CHECK(cudaMemcpyAsync(m.host_norm.get(), m.norm.get(), sizeof(float), cudaMemcpyDeviceToHost, m.stream));
  JIRIKI_CUDA_CHECK(cudaMemcpyAsync(m.host_local_norm.get(), m.local_norm.get(), sizeof(float),
                                    cudaMemcpyDeviceToHost, m.stream));
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
  // Each variant runs once untimed first: its first run is eager and captures its graph.
  Timing t;
  m.run(m.gradients_graph, &Impl::enqueue_gradients);
  m.run(m.update_graph, &Impl::enqueue_update);
  t.step = seconds(m.stream, [&] {
    m.run(m.gradients_graph, &Impl::enqueue_gradients);
    m.run(m.update_graph, &Impl::enqueue_update);
  });
  t.compute = t.step;
  // CudaSettings::profile (JIRIKI_CUDA_PROFILE=1): one more step between cudaProfilerStart and Stop,
  // for a profiler started with profiling off (ncu --profile-from-start off) to see the graphs'
  // kernels alone.
  if (m.settings.profile) {
    JIRIKI_CUDA_CHECK(cudaProfilerStart());
    m.run(m.gradients_graph, &Impl::enqueue_gradients);
    m.run(m.update_graph, &Impl::enqueue_update);
    JIRIKI_CUDA_CHECK(cudaStreamSynchronize(m.stream));
    JIRIKI_CUDA_CHECK(cudaProfilerStop());
  }
  if (m.nccl) {
    m.communicate = false;
    m.run(m.compute_graph, &Impl::enqueue_gradients);
    t.compute = seconds(m.stream, [&] {
      m.run(m.compute_graph, &Impl::enqueue_gradients);
      m.run(m.update_graph, &Impl::enqueue_update);
    });
    m.communicate = true;
    for (const Bucket& b : m.buckets) m.enqueue_allreduce(b, m.comm_stream);
    t.comm = seconds(m.comm_stream, [&] {
      for (const Bucket& b : m.buckets) m.enqueue_allreduce(b, m.comm_stream);
    });
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
  if (m.nccl) throw std::logic_error("GPU trainer: NCCL attached twice");
  JIRIKI_CUDA_CHECK(cudaSetDevice(m.device));
  // Graphs captured so far hold no all-reduce.
  for (Graph* g : {&m.gradients_graph, &m.update_graph, &m.compute_graph})
    if (g->exec) cudaGraphExecDestroy(g->exec), *g = Graph{};
  std::vector<GradientSlot> slots;
  for (const auto& [name, slot] : m.slots) slots.push_back({name, slot.offset, slot.count, backward_stage(name, m.arch.blocks)});
  m.buckets = plan_buckets(slots, std::max<size_t>(1, bucket_bytes / sizeof(float)), ALIGN);
  for (size_t k = 0; k < m.buckets.size(); ++k) {
    cudaEvent_t e;
    JIRIKI_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    m.bucket_events.push_back(e);
  }
  JIRIKI_CUDA_CHECK(cudaEventCreateWithFlags(&m.comm_done, cudaEventDisableTiming));
  JIRIKI_CUDA_CHECK(cudaStreamCreateWithFlags(&m.comm_stream, cudaStreamNonBlocking));
  m.reduced = DeviceBuffer(m.total * sizeof(float));
  m.zero(m.reduced);  // pads no range covers stay zero
  JIRIKI_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  m.nccl = nccl;
#endif
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

void GpuTrainer::copy_gradients_to_host(float* host) {
  Impl& m = *impl_;
  JIRIKI_CUDA_CHECK(cudaSetDevice(m.device));
  m.copy(host, m.grads.get(), m.total * sizeof(float), cudaMemcpyDeviceToHost);
}

void GpuTrainer::copy_gradients_from_host(const float* host) {
  Impl& m = *impl_;
  JIRIKI_CUDA_CHECK(cudaSetDevice(m.device));
  m.copy(m.grads.get(), host, m.total * sizeof(float), cudaMemcpyHostToDevice);
}

uint64_t GpuTrainer::weights_checksum() {
  Impl& m = *impl_;
  JIRIKI_CUDA_CHECK(cudaSetDevice(m.device));
  std::vector<uint32_t> bits(m.total);
  m.copy(bits.data(), m.params.get(), m.total * sizeof(float), cudaMemcpyDeviceToHost);
  return fnv1a64_words(bits.data(), bits.size());
}

std::string GpuTrainer::description() const { return impl_->description(); }

}  // namespace jiriki::training::cuda
