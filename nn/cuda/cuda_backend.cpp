// The CUDA evaluator: cuDNN for the convolutions, cuBLAS for the heads' matrix products, a few
// kernels of ours in between (nn/cuda/kernels.cu), all captured into one CUDA graph per batch size.
//
// Numbers: bf16 storage of weights and activations, fp32 accumulation and epilogues (bias,
// residual, activation, heads). bf16 rather than fp16: the same tensor-core rate on Hopper, and
// fp32's exponent range, so no trained network's BN-folded weights or growing residual stream can
// overflow (fp16 stops at 65504). The cost is precision: 8 bits of mantissa, so outputs match fp32
// to about 1e-2 relative (tests/test_nn_cuda.cpp; 7e-3 on the policy of a 10x192 network, against
// PyTorch's own bf16 at 7.5e-3: bench/results/nn_cuda_h100.txt).
//
// Layout: NHWC activations [batch][81][channels], channels padded to a multiple of 8 (zero weights
// and biases keep the pad channels at zero), KRSC weights; the stem's 119 input planes padded to 128.
//
// One evaluate(n):
//   host: features fp32 -> bf16 into pinned memory, chunk by chunk, each chunk's DMA started at
//         once so that conversion and copy overlap
//   GPU:  one graph launch for the batch size's bucket (n rounded up to a power of two), which
//         holds: NCHW -> NHWC, stem, N blocks (two fused convolutions each), the heads' 1x1
//         convolutions as one GEMM, their epilogue, fc1 as a GEMM, fc2 + sigmoid. From batch 512
//         on, the stem and the blocks may run as two half batches on two streams, so that one
//         half's convolution fills the SMs that the other's leaves idle at its end (the last wave
//         of tiles, the gap before the next kernel): both ways are built and timed, the faster
//         kept (on an H100, two halves won at 512 and lost at 1024)
//   host: policy and values copied back chunk by chunk, each chunk handed over when its DMA is done
// On Hopper, a bucket whose size is a multiple of 128 is also built with the stem and blocks on our
// own convolution (square_conv.h: square-major rows [81][n][c], the off-board taps skipped), the
// features and heads kernels switched to that row order; replays of both are timed and the faster
// bucket kept (on an H100 ours won at 256-1024 by 15-24% of the replay time: bench/results/nn_cuda_h100.txt).
// evaluate_packed(n) (the search's and self-play's path) copies the bit-packed planes instead, 1216
// bytes a position in one DMA, and a kernel expands them into the same bf16 planes first.
// A bucket is built on first use: cuDNN engines are timed on that call's inputs, then the whole
// forward pass is captured. Every resource belongs to the evaluator and its device, so several
// evaluators may run on one GPU (one per thread) or on several GPUs in one process.
//
// Environment: JIRIKI_CUDA_VERBOSE=1 logs the engines tried and chosen and the time of each stage;
// JIRIKI_CUDNN_CANDIDATES=K times K engine configurations per convolution (default 16);
// JIRIKI_CUDNN_SWEEP=K times K kernel configurations of the runtime-compiled engine beyond the
// heuristics' list (default 14 from batch 256 on, none below; nn/cuda/fused_conv.cpp);
// JIRIKI_CUDA_PARTS=1 or 2 runs batches of 512 and more as one or as two halves without timing
// both (for tests and measurements); JIRIKI_CUDA_SQUARE=0 or 1 never or always (where it applies)
// runs the tower on the square-major kernel, without timing it against cuDNN.
#include "nn/cuda/cuda_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <vector>

#include "nn/cuda/cuda_util.h"
#include "nn/cuda/fused_conv.h"
#include "nn/cuda/kernels.h"
#include "nn/cuda/square_conv.h"

namespace jiriki::nn {

namespace cuda {

namespace {

constexpr int CHUNK = 64;  // positions per asynchronous copy
constexpr size_t CUBLAS_WORKSPACE = size_t(32) << 20;

int round_up(int x, int m) { return (x + m - 1) / m * m; }

// The batch size a call of n positions runs at: the next power of two, or max_batch. Each new
// bucket costs seconds on first use (cuDNN engines are compiled and timed for its shape), and a
// search's batch sizes wander below max_batch with its collisions: few buckets keep those costs
// out of the game, and the batches that matter, the full ones, run unpadded.
int bucket_size(int n, int max_batch) {
  int size = 1;
  while (size < n) size *= 2;
  return std::min(size, max_batch);
}

// Owns a CUDA/cuDNN/cuBLAS object released by `destroy`.
template <class T, auto destroy>
class Owned {
 public:
  Owned() = default;
  ~Owned() {
    if (v_) destroy(v_);
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  T get() const { return v_; }
  T* out() { return &v_; }

 private:
  T v_{};
};
using Stream = Owned<cudaStream_t, cudaStreamDestroy>;
using Event = Owned<cudaEvent_t, cudaEventDestroy>;
using GraphExec = Owned<cudaGraphExec_t, cudaGraphExecDestroy>;
using CudnnHandle = Owned<cudnnHandle_t, cudnnDestroy>;
using CublasHandle = Owned<cublasHandle_t, cublasDestroy>;

DeviceBuffer upload_f32(const std::vector<float>& v) {
  DeviceBuffer d(v.size() * sizeof(float));
  JIRIKI_CUDA_CHECK(cudaMemcpy(d.get(), v.data(), d.bytes(), cudaMemcpyHostToDevice));
  return d;
}

DeviceBuffer upload_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  std::transform(v.begin(), v.end(), h.begin(), to_bf16);
  DeviceBuffer d(h.size() * sizeof(uint16_t));
  JIRIKI_CUDA_CHECK(cudaMemcpy(d.get(), h.data(), d.bytes(), cudaMemcpyHostToDevice));
  return d;
}

DeviceBuffer zeroed(size_t bytes) {
  DeviceBuffer d(bytes);
  JIRIKI_CUDA_CHECK(cudaMemset(d.get(), 0, bytes));
  return d;
}

// OIHW [out][in][k][k] -> KRSC [out_p][k][k][in_p], pad channels zero.
std::vector<float> to_krsc(const FoldedConv& c, int in_p, int out_p) {
  const int k = c.kernel;
  std::vector<float> w(size_t(out_p) * k * k * in_p, 0.0f);
  for (int o = 0; o < c.out_channels; ++o)
    for (int i = 0; i < c.in_channels; ++i)
      for (int kh = 0; kh < k; ++kh)
        for (int kw = 0; kw < k; ++kw)
          w[((size_t(o) * k + kh) * k + kw) * in_p + i] = c.weight[((size_t(o) * c.in_channels + i) * k + kh) * k + kw];
  return w;
}

std::vector<float> padded(const std::vector<float>& v, size_t size) {
  std::vector<float> out(size, 0.0f);
  std::copy(v.begin(), v.end(), out.begin());
  return out;
}

// A 3x3 convolution's weights as square_conv.h takes them: [9 taps][out_p][in_p], tap = 3*kh + kw.
std::vector<float> to_tap_major(const FoldedConv& c, int in_p, int out_p) {
  std::vector<float> w(size_t(9) * out_p * in_p, 0.0f);
  for (int o = 0; o < c.out_channels; ++o)
    for (int i = 0; i < c.in_channels; ++i)
      for (int t = 0; t < 9; ++t)
        w[(size_t(t) * out_p + o) * in_p + i] = c.weight[(size_t(o) * c.in_channels + i) * 9 + t];
  return w;
}

// Events recorded between the stages of an eager forward pass: where the time goes, for the log.
class StageTimes {
 public:
  explicit StageTimes(cudaStream_t s) : stream_(s) { mark("start"); }
  ~StageTimes() {
    for (auto& m : marks_) cudaEventDestroy(m.second);
  }
  void mark(const char* stage) {
    cudaEvent_t e;
    JIRIKI_CUDA_CHECK(cudaEventCreate(&e));
    JIRIKI_CUDA_CHECK(cudaEventRecord(e, stream_));
    marks_.emplace_back(stage, e);
  }
  void print(int batch) {
    JIRIKI_CUDA_CHECK(cudaEventSynchronize(marks_.back().second));
    std::fprintf(stderr, "[cuda] batch %d stages (ms):", batch);
    for (size_t i = 1; i < marks_.size(); ++i) {
      float ms = 0.0f;
      JIRIKI_CUDA_CHECK(cudaEventElapsedTime(&ms, marks_[i - 1].second, marks_[i].second));
      std::fprintf(stderr, " %s %.4f", marks_[i].first, ms);
    }
    std::fprintf(stderr, "\n");
  }

 private:
  cudaStream_t stream_;
  std::vector<std::pair<const char*, cudaEvent_t>> marks_;
};

}  // namespace

class CudaEvaluator : public Evaluator {
 public:
  CudaEvaluator(const FoldedModel& m, const BackendOptions& o);
  ~CudaEvaluator() override;

  void evaluate(const float* features, int n, float* policy_logits, float* value) override;
  void evaluate_packed(const uint8_t* packed, int n, float* policy_logits, float* value) override;
  int max_batch() const override { return max_batch_; }
  std::string name() const override { return name_; }
  double device_seconds_per_batch(int n, int reps);
  bool uses_square_conv(int n) {
    check_batch_size(n, max_batch_);
    JIRIKI_CUDA_CHECK(cudaSetDevice(device_));
    return bucket(n).square;
  }

 private:
  struct ConvWeights {
    DeviceBuffer w, b;
  };
  // One batch size's tuned convolutions and captured forward pass.
  struct Bucket {
    int batch = 0;
    int parts = 1;  // the stem and blocks run as `parts` slices of batch / parts positions
    std::unique_ptr<FusedConv> stem, conv1, conv2;  // for batch / parts positions
    // Or the stem and blocks by the square-major kernel: one plan per convolution, in order.
    bool square = false;
    std::vector<SquareConvPlan> square_plans;
    size_t part_workspace = 0;
    DeviceBuffer workspace;  // parts x part_workspace bytes
    GraphExec exec;
  };

  ConvWeights upload_conv(const FoldedConv& c, int in_p);
  Bucket& bucket(int n);
  std::unique_ptr<Bucket> build_bucket(int size, int parts, bool square = false);
  float replay_ms(const Bucket& b, int reps);
  void enqueue_forward(const Bucket& b, StageTimes* times = nullptr);
  void enqueue_tower(const Bucket& b, int part, cudaStream_t s, StageTimes* times);
  void upload_inputs(const float* features, int n);
  void download_outputs(int n, float* policy_logits, float* value);

  int device_;
  int max_batch_;
  // The tower and half-tower choices, the convolutions' tuning (CudaSettings::engine_candidates: on
  // an H100 cuDNN's heuristics propose 10 for these graphs, all of the runtime-fusion engine; timing
  // them all costs a few seconds of runtime compilation when a batch size is first seen).
  CudaSettings settings_;
  Architecture arch_;
  int channels_;  // arch_.channels padded to a multiple of 8
  std::string name_;

  Stream stream_, aux_stream_;  // aux: the second half batch's tower
  Event fork_, join_;
  CudnnHandle cudnn_;
  CublasHandle cublas_;
  DeviceBuffer cublas_workspace_;
  std::vector<Event> chunk_done_;

  ConvWeights stem_;
  std::vector<ConvWeights> conv1_, conv2_;
  // The same weights tap-major for the square-major kernel, where it covers this network and GPU.
  bool square_ok_ = false;
  DeviceBuffer square_stem_w_;
  std::vector<DeviceBuffer> square_w1_, square_w2_;
  DeviceBuffer head_w_, policy_bias_, value_bias_, fc1_w_, fc1_b_, fc2_w_, fc2_b_;

  DeviceBuffer in_, packed_, x0_, h_[3], heads_, policy_, value_in_, hidden_, value_;
  PinnedBuffer host_in_, host_packed_, host_policy_, host_value_;

  std::map<int, std::unique_ptr<Bucket>> buckets_;  // by batch size; last member: released first
};

CudaEvaluator::CudaEvaluator(const FoldedModel& m, const BackendOptions& o)
    : device_(o.gpu),
      max_batch_(o.max_batch),
      settings_(o.cuda),
      arch_(m.arch),
      channels_(round_up(m.arch.channels, 8)) {
  if (o.precision != Precision::AUTO && o.precision != Precision::BF16)
    throw std::invalid_argument(std::string("the cuda backend computes in bf16; precision '") +
                                precision_name(o.precision) + "' is not available (use auto or bf16)");
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess)
    throw std::runtime_error(std::string("no CUDA device available: ") + cudaGetErrorString(e));
  if (device_ < 0 || device_ >= count)
    throw std::invalid_argument("CUDA device " + std::to_string(device_) + " does not exist (" + std::to_string(count) +
                                " device" + (count == 1 ? "" : "s") + ")");
  JIRIKI_CUDA_CHECK(cudaSetDevice(device_));
  cudaDeviceProp prop;
  JIRIKI_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  if (prop.major < 8)
    throw std::runtime_error(std::string("CUDA device ") + std::to_string(device_) + " (" + prop.name +
                             ") has no bf16 tensor cores (compute capability 8.0 or newer needed)");
  const int v = int(cudnnGetVersion());
  name_ = std::string("cuda (") + prop.name + ", device " + std::to_string(device_) + ", cuDNN " +
          std::to_string(v / 10000) + "." + std::to_string(v % 10000 / 100) + "." + std::to_string(v % 100) + ", bf16)";

  JIRIKI_CUDA_CHECK(cudaStreamCreateWithFlags(stream_.out(), cudaStreamNonBlocking));
  JIRIKI_CUDA_CHECK(cudaStreamCreateWithFlags(aux_stream_.out(), cudaStreamNonBlocking));
  JIRIKI_CUDA_CHECK(cudaEventCreateWithFlags(fork_.out(), cudaEventDisableTiming));
  JIRIKI_CUDA_CHECK(cudaEventCreateWithFlags(join_.out(), cudaEventDisableTiming));
  JIRIKI_CUDNN_CHECK(cudnnCreate(cudnn_.out()));
  JIRIKI_CUDNN_CHECK(cudnnSetStream(cudnn_.get(), stream_.get()));
  JIRIKI_CUBLAS_CHECK(cublasCreate(cublas_.out()));
  JIRIKI_CUBLAS_CHECK(cublasSetStream(cublas_.get(), stream_.get()));
  // A fixed workspace: cuBLAS must not allocate while a graph is being captured.
  cublas_workspace_ = DeviceBuffer(CUBLAS_WORKSPACE);
  JIRIKI_CUBLAS_CHECK(cublasSetWorkspace(cublas_.get(), cublas_workspace_.get(), CUBLAS_WORKSPACE));
  chunk_done_ = std::vector<Event>((max_batch_ + CHUNK - 1) / CHUNK);
  const unsigned wait = settings_.spin ? 0 : cudaEventBlockingSync;
  for (auto& e : chunk_done_) JIRIKI_CUDA_CHECK(cudaEventCreateWithFlags(e.out(), cudaEventDisableTiming | wait));

  // Weights.
  const int c = channels_;
  stem_ = upload_conv(m.stem, INPUT_CHANNELS_PADDED);
  for (int i = 0; i < arch_.blocks; ++i) {
    conv1_.push_back(upload_conv(m.block_conv1[i], c));
    conv2_.push_back(upload_conv(m.block_conv2[i], c));
  }
  std::vector<float> head(size_t(HEAD_CHANNELS) * c, 0.0f);
  for (int o = 0; o < POLICY_LABELS; ++o)
    for (int i = 0; i < arch_.channels; ++i) {
      head[size_t(o) * c + i] = m.policy_conv.weight[size_t(o) * arch_.channels + i];
      head[size_t(VALUE_HEAD_OFFSET + o) * c + i] = m.value_conv.weight[size_t(o) * arch_.channels + i];
    }
  square_ok_ = c == arch_.channels && square_conv_supported(device_, INPUT_CHANNELS_PADDED, c) &&
               (arch_.blocks == 0 || square_conv_supported(device_, c, c));
  if (square_ok_) {
    square_stem_w_ = upload_bf16(to_tap_major(m.stem, INPUT_CHANNELS_PADDED, c));
    for (int i = 0; i < arch_.blocks; ++i) {
      square_w1_.push_back(upload_bf16(to_tap_major(m.block_conv1[i], c, c)));
      square_w2_.push_back(upload_bf16(to_tap_major(m.block_conv2[i], c, c)));
    }
  }
  head_w_ = upload_bf16(head);
  policy_bias_ = upload_f32(m.policy_bias);
  value_bias_ = upload_f32(m.value_conv.bias);
  // fc1's input columns follow our NHWC flattening (27 * sq + channel) instead of NCHW (81 * channel + sq).
  std::vector<float> fc1(size_t(VALUE_HIDDEN) * VALUE_FC1_IN_PADDED, 0.0f);
  for (int o = 0; o < VALUE_HIDDEN; ++o)
    for (int ch = 0; ch < VALUE_CHANNELS; ++ch)
      for (int sq = 0; sq < SQUARES; ++sq)
        fc1[size_t(o) * VALUE_FC1_IN_PADDED + sq * VALUE_CHANNELS + ch] =
            m.value_fc1_weight[size_t(o) * POLICY_SIZE + ch * SQUARES + sq];
  fc1_w_ = upload_bf16(fc1);
  fc1_b_ = upload_f32(m.value_fc1_bias);
  fc2_w_ = upload_f32(m.value_fc2_weight);
  fc2_b_ = upload_f32(m.value_fc2_bias);

  // Activations, zeroed so that the rows a bucket pads with hold finite values from the start.
  const size_t b = size_t(max_batch_);
  in_ = zeroed(b * INPUT_SIZE * sizeof(uint16_t) + 4);  // + 4: features_to_nhwc reads whole words
  x0_ = zeroed(b * SQUARES * INPUT_CHANNELS_PADDED * sizeof(uint16_t));
  for (auto& h : h_) h = zeroed(b * SQUARES * c * sizeof(uint16_t));
  heads_ = zeroed(b * SQUARES * HEAD_CHANNELS * sizeof(float));
  policy_ = zeroed(b * POLICY_SIZE * sizeof(float));
  value_in_ = zeroed(b * VALUE_FC1_IN_PADDED * sizeof(uint16_t));
  hidden_ = zeroed(b * VALUE_HIDDEN * sizeof(float));
  value_ = zeroed(b * sizeof(float));
  host_in_ = PinnedBuffer(b * INPUT_SIZE * sizeof(uint16_t));
  packed_ = DeviceBuffer(b * PACKED_INPUT_BYTES);
  host_packed_ = PinnedBuffer(b * PACKED_INPUT_BYTES);
  host_policy_ = PinnedBuffer(b * POLICY_SIZE * sizeof(float));
  host_value_ = PinnedBuffer(b * sizeof(float));
}

CudaEvaluator::~CudaEvaluator() {
  // Members are released after this body, on this thread: make their device the current one.
  cudaSetDevice(device_);
  cudaStreamSynchronize(stream_.get());
}

CudaEvaluator::ConvWeights CudaEvaluator::upload_conv(const FoldedConv& c, int in_p) {
  return {upload_bf16(to_krsc(c, in_p, channels_)), upload_f32(padded(c.bias, channels_))};
}

// The stem and the residual blocks for the positions of one part of the bucket. The residual
// stream alternates between h_[0] and h_[1] and ends in h_[blocks % 2]; h_[2] holds the middle of
// each block.
void CudaEvaluator::enqueue_tower(const Bucket& b, int part, cudaStream_t s, StageTimes* times) {
  auto mark = [&](const char* stage) {
    if (times) times->mark(stage);
  };
  const size_t first_row = size_t(part) * (b.batch / b.parts) * SQUARES;  // rows of 81 x channels
  const size_t c = size_t(channels_);
  const uint16_t* x0 = x0_.get<uint16_t>() + first_row * INPUT_CHANNELS_PADDED;
  auto* cur = h_[0].get<uint16_t>() + first_row * c;
  auto* next = h_[1].get<uint16_t>() + first_row * c;
  auto* mid = h_[2].get<uint16_t>() + first_row * c;
  if (b.square) {  // the same buffers in the same order, planned by build_bucket
    for (size_t i = 0; i < b.square_plans.size(); ++i) {
      launch_square_conv(b.square_plans[i], s);
      mark(i == 0 ? "stem" : i % 2 ? "conv1" : "conv2");
    }
    return;
  }
  void* workspace = b.workspace.get<char>() + part * b.part_workspace;
  b.stem->run(cudnn_.get(), s, {x0, stem_.w.get<uint16_t>(), stem_.b.get<float>(), nullptr, cur}, workspace);
  mark("stem");
  for (int i = 0; i < arch_.blocks; ++i) {
    b.conv1->run(cudnn_.get(), s, {cur, conv1_[i].w.get<uint16_t>(), conv1_[i].b.get<float>(), nullptr, mid},
                 workspace);
    mark("conv1");
    b.conv2->run(cudnn_.get(), s, {mid, conv2_[i].w.get<uint16_t>(), conv2_[i].b.get<float>(), cur, next}, workspace);
    mark("conv2");
    std::swap(cur, next);
  }
}

void CudaEvaluator::enqueue_forward(const Bucket& b, StageTimes* times) {
  cudaStream_t s = stream_.get();
  auto mark = [&](const char* stage) {
    if (times) times->mark(stage);
  };
  const int n = b.batch, c = channels_;
  const RowOrder order = b.square ? RowOrder::SQUARE_MAJOR : RowOrder::POSITION_MAJOR;
  launch_features_to_nhwc(in_.get<uint16_t>(), x0_.get<uint16_t>(), n, s, order);
  mark("features");
  if (b.parts == 2) {  // fork: the second half on the aux stream, joined before the heads
    JIRIKI_CUDA_CHECK(cudaEventRecord(fork_.get(), s));
    JIRIKI_CUDA_CHECK(cudaStreamWaitEvent(aux_stream_.get(), fork_.get()));
    enqueue_tower(b, 1, aux_stream_.get(), nullptr);
    enqueue_tower(b, 0, s, times);
    JIRIKI_CUDA_CHECK(cudaEventRecord(join_.get(), aux_stream_.get()));
    JIRIKI_CUDA_CHECK(cudaStreamWaitEvent(s, join_.get()));
  } else {
    enqueue_tower(b, 0, s, times);
  }
  const uint16_t* cur = h_[arch_.blocks % 2].get<uint16_t>();
  // Both heads' 1x1 convolutions: heads[n*81][56] = h[n*81][c] * head_w[56][c]^T (row-major; in
  // cuBLAS's column-major terms heads^T = head_w^T(op T) * h^T), rows in the tower's order.
  const float one = 1.0f, zero = 0.0f;
  JIRIKI_CUBLAS_CHECK(cublasGemmEx(cublas_.get(), CUBLAS_OP_T, CUBLAS_OP_N, HEAD_CHANNELS, n * SQUARES, c, &one,
                                   head_w_.get(), CUDA_R_16BF, c, cur, CUDA_R_16BF, c, &zero, heads_.get(), CUDA_R_32F,
                                   HEAD_CHANNELS, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  mark("heads");
  launch_heads_epilogue(heads_.get<float>(), policy_bias_.get<float>(), value_bias_.get<float>(), arch_.activation,
                        policy_.get<float>(), value_in_.get<uint16_t>(), n, s, order);
  mark("heads_epilogue");
  // fc1: hidden[n][256] = value_in[n][2192] * fc1_w[256][2192]^T.
  JIRIKI_CUBLAS_CHECK(cublasGemmEx(cublas_.get(), CUBLAS_OP_T, CUBLAS_OP_N, VALUE_HIDDEN, n, VALUE_FC1_IN_PADDED, &one,
                                   fc1_w_.get(), CUDA_R_16BF, VALUE_FC1_IN_PADDED, value_in_.get(), CUDA_R_16BF,
                                   VALUE_FC1_IN_PADDED, &zero, hidden_.get(), CUDA_R_32F, VALUE_HIDDEN,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  mark("fc1");
  launch_value_epilogue(hidden_.get<float>(), fc1_b_.get<float>(), fc2_w_.get<float>(), fc2_b_.get<float>(),
                        arch_.activation, value_.get<float>(), n, s);
  mark("value");
}

// Tunes the convolutions of a bucket run as `parts` slices and captures its forward pass.
std::unique_ptr<CudaEvaluator::Bucket> CudaEvaluator::build_bucket(int size, int parts, bool square) {
  const auto start = std::chrono::steady_clock::now();
  auto b = std::make_unique<Bucket>();
  b->batch = size;
  b->parts = parts;
  const int rows = size / parts;  // the batch size the convolutions are built for
  const int c = channels_;
  const Activation act = arch_.activation;
  cudaStream_t s = stream_.get();
  auto* h0 = h_[0].get<uint16_t>();
  auto* h1 = h_[1].get<uint16_t>();
  auto* mid = h_[2].get<uint16_t>();

  auto wide = [](uint16_t* p) { return reinterpret_cast<__nv_bfloat16*>(p); };
  const SquareAct square_act = act == Activation::RELU ? SquareAct::relu : SquareAct::swish;
  if (square) {  // the convolutions of enqueue_tower, in its order and on its buffers
    b->square = true;
    const auto* x0 = reinterpret_cast<const __nv_bfloat16*>(x0_.get<uint16_t>());
    auto* cur = h0;
    auto* next = h1;
    b->square_plans.push_back(make_square_conv_plan(x0, wide(square_stem_w_.get<uint16_t>()), stem_.b.get<float>(),
                                                    nullptr, wide(cur), square_act, size, INPUT_CHANNELS_PADDED, c));
    for (int i = 0; i < arch_.blocks; ++i) {
      b->square_plans.push_back(make_square_conv_plan(wide(cur), wide(square_w1_[i].get<uint16_t>()),
                                                      conv1_[i].b.get<float>(), nullptr, wide(mid), square_act, size, c,
                                                      c));
      b->square_plans.push_back(make_square_conv_plan(wide(mid), wide(square_w2_[i].get<uint16_t>()),
                                                      conv2_[i].b.get<float>(), wide(cur), wide(next), square_act, size,
                                                      c, c));
      std::swap(cur, next);
    }
  } else {
    // Engines are timed layer after layer on this call's inputs (the first part's), each layer's
    // output feeding the next.
    launch_features_to_nhwc(in_.get<uint16_t>(), x0_.get<uint16_t>(), size, s);
    b->stem =
        std::make_unique<FusedConv>(cudnn_.get(), ConvShape{rows, INPUT_CHANNELS_PADDED, c, 3, false, act}, settings_);
    b->stem->tune(cudnn_.get(), s, {x0_.get<uint16_t>(), stem_.w.get<uint16_t>(), stem_.b.get<float>(), nullptr, h0});
    size_t workspace = b->stem->workspace_size();
    if (arch_.blocks > 0) {
      b->conv1 = std::make_unique<FusedConv>(cudnn_.get(), ConvShape{rows, c, c, 3, false, act}, settings_);
      b->conv1->tune(cudnn_.get(), s, {h0, conv1_[0].w.get<uint16_t>(), conv1_[0].b.get<float>(), nullptr, mid});
      b->conv2 = std::make_unique<FusedConv>(cudnn_.get(), ConvShape{rows, c, c, 3, true, act}, settings_);
      b->conv2->tune(cudnn_.get(), s, {mid, conv2_[0].w.get<uint16_t>(), conv2_[0].b.get<float>(), h0, h1});
      workspace = std::max({workspace, b->conv1->workspace_size(), b->conv2->workspace_size()});
    }
    b->part_workspace = (workspace + 255) / 256 * 256;
    b->workspace = DeviceBuffer(b->part_workspace * b->parts);
  }

  enqueue_forward(*b);  // once outside the capture: cuBLAS and kernel loading
  JIRIKI_CUDA_CHECK(cudaStreamSynchronize(s));
  cudaGraph_t graph = nullptr;
  JIRIKI_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  try {
    enqueue_forward(*b);
  } catch (...) {
    cudaStreamEndCapture(s, &graph);
    if (graph) cudaGraphDestroy(graph);
    throw;
  }
  JIRIKI_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  cudaError_t e = cudaGraphInstantiate(b->exec.out(), graph, 0);
  cudaGraphDestroy(graph);
  JIRIKI_CUDA_CHECK(e);

  if (settings_.verbose) {
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "[cuda] device %d batch %d (%d x %d) built in %.2f s: ", device_, size, parts, rows, secs);
    if (b->square) std::fprintf(stderr, "square-major kernel (%d CTAs)", b->square_plans[0].ctas);
    else std::fprintf(stderr, "stem %s", b->stem->description().c_str());
    if (b->conv1)
      std::fprintf(stderr, "; conv1 %s; conv2 %s", b->conv1->description().c_str(), b->conv2->description().c_str());
    std::fprintf(stderr, "\n");
    StageTimes times(s);
    enqueue_forward(*b, &times);
    times.print(size);
  }
  return b;
}

// Milliseconds per replay of a bucket's graph.
float CudaEvaluator::replay_ms(const Bucket& b, int reps) {
  Event begin, end;
  JIRIKI_CUDA_CHECK(cudaEventCreate(begin.out()));
  JIRIKI_CUDA_CHECK(cudaEventCreate(end.out()));
  JIRIKI_CUDA_CHECK(cudaGraphLaunch(b.exec.get(), stream_.get()));  // warm-up
  JIRIKI_CUDA_CHECK(cudaEventRecord(begin.get(), stream_.get()));
  for (int r = 0; r < reps; ++r) JIRIKI_CUDA_CHECK(cudaGraphLaunch(b.exec.get(), stream_.get()));
  JIRIKI_CUDA_CHECK(cudaEventRecord(end.get(), stream_.get()));
  JIRIKI_CUDA_CHECK(cudaEventSynchronize(end.get()));
  float ms = 0.0f;
  JIRIKI_CUDA_CHECK(cudaEventElapsedTime(&ms, begin.get(), end.get()));
  return ms / reps;
}

CudaEvaluator::Bucket& CudaEvaluator::bucket(int n) {
  const int size = bucket_size(n, max_batch_);
  if (auto it = buckets_.find(size); it != buckets_.end()) return *it->second;
  const bool may_square = square_ok_ && size % kSquareTile == 0 && settings_.tower != CudaSettings::Tower::CUDNN;
  if (may_square && settings_.tower == CudaSettings::Tower::SQUARE)
    return *buckets_.emplace(size, build_bucket(size, 1, true)).first->second;
  const bool may_split = size >= 512 && size % 2 == 0;
  const int forced = settings_.parts;
  std::unique_ptr<Bucket> b = build_bucket(size, may_split && forced == 2 ? 2 : 1);
  if (may_split && forced == 0) {  // two half batches on two streams, if that is faster
    std::unique_ptr<Bucket> halves = build_bucket(size, 2);
    const float one = replay_ms(*b, 10), two = replay_ms(*halves, 10);
    if (settings_.verbose)
      std::fprintf(stderr, "[cuda] batch %d: %.4f ms as one, %.4f ms as two halves\n", size, one, two);
    if (two < one) b = std::move(halves);
  }
  if (may_square) {  // the square-major kernel, if that is faster still
    std::unique_ptr<Bucket> square = build_bucket(size, 1, true);
    const float cudnn = replay_ms(*b, 10), ours = replay_ms(*square, 10);
    if (settings_.verbose)
      std::fprintf(stderr, "[cuda] batch %d: %.4f ms with cuDNN, %.4f ms square-major\n", size, cudnn, ours);
    if (ours < cudnn) b = std::move(square);
  }
  return *buckets_.emplace(size, std::move(b)).first->second;
}

void CudaEvaluator::upload_inputs(const float* features, int n) {
  auto* host = host_in_.get<uint16_t>();
  for (int first = 0; first < n; first += CHUNK) {
    const size_t begin = size_t(first) * INPUT_SIZE, count = size_t(std::min(CHUNK, n - first)) * INPUT_SIZE;
    for (size_t i = begin; i < begin + count; ++i) host[i] = to_bf16(features[i]);
    JIRIKI_CUDA_CHECK(cudaMemcpyAsync(in_.get<uint16_t>() + begin, host + begin, count * sizeof(uint16_t),
                                      cudaMemcpyHostToDevice, stream_.get()));
  }
}

void CudaEvaluator::download_outputs(int n, float* policy_logits, float* value) {
  cudaStream_t s = stream_.get();
  for (int first = 0, k = 0; first < n; first += CHUNK, ++k) {
    const size_t rows = size_t(std::min(CHUNK, n - first));
    JIRIKI_CUDA_CHECK(cudaMemcpyAsync(host_policy_.get<float>() + size_t(first) * POLICY_SIZE,
                                      policy_.get<float>() + size_t(first) * POLICY_SIZE,
                                      rows * POLICY_SIZE * sizeof(float), cudaMemcpyDeviceToHost, s));
    JIRIKI_CUDA_CHECK(cudaMemcpyAsync(host_value_.get<float>() + first, value_.get<float>() + first,
                                      rows * sizeof(float), cudaMemcpyDeviceToHost, s));
    JIRIKI_CUDA_CHECK(cudaEventRecord(chunk_done_[k].get(), s));
  }
  for (int first = 0, k = 0; first < n; first += CHUNK, ++k) {
    const size_t rows = size_t(std::min(CHUNK, n - first));
    JIRIKI_CUDA_CHECK(cudaEventSynchronize(chunk_done_[k].get()));
    std::copy_n(host_policy_.get<float>() + size_t(first) * POLICY_SIZE, rows * POLICY_SIZE,
                policy_logits + size_t(first) * POLICY_SIZE);
    std::copy_n(host_value_.get<float>() + first, rows, value + first);
  }
}

void CudaEvaluator::evaluate(const float* features, int n, float* policy_logits, float* value) {
  check_batch_size(n, max_batch_);
  JIRIKI_CUDA_CHECK(cudaSetDevice(device_));
  upload_inputs(features, n);
  Bucket& b = bucket(n);  // built on first use, tuned on these very inputs
  JIRIKI_CUDA_CHECK(cudaGraphLaunch(b.exec.get(), stream_.get()));
  download_outputs(n, policy_logits, value);
}

void CudaEvaluator::evaluate_packed(const uint8_t* packed, int n, float* policy_logits, float* value) {
  check_batch_size(n, max_batch_);
  JIRIKI_CUDA_CHECK(cudaSetDevice(device_));
  // 1216 bytes a position: one copy into pinned memory and one DMA, then the bits become the bf16
  // planes evaluate() would have uploaded, in the same buffer, ahead of the same graph.
  const size_t bytes = size_t(n) * PACKED_INPUT_BYTES;
  std::copy_n(packed, bytes, host_packed_.get<uint8_t>());
  JIRIKI_CUDA_CHECK(cudaMemcpyAsync(packed_.get(), host_packed_.get(), bytes, cudaMemcpyHostToDevice, stream_.get()));
  launch_unpack_features(packed_.get<uint8_t>(), in_.get<uint16_t>(), n, stream_.get());
  Bucket& b = bucket(n);
  JIRIKI_CUDA_CHECK(cudaGraphLaunch(b.exec.get(), stream_.get()));
  download_outputs(n, policy_logits, value);
}

double CudaEvaluator::device_seconds_per_batch(int n, int reps) {
  check_batch_size(n, max_batch_);
  if (reps < 1) throw std::invalid_argument("reps must be at least 1");
  JIRIKI_CUDA_CHECK(cudaSetDevice(device_));
  return 1e-3 * replay_ms(bucket(n), reps);
}

}  // namespace cuda

std::unique_ptr<Evaluator> make_cuda_evaluator(const FoldedModel& model, const BackendOptions& options) {
  return std::make_unique<cuda::CudaEvaluator>(model, options);
}

// Devices with bf16 tensor cores (compute capability 8.0 or newer): what the backend and the GPU
// trainer accept.
std::vector<int> cuda_devices(std::string* why) {
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    if (why) *why = std::string("no CUDA device available (") + cudaGetErrorString(e) + ")";
    return {};
  }
  std::vector<int> usable;
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, d) == cudaSuccess && prop.major >= 8) usable.push_back(d);
  }
  if (usable.empty() && why)
    *why = count == 0 ? "no CUDA device available" : "no CUDA device with bf16 tensor cores (compute capability 8.0)";
  return usable;
}

int cuda_device_count(std::string* why) { return int(cuda_devices(why).size()); }

double cuda_device_seconds_per_batch(Evaluator& e, int n, int reps) {
  auto* c = dynamic_cast<cuda::CudaEvaluator*>(&e);
  if (!c) throw std::invalid_argument("not a CUDA evaluator: " + e.name());
  return c->device_seconds_per_batch(n, reps);
}

bool cuda_uses_square_conv(Evaluator& e, int n) {
  auto* c = dynamic_cast<cuda::CudaEvaluator*>(&e);
  if (!c) throw std::invalid_argument("not a CUDA evaluator: " + e.name());
  return c->uses_square_conv(n);
}

}  // namespace jiriki::nn
