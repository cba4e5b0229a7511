// The simd backend: the project's own kernels (nn/cpu_kernels.h) on the BN-folded network, with no
// third-party code, so that every build (a Windows build without oneDNN included) has a fast CPU
// evaluator. The kernel set is the widest the processor runs (AVX-512 BF16, AVX-512F, AVX2 + FMA,
// else plain C++), chosen by CPUID when the evaluator is made.
//
// Activations are padded NHWC (nn/cpu_kernels.h), channels padded to a multiple of 16, zeroed once
// at construction: the border squares and padding channels stay zero. Each convolution carries its
// bias, the activation and, for a block's second convolution, the residual skip. In bf16 the
// convolutions read bf16 activations and bf16 weights and accumulate in fp32; the residual stream is
// kept in fp32 beside its bf16 copy, and the heads run in fp32 from it. The two heads' 1x1
// convolutions run as one of 54 output channels; the value head's hidden layer is a dense kernel,
// its last layer (256 -> 1) runs on the host.
//
// Threads: a batch of at least four positions a thread (or one that divides evenly) is split among
// them, each running the whole network on its positions with no synchronisation between layers; a
// smaller batch shares each layer's work items (rows of the board by blocks of channels) instead.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/bf16.h"
#include "common/cpus.h"
#include "common/thread_pool.h"
#include "nn/backend.h"
#include "nn/cpu_kernels.h"
#include "nn/layers.h"

namespace jiriki::nn {

namespace {

using kernels::Act;
using kernels::ConvArgs;
using kernels::DenseArgs;
using kernels::Isa;
using kernels::PADDED_SQUARES;
using kernels::round_up;

constexpr int HEAD_CHANNELS = kernels::round_up(POLICY_LABELS + VALUE_CHANNELS, kernels::CHANNEL_ALIGN);  // 64
constexpr int INPUT_STRIDE = kernels::round_up(INPUT_PLANES, kernels::CHANNEL_ALIGN);                     // 128

// A zeroed buffer whose data starts on a 64-byte line, so that no vector load straddles two lines.
template <class T>
class Aligned {
 public:
  void reset(size_t n) {
    storage_.assign(n + 64 / sizeof(T), T{});
    const auto address = reinterpret_cast<uintptr_t>(storage_.data());
    data_ = storage_.data() + (64 - address % 64) % 64 / sizeof(T);
  }
  T* data() const { return data_; }
  bool empty() const { return storage_.empty(); }

 private:
  std::vector<T> storage_;
  T* data_ = nullptr;
};

// The widest kernel set the options allow on this processor.
Isa choose_isa(CpuIsa cap) {
  const Isa best = kernels::best_isa();
  switch (cap) {
    case CpuIsa::BEST: return best;
    case CpuIsa::AVX2: return best == Isa::SCALAR ? Isa::SCALAR : Isa::AVX2;
    case CpuIsa::SCALAR: return Isa::SCALAR;
  }
  return best;
}

// One convolution's packed weights and padded bias.
struct Conv {
  Aligned<float> weight;
  Aligned<uint16_t> weight_bf16;
  Aligned<float> bias;
  int cin = 0, taps = 9;
};

class SimdEvaluator : public Evaluator {
 public:
  SimdEvaluator(const FoldedModel& m, const BackendOptions& o)
      : m_(m),
        set_(kernels::kernel_set(choose_isa(o.cpu_isa))),
        max_batch_(o.max_batch),
        channels_(round_up(m.arch.channels, kernels::CHANNEL_ALIGN)),
        pool_(o.threads > 0 ? o.threads : usable_cpus().count) {
    if (o.precision == Precision::FP16 || o.precision == Precision::INT8)
      throw std::invalid_argument(std::string("the simd backend computes in fp32 or bf16, not ") +
                                  precision_name(o.precision));
    if (o.precision == Precision::BF16 && !set_.conv_bf16)
      throw std::runtime_error(std::string("simd backend: no bf16 convolution on this CPU (") +
                               kernels::isa_name(set_.isa) + "; bf16 needs AVX-512 BF16); use fp32");
    bf16_ = set_.conv_bf16 && o.precision != Precision::FP32;
    act_ = m.arch.activation == Activation::SWISH ? Act::SWISH : Act::RELU;

    stem_ = pack(m.stem, INPUT_STRIDE);
    for (int b = 0; b < m.arch.blocks; ++b) {
      conv1_.push_back(pack(m.block_conv1[b], channels_));
      conv2_.push_back(pack(m.block_conv2[b], channels_));
    }
    // The two heads' 1x1 convolutions as one: policy in channels 0..26, value in 27..53.
    FoldedConv heads{POLICY_LABELS + VALUE_CHANNELS, m.arch.channels, 1, m.policy_conv.weight, m.policy_conv.bias};
    heads.weight.insert(heads.weight.end(), m.value_conv.weight.begin(), m.value_conv.weight.end());
    heads.bias.insert(heads.bias.end(), m.value_conv.bias.begin(), m.value_conv.bias.end());
    heads_ = pack(heads, channels_, false);
    fc1_t_.reset(size_t(POLICY_SIZE) * VALUE_HIDDEN);
    for (int o = 0; o < VALUE_HIDDEN; ++o)
      for (int i = 0; i < POLICY_SIZE; ++i)
        fc1_t_.data()[int64_t(i) * VALUE_HIDDEN + o] = m.value_fc1_weight[int64_t(o) * POLICY_SIZE + i];

    const size_t positions = size_t(max_batch_) * PADDED_SQUARES;
    h_.reset(positions * channels_);
    if (bf16_) {
      input16_.reset(positions * INPUT_STRIDE);
      h16_.reset(positions * channels_);
      t16_.reset(positions * channels_);
    } else {
      input32_.reset(positions * INPUT_STRIDE);
      t_.reset(positions * channels_);
    }
    heads_out_.reset(positions * HEAD_CHANNELS);
    value_planes_.reset(size_t(max_batch_) * POLICY_SIZE);
    hidden_.reset(size_t(max_batch_) * VALUE_HIDDEN);
  }

  void evaluate(const float* features, int n, float* policy_logits, float* value) override {
    check_batch_size(n, max_batch_);
    const int threads = pool_.size();
    if (threads == 1 || n % threads == 0 || n >= 4 * threads) {
      pool_.parallel_for(
          n, [&](int64_t b0, int64_t b1) { forward(features, int(b0), int(b1), policy_logits, value, false); });
    } else {
      forward(features, 0, n, policy_logits, value, true);
    }
  }

  int max_batch() const override { return max_batch_; }
  std::string name() const override {
    return std::string("simd (own ") + kernels::isa_name(set_.isa) + " kernels, " + std::to_string(pool_.size()) +
           " threads, " + (bf16_ ? "bf16" : "fp32") + ")";
  }

 private:
  // A convolution's weights in the kernels' layout; input channels padded to an even count (bf16
  // pairs), output channels to channels_ (or the heads' 64).
  Conv pack(const FoldedConv& c, int in_stride, bool bf16_capable = true) {
    Conv p;
    const bool bf16 = bf16_ && bf16_capable;
    p.cin = bf16 ? round_up(c.in_channels, 2) : c.in_channels;
    p.taps = c.kernel * c.kernel;
    if (p.cin > in_stride) throw std::logic_error("simd backend: input channels exceed the stride");
    const int cout = round_up(c.out_channels, kernels::CHANNEL_ALIGN);
    if (bf16) {
      auto w =
          kernels::pack_conv_weights_bf16(c.weight.data(), c.out_channels, c.in_channels, c.kernel, cout, p.cin, set_);
      p.weight_bf16.reset(w.size());
      std::copy(w.begin(), w.end(), p.weight_bf16.data());
    } else {
      auto w = kernels::pack_conv_weights(c.weight.data(), c.out_channels, c.in_channels, c.kernel, cout, p.cin, set_);
      p.weight.reset(w.size());
      std::copy(w.begin(), w.end(), p.weight.data());
    }
    p.bias.reset(cout);
    std::copy(c.bias.begin(), c.bias.end(), p.bias.data());
    return p;
  }

  // Runs `items` work items of one layer: on this thread, or shared by the pool.
  template <class Fn>
  void run(int64_t items, bool split, const Fn& fn) {
    if (split) pool_.parallel_for(items, [&](int64_t begin, int64_t end) { fn(begin, end); });
    else fn(0, items);
  }

  // A convolution over positions [b0, b0 + n): from `in` (fp32, or bf16 in bf16 mode) of stride
  // in_stride, into out (fp32) and/or out16 (bf16), adding `residual` when given.
  void conv(const Conv& c, const void* in, int in_stride, int cout, float* out, uint16_t* out16, const float* residual,
            Act act, int n, bool split) {
    ConvArgs a;
    a.in = in;
    a.in_stride = in_stride;
    a.cin = c.cin;
    a.taps = c.taps;
    a.weight = c.weight.empty() ? static_cast<const void*>(c.weight_bf16.data()) : c.weight.data();
    a.bias = c.bias.data();
    a.cout = cout;
    a.out_stride = cout;
    a.residual = residual;
    a.out = out;
    a.out_bf16 = out16;
    a.act = act;
    auto kernel = c.weight.empty() ? set_.conv_bf16 : set_.conv;
    run(set_.conv_items(n, cout), split, [&](int64_t begin, int64_t end) { kernel(a, n, begin, end); });
  }

  // The network on positions [b0, b1).
  void forward(const float* features, int b0, int b1, float* policy_logits, float* value, bool split) {
    const int n = b1 - b0;
    const int64_t first = int64_t(b0) * PADDED_SQUARES;
    const int c = channels_;
    // Input planes (NCHW) to padded NHWC: cleared, then the nonzero values (most planes are mostly
    // zero) written, reading the planes in order.
    run(n, split, [&](int64_t p0, int64_t p1) {
      for (int64_t p = b0 + p0; p < b0 + p1; ++p) {
        const float* x = features + p * INPUT_SIZE;
        const int64_t at = p * PADDED_SQUARES * INPUT_STRIDE;
        if (bf16_) std::fill_n(input16_.data() + at, PADDED_SQUARES * INPUT_STRIDE, uint16_t(0));
        else std::fill_n(input32_.data() + at, PADDED_SQUARES * INPUT_STRIDE, 0.0f);
        for (int i = 0; i < INPUT_PLANES; ++i)
          for (int sq = 0; sq < SQUARES; ++sq)
            if (const float v = x[i * SQUARES + sq]; v != 0.0f) {
              const int64_t to = at + kernels::padded_square(sq) * INPUT_STRIDE + i;
              if (bf16_) input16_.data()[to] = to_bf16(v);
              else input32_.data()[to] = v;
            }
      }
    });

    float* h = h_.data() + first * c;
    if (bf16_) {
      uint16_t* h16 = h16_.data() + first * c;
      uint16_t* t16 = t16_.data() + first * c;
      conv(stem_, input16_.data() + first * INPUT_STRIDE, INPUT_STRIDE, c, h, h16, nullptr, act_, n, split);
      for (size_t b = 0; b < conv1_.size(); ++b) {
        conv(conv1_[b], h16, c, c, nullptr, t16, nullptr, act_, n, split);
        conv(conv2_[b], t16, c, c, h, h16, h, act_, n, split);
      }
    } else {
      float* t = t_.data() + first * c;
      conv(stem_, input32_.data() + first * INPUT_STRIDE, INPUT_STRIDE, c, h, nullptr, nullptr, act_, n, split);
      for (size_t b = 0; b < conv1_.size(); ++b) {
        conv(conv1_[b], h, c, c, t, nullptr, nullptr, act_, n, split);
        conv(conv2_[b], t, c, c, h, nullptr, h, act_, n, split);
      }
    }
    float* heads = heads_out_.data() + first * HEAD_CHANNELS;
    conv(heads_, h, c, HEAD_CHANNELS, heads, nullptr, nullptr, Act::NONE, n, split);

    // Heads' planes back to NCHW: the policy logits with their bias, the value planes activated.
    float* planes = value_planes_.data() + int64_t(b0) * POLICY_SIZE;
    run(n, split, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        float* logits = policy_logits + (b0 + p) * POLICY_SIZE;
        float* v = planes + p * POLICY_SIZE;
        for (int sq = 0; sq < SQUARES; ++sq) {
          const float* y = heads + (p * PADDED_SQUARES + kernels::padded_square(sq)) * HEAD_CHANNELS;
          for (int l = 0; l < POLICY_LABELS; ++l) logits[l * SQUARES + sq] = y[l] + m_.policy_bias[l * SQUARES + sq];
          for (int k = 0; k < VALUE_CHANNELS; ++k) {
            const float x = y[POLICY_LABELS + k];
            v[k * SQUARES + sq] = act_ == Act::SWISH ? swish(x) : relu(x);
          }
        }
      }
    });

    DenseArgs d;
    d.x = planes;
    d.x_stride = POLICY_SIZE;
    d.in = POLICY_SIZE;
    d.wt = fc1_t_.data();
    d.bias = m_.value_fc1_bias.data();
    d.out = VALUE_HIDDEN;
    d.y = hidden_.data() + int64_t(b0) * VALUE_HIDDEN;
    d.act = act_;
    run(set_.dense_items(n, VALUE_HIDDEN), split, [&](int64_t begin, int64_t end) { set_.dense(d, n, begin, end); });
    for (int p = 0; p < n; ++p) {
      const float* hid = d.y + int64_t(p) * VALUE_HIDDEN;
      float acc = m_.value_fc2_bias[0];
      for (int i = 0; i < VALUE_HIDDEN; ++i) acc += m_.value_fc2_weight[i] * hid[i];
      value[b0 + p] = sigmoid(acc);
    }
  }

  FoldedModel m_;
  const kernels::KernelSet& set_;
  int max_batch_, channels_;
  bool bf16_ = false;
  Act act_ = Act::RELU;
  ThreadPool pool_;
  Conv stem_, heads_;
  std::vector<Conv> conv1_, conv2_;
  Aligned<float> fc1_t_;
  Aligned<float> input32_, h_, t_, heads_out_, value_planes_, hidden_;
  Aligned<uint16_t> input16_, h16_, t16_;
};

}  // namespace

std::unique_ptr<Evaluator> make_simd_evaluator(const FoldedModel& model, const BackendOptions& options) {
  return std::make_unique<SimdEvaluator>(model, options);
}

}  // namespace jiriki::nn
