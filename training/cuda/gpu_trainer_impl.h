// The GPU trainer's device state (training/cuda/gpu_trainer.h is its API), shared by the files that
// implement it: gpu_trainer_setup.cpp (buffers, layout, convolution tuning), gpu_trainer_step.cpp
// (each layer's forward and backward side by side as they are enqueued, the optimizer, the CUDA
// graphs) and gpu_trainer.cpp (copies between host and device, the public calls).
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
// when that is faster; see graph_conv(). The first set-up of a shape on a machine times them; later
// ones take its choices from the choice file (training/conv_choices.h) without timing.
#pragma once
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // cuDNN 9 marks the legacy convolution API
#include "training/cuda/gpu_trainer.h"

#include <cuda_profiler_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

#include "common/fnv1a.h"
#include "common/spin.h"
#include "nn/cuda/cuda_util.h"
#include "nn/cuda/fused_conv.h"
#include "nn/cuda/kernels.h"
#include "training/buckets.h"
#include "training/conv_choices.h"
#include "training/cuda/train_kernels.h"

#if JIRIKI_HAVE_NCCL
#include <nccl.h>
#define JIRIKI_NCCL_CHECK(call)                                                                \
  do {                                                                                         \
    if (ncclResult_t r_ = (call); r_ != ncclSuccess)                                           \
      throw std::runtime_error(std::string("NCCL: ") + #call + ": " + ncclGetErrorString(r_)); \
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

constexpr size_t ALIGN = 64;  // floats: every tensor starts 256-byte aligned
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
    JIRIKI_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
        h, x_, x, w_, w, fwd_conv_, y_, y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, fwd, workspace, bytes));
    const auto& f = pick(fwd, got, false, "forward");
    fwd_algo_ = f.algo;
    JIRIKI_CUDNN_CHECK(cudnnSetConvolutionMathType(fwd_conv_, f.mathType));
    workspace_ = f.memory;
    text_ = "fwd " + std::to_string(int(f.algo)) + " " + ms(f.time);
    if (dx) {
      cudnnConvolutionBwdDataAlgoPerf_t data[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      JIRIKI_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
          h, w_, w, y_, dy, data_conv_, x_, dx, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, data, workspace, bytes));
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

  // The algorithms tune() chose, to keep for later set-ups.
  LegacyConvAlgorithms algorithms() const {
    auto math = [](cudnnConvolutionDescriptor_t c) {
      cudnnMathType_t m{};
      JIRIKI_CUDNN_CHECK(cudnnGetConvolutionMathType(c, &m));
      return int(m);
    };
    return {int(fwd_algo_), int(data_algo_), int(filter_algo_), math(fwd_conv_), math(data_conv_), math(filter_conv_)};
  }
  // Takes algorithms a tune() chose before for this shape on this GPU, without timing; false (this
  // Conv then unusable until tune()) where cuDNN refuses one of them. data_pass: as tune()'s dx.
  bool use(cudnnHandle_t h, const LegacyConvAlgorithms& a, bool data_pass) {
    fwd_algo_ = cudnnConvolutionFwdAlgo_t(a.forward);
    data_algo_ = cudnnConvolutionBwdDataAlgo_t(a.data);
    filter_algo_ = cudnnConvolutionBwdFilterAlgo_t(a.filter);
    size_t fwd = 0, data = 0, filter = 0;
    const bool ok =
        cudnnSetConvolutionMathType(fwd_conv_, cudnnMathType_t(a.forward_math)) == CUDNN_STATUS_SUCCESS &&
        cudnnSetConvolutionMathType(data_conv_, cudnnMathType_t(a.data_math)) == CUDNN_STATUS_SUCCESS &&
        cudnnSetConvolutionMathType(filter_conv_, cudnnMathType_t(a.filter_math)) == CUDNN_STATUS_SUCCESS &&
        cudnnGetConvolutionForwardWorkspaceSize(h, x_, w_, fwd_conv_, y_, fwd_algo_, &fwd) == CUDNN_STATUS_SUCCESS &&
        (!data_pass || cudnnGetConvolutionBackwardDataWorkspaceSize(h, w_, y_, data_conv_, x_, data_algo_, &data) ==
                           CUDNN_STATUS_SUCCESS) &&
        cudnnGetConvolutionBackwardFilterWorkspaceSize(h, x_, y_, filter_conv_, w_, filter_algo_, &filter) ==
            CUDNN_STATUS_SUCCESS;
    workspace_ = std::max({fwd, data, filter});
    text_ = "fwd " + std::to_string(a.forward) + (data_pass ? ", data " + std::to_string(a.data) : std::string()) +
            ", filter " + std::to_string(a.filter) + " (kept)";
    return ok;
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

// Page-locked host memory that keeps what is freed for the next request of the same size: every
// held-out evaluation builds a loader whose batches (17 of 48 MB at batch 1024) would otherwise be
// pinned and unpinned again, which cost about 0.8 s an evaluation on the H200's host.
struct PinnedAllocator : HostAllocator {
  PinnedAllocator() = default;
  PinnedAllocator(const PinnedAllocator&) = delete;
  PinnedAllocator& operator=(const PinnedAllocator&) = delete;
  ~PinnedAllocator() override {
    for (auto& [bytes, p] : free_) cudaFreeHost(p);
  }
  void* allocate(size_t bytes) override {
    {
      std::lock_guard lock(mutex_);
      if (auto it = free_.find(bytes); it != free_.end()) {
        void* p = it->second;
        free_.erase(it);
        sizes_[p] = bytes;
        return p;
      }
    }
    void* p = nullptr;
    JIRIKI_CUDA_CHECK(cudaMallocHost(&p, bytes));
    std::lock_guard lock(mutex_);
    sizes_[p] = bytes;
    return p;
  }
  void deallocate(void* p) noexcept override {
    if (!p) return;
    std::lock_guard lock(mutex_);
    auto it = sizes_.find(p);
    if (it == sizes_.end()) return;  // not ours: nothing to keep
    free_.emplace(it->second, p);
    sizes_.erase(it);
  }

 private:
  std::mutex mutex_;
  std::multimap<size_t, void*> free_;  // kept for reuse, by size
  std::map<void*, size_t> sizes_;      // handed out
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
      case PLAIN: break;
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
  // The next batch, copied on copy_stream while a step computes (GpuTrainer::stage): `staged` has
  // input's layout; staged_ready marks the copy's end, staged_free the step's copy out of it.
  DeviceBuffer staged;
  cudaStream_t copy_stream = nullptr;
  cudaEvent_t staged_ready = nullptr, staged_free = nullptr;
  const Batch* staged_from = nullptr;  // the host batch `staged` holds (or is receiving); null: none
  DeviceBuffer x0;
  std::vector<DeviceBuffer> conv_out, act_out;                           // per unit
  DeviceBuffer heads, policy, value_conv, value_act, fc1, value_logit;   // heads, policy, fc1, logit fp32
  DeviceBuffer dpolicy, dpolicy_nhwc, dvalue, dfc1, dfc1_16, fc2_terms;  // dpolicy, dvalue, dfc1, terms fp32
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
  const float* update_grads() const { return nccl || host ? at<float>(reduced) : at<float>(grads); }
  void plan(size_t bucket_bytes);  // buckets, their events, comm_stream, `reduced`
  void stage_done(int stage);
  void enqueue_allreduce(const Bucket& b, cudaStream_t on);

  // ---- host aggregation (attach_host) --------------------------------------------------------
  // In the gradients sequence, each bucket is copied from `grads` to host_grads (page-locked) on
  // comm_stream, followed by a host function that counts it in `landed`. The replica's thread,
  // having launched the sequence, takes the buckets as they land: their average with the other
  // replicas' (host->average_ranges), then their copy into `reduced` on up_stream. The optimizer's
  // sequence waits for up_done. Every path that runs the gradients sequence synchronises before the
  // next, so the count read before a launch is that launch's base.
  HostComm* host = nullptr;
  PinnedBuffer host_grads;
  cudaStream_t up_stream = nullptr;
  cudaEvent_t up_done = nullptr;
  struct Landed {
    std::mutex mutex;
    std::condition_variable cv;
    std::atomic<int64_t> count{0};  // buckets landed since attach_host (advanced under mutex)
    bool sleeping = false;          // (under mutex) the replica's thread waits on cv
  } landed;
  // Seconds the replica's thread spent in average_buckets since attach_host: waiting for buckets to
  // land, and in the mean with the other replicas (their barriers included).
  double host_wait_seconds = 0, host_mean_seconds = 0;
  // The latest step's timeline there, per bucket: seconds from entering average_buckets to the
  // bucket seen landed, and to its mean done (time_step prints it under JIRIKI_CUDA_VERBOSE).
  std::vector<std::pair<double, double>> host_trip;
  void enqueue_download(const Bucket& b, cudaStream_t on);
  int64_t landed_count();
  void wait_landed(int64_t count);
  // The host's part of a step whose gradients sequence was launched when `landed` stood at base:
  // every bucket averaged and on its way into `reduced`, the update's stream waiting for it.
  void average_buckets(int64_t base);
  // The gradients and update sequences of one step, with the host's part in between when attached.
  void run_step();

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
                                                  const nn::cuda::ConvArgs& args, const std::function<void()>& legacy,
                                                  const ConvRoute* kept, ConvRoute& route);
  std::string conv_choices_key() const;  // this trainer's shape in the choice file
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
  // The batch's first n rows into `input` (from `staged` when it holds that batch), or into `staged`
  // on copy_stream.
  void upload_batch(const Batch& b, int n);
  void copy_batch(const Batch& b, int n, float* to, cudaStream_t on);
  void upload_step_params();
  nn::LossTotals read_records(int n) const;  // after a synchronisation
};

}  // namespace jiriki::training::cuda
