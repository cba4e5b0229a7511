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
// In int8 (ReLU networks, where the processor has AVX2: nn/cpu_kernels.h) the trunk's
// activations are u8 with one scale per convolution's output and the weights s8 with one per output
// channel, summed in s32 (the onednn backend's scheme: nn/cpu_backend.cpp); the input planes (0 or 1)
// are u8 at scale 1, the heads' 1x1 convolution reads the last u8 activations and writes fp32, and
// the value head's hidden layer runs in fp32. The scales come from the largest value each
// convolution writes in fp32 on positions the network plays itself (once per network and process),
// and a position whose activations saturate by the thousand is evaluated again in fp32
// (nn/backend.h: SATURATION_LIMIT).
//
// Threads: a batch of at least four positions a thread (or one that divides evenly) is split among
// them, each running the whole network on its positions with no synchronisation between layers; a
// smaller batch shares each layer's work items (rows of the board by blocks of channels) instead.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
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

// One convolution's packed weights and padded bias; in int8 the bias in accumulator units and each
// output channel's multiplier (scale).
struct Conv {
  Aligned<float> weight;
  Aligned<uint16_t> weight_bf16;
  Aligned<int8_t> weight_s8;
  Aligned<float> bias, scale;
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
    if (o.precision == Precision::FP16)
      throw std::invalid_argument("the simd backend computes in fp32, bf16 or int8, not fp16");
    if (o.precision == Precision::BF16 && !set_.conv_bf16)
      throw std::runtime_error(std::string("simd backend: no bf16 convolution on this CPU (") +
                               kernels::isa_name(set_.isa) + "; bf16 needs AVX-512 BF16); use fp32");
    act_ = m.arch.activation == Activation::SWISH ? Act::SWISH : Act::RELU;
    if (o.precision == Precision::INT8) {
      if (act_ != Act::RELU) throw std::invalid_argument("the simd backend computes int8 only for ReLU networks");
      int8_ = kernels::int8_kernels(set_.isa);
      if (!int8_)
        throw std::runtime_error(std::string("simd backend: no int8 convolution on this CPU (") +
                                 kernels::isa_name(set_.isa) + "; int8 needs AVX2)");
    } else if (o.precision == Precision::AUTO && act_ == Act::RELU) {
      int8_ = kernels::int8_kernels(set_.isa);  // int8 wherever it runs, else bf16 or fp32 as below
    }
    bf16_ = !int8_ && set_.conv_bf16 && o.precision != Precision::FP32;

    // Activation scales (u8 units per unit) of the stem's output, then of each block's two.
    std::vector<float> scale(1 + 2 * size_t(m.arch.blocks), 1.0f);
    if (int8_) {
      const std::vector<float> maxima = calibrated_maxima<SimdEvaluator>("simd", m, pool_.size());
      for (size_t i = 0; i < scale.size(); ++i) scale[i] = maxima[i] > 0 ? 255.0f / maxima[i] : 1.0f;
    }
    if (int8_) {
      fp32_ = std::make_unique<SimdEvaluator>(m, saturation_fallback_options(o));
      saturated_.assign(size_t(max_batch_), 0);
    }
    stem_ = pack(m.stem, INPUT_STRIDE, 1.0f, scale[0]);
    for (int b = 0; b < m.arch.blocks; ++b) {
      conv1_.push_back(pack(m.block_conv1[b], channels_, scale[2 * b], scale[2 * b + 1]));
      conv2_.push_back(pack(m.block_conv2[b], channels_, scale[2 * b + 1], scale[2 * b + 2]));
      skip_scale_.push_back(scale[2 * b + 2] / scale[2 * b]);
    }
    // The two heads' 1x1 convolutions as one: policy in channels 0..26, value in 27..53.
    FoldedConv heads{POLICY_LABELS + VALUE_CHANNELS, m.arch.channels, 1, m.policy_conv.weight, m.policy_conv.bias};
    heads.weight.insert(heads.weight.end(), m.value_conv.weight.begin(), m.value_conv.weight.end());
    heads.bias.insert(heads.bias.end(), m.value_conv.bias.begin(), m.value_conv.bias.end());
    heads_ = pack(heads, channels_, scale.back(), 1.0f, false);
    fc1_t_.reset(size_t(POLICY_SIZE) * VALUE_HIDDEN);
    for (int o = 0; o < VALUE_HIDDEN; ++o)
      for (int i = 0; i < POLICY_SIZE; ++i)
        fc1_t_.data()[int64_t(i) * VALUE_HIDDEN + o] = m.value_fc1_weight[int64_t(o) * POLICY_SIZE + i];

    const size_t positions = size_t(max_batch_) * PADDED_SQUARES;
    h_.reset(positions * channels_);
    if (int8_) {
      input8_.reset(positions * INPUT_STRIDE);
      h8_.reset(positions * channels_);
      t8_.reset(positions * channels_);
    } else if (bf16_) {
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
    run_batch(Input{features, nullptr}, n, policy_logits, value);
  }
  // In int8 the bits go straight into the u8 input planes; else the default expands them to floats.
  void evaluate_packed(const uint8_t* packed, int n, float* policy_logits, float* value) override {
    if (!int8_) return Evaluator::evaluate_packed(packed, n, policy_logits, value);
    run_batch(Input{nullptr, packed}, n, policy_logits, value);
  }

  int max_batch() const override { return max_batch_; }
  std::string name() const override {
    const std::string kernels =
        int8_ ? std::string(kernels::isa_name(set_.isa)) + " and " + int8_->name : kernels::isa_name(set_.isa);
    return "simd (own " + kernels + " kernels, " + std::to_string(pool_.size()) + " threads, " +
           (int8_   ? "int8"
            : bf16_ ? "bf16"
                    : "fp32") +
           ")";
  }

  // fp32 only: the largest value the stem and each block's two convolutions write, over `count`
  // positions of packed planes (the int8 scales).
  std::vector<float> activation_maxima(const uint8_t* packed, int count) {
    std::vector<float> maxima(1 + 2 * conv1_.size(), 0.0f);
    maxima_ = &maxima;
    std::vector<float> policy(size_t(max_batch_) * POLICY_SIZE), value(max_batch_);
    for (int start = 0; start < count; start += max_batch_) {
      const int n = std::min(max_batch_, count - start);
      evaluate_packed(packed + size_t(start) * PACKED_INPUT_BYTES, n, policy.data(), value.data());
    }
    maxima_ = nullptr;
    return maxima;
  }

 private:
  // A convolution's weights in the kernels' layout; input channels padded to an even count (bf16
  // pairs), output channels to channels_ (or the heads' 64).
  // In int8, for an input at src_scale and an output at dst_scale (u8 units per unit; 1 for fp32).
  Conv pack(const FoldedConv& c, int in_stride, float src_scale, float dst_scale, bool bf16_capable = true) {
    Conv p;
    const bool bf16 = bf16_ && bf16_capable;
    p.cin = int8_ ? round_up(c.in_channels, 4) : bf16 ? round_up(c.in_channels, 2) : c.in_channels;
    p.taps = c.kernel * c.kernel;
    if (p.cin > in_stride) throw std::logic_error("simd backend: input channels exceed the stride");
    const int cout = round_up(c.out_channels, kernels::CHANNEL_ALIGN);
    if (int8_) {
      std::vector<float> weight_scale;
      auto w = kernels::pack_conv_weights_s8(c.weight.data(), c.out_channels, c.in_channels, c.kernel, cout, p.cin,
                                             int8_->block, weight_scale);
      p.weight_s8.reset(w.size());
      std::copy(w.begin(), w.end(), p.weight_s8.data());
      p.bias.reset(cout);
      p.scale.reset(cout);
      for (int o = 0; o < c.out_channels; ++o) {
        p.bias.data()[o] = c.bias[o] * src_scale * weight_scale[o];
        p.scale.data()[o] = dst_scale / (src_scale * weight_scale[o]);
      }
      return p;
    }
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
    ConvArgs a = args(c, in, in_stride, cout, act);
    a.residual = residual;
    a.out = out;
    a.out_bf16 = out16;
    auto kernel = c.weight.empty() ? set_.conv_bf16 : set_.conv;
    run(set_.conv_items(n, cout), split, [&](int64_t begin, int64_t end) { kernel(a, n, begin, end); });
  }
  // The same in int8: from u8 `in` into out (fp32) and/or out8 (u8), adding residual8 (u8, times
  // residual_scale) when given.
  void conv_int8(const Conv& c, const uint8_t* in, int in_stride, int cout, float* out, uint8_t* out8,
                 const uint8_t* residual8, float residual_scale, Act act, int n, bool split) {
    ConvArgs a = args(c, in, in_stride, cout, act);
    a.weight = c.weight_s8.data();
    a.scale = c.scale.data();
    a.residual_u8 = residual8;
    a.residual_scale = residual_scale;
    a.out = out;
    a.out_u8 = out8;
    run(int8_->conv_items(n, cout), split, [&](int64_t begin, int64_t end) { int8_->conv(a, n, begin, end); });
  }
  static ConvArgs args(const Conv& c, const void* in, int in_stride, int cout, Act act) {
    ConvArgs a;
    a.in = in;
    a.in_stride = in_stride;
    a.cin = c.cin;
    a.taps = c.taps;
    a.weight = c.weight.empty() ? static_cast<const void*>(c.weight_bf16.data()) : c.weight.data();
    a.bias = c.bias.data();
    a.cout = cout;
    a.out_stride = cout;
    a.act = act;
    return a;
  }

  // The records of a maxima pass (activation_maxima) take the largest of each layer's output.
  void note_maximum(size_t layer, const float* out, int n) {
    if (!maxima_) return;
    const float most = *std::max_element(out, out + int64_t(n) * PADDED_SQUARES * channels_);
    std::lock_guard<std::mutex> lock(maxima_mutex_);
    (*maxima_)[layer] = std::max((*maxima_)[layer], most);
  }

  // A batch's input: float planes or packed bits (int8 only).
  struct Input {
    const float* features;
    const uint8_t* packed;
  };
  void run_batch(Input in, int n, float* policy_logits, float* value) {
    check_batch_size(n, max_batch_);
    const int threads = pool_.size();
    if (int8_) std::fill_n(saturated_.begin(), n, 0);
    if (threads == 1 || n % threads == 0 || n >= 4 * threads) {
      pool_.parallel_for(n,
                         [&](int64_t b0, int64_t b1) { forward(in, int(b0), int(b1), policy_logits, value, false); });
    } else {
      forward(in, 0, n, policy_logits, value, true);
    }
    for (int p = 0; p < n && int8_; ++p) {
      if (saturated_[p] <= SATURATION_LIMIT) continue;
      float* logits = policy_logits + int64_t(p) * POLICY_SIZE;
      if (in.packed) fp32_->evaluate_packed(in.packed + int64_t(p) * PACKED_INPUT_BYTES, 1, logits, value + p);
      else fp32_->evaluate(in.features + int64_t(p) * INPUT_SIZE, 1, logits, value + p);
    }
  }

  // Adds to saturated_ each position's u8 activations at 255 in `out` (positions [b0, b0 + n), stride c).
  void count_saturated(const uint8_t* out, int c, int b0, int n) {
    const size_t per_position = size_t(PADDED_SQUARES) * c;
    for (int p = 0; p < n; ++p) saturated_[b0 + p] += kernels::count_saturated(out + p * per_position, per_position);
  }

  // The network on positions [b0, b1).
  void forward(Input input, int b0, int b1, float* policy_logits, float* value, bool split) {
    const int n = b1 - b0;
    const int64_t first = int64_t(b0) * PADDED_SQUARES;
    const int c = channels_;
    // Input planes (NCHW floats, or bits) to padded NHWC: cleared, then the nonzero values (most
    // planes are mostly zero) written, reading the planes in order.
    run(n, split, [&](int64_t p0, int64_t p1) {
      for (int64_t p = b0 + p0; p < b0 + p1; ++p) {
        const int64_t at = p * PADDED_SQUARES * INPUT_STRIDE;
        if (int8_) std::fill_n(input8_.data() + at, PADDED_SQUARES * INPUT_STRIDE, uint8_t(0));
        else if (bf16_) std::fill_n(input16_.data() + at, PADDED_SQUARES * INPUT_STRIDE, uint16_t(0));
        else std::fill_n(input32_.data() + at, PADDED_SQUARES * INPUT_STRIDE, 0.0f);
        if (input.packed) {
          const uint8_t* bits = input.packed + p * PACKED_INPUT_BYTES;
          for (int w = 0; w < PACKED_INPUT_BYTES / 8; ++w) {
            uint64_t word;
            static_assert(std::endian::native == std::endian::little,
                          "bit i of the planes is bit i % 64 of word i / 64");
            std::memcpy(&word, bits + 8 * w, 8);
            for (; word; word &= word - 1) {
              const int i = 64 * w + std::countr_zero(word);  // plane i / 81, square i % 81 (pad bits are zero)
              input8_.data()[at + kernels::padded_square(i % SQUARES) * INPUT_STRIDE + i / SQUARES] = 1;
            }
          }
          continue;
        }
        const float* x = input.features + p * INPUT_SIZE;
        for (int i = 0; i < INPUT_PLANES; ++i)
          for (int sq = 0; sq < SQUARES; ++sq)
            if (const float v = x[i * SQUARES + sq]; v != 0.0f) {
              const int64_t to = at + kernels::padded_square(sq) * INPUT_STRIDE + i;
              if (int8_) input8_.data()[to] = uint8_t(std::clamp(std::lround(v), 0L, 255L));
              else if (bf16_) input16_.data()[to] = to_bf16(v);
              else input32_.data()[to] = v;
            }
      }
    });

    float* h = h_.data() + first * c;
    if (int8_) {
      uint8_t* h8 = h8_.data() + first * c;
      uint8_t* t8 = t8_.data() + first * c;
      conv_int8(stem_, input8_.data() + first * INPUT_STRIDE, INPUT_STRIDE, c, nullptr, h8, nullptr, 1, act_, n, split);
      count_saturated(h8, c, b0, n);
      for (size_t b = 0; b < conv1_.size(); ++b) {
        conv_int8(conv1_[b], h8, c, c, nullptr, t8, nullptr, 1, act_, n, split);
        count_saturated(t8, c, b0, n);
        conv_int8(conv2_[b], t8, c, c, nullptr, h8, h8, skip_scale_[b], act_, n, split);
        count_saturated(h8, c, b0, n);
      }
      float* heads = heads_out_.data() + first * HEAD_CHANNELS;
      conv_int8(heads_, h8, c, HEAD_CHANNELS, heads, nullptr, nullptr, 1, Act::NONE, n, split);
    } else if (bf16_) {
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
      note_maximum(0, h, n);
      for (size_t b = 0; b < conv1_.size(); ++b) {
        conv(conv1_[b], h, c, c, t, nullptr, nullptr, act_, n, split);
        note_maximum(2 * b + 1, t, n);
        conv(conv2_[b], t, c, c, h, nullptr, h, act_, n, split);
        note_maximum(2 * b + 2, h, n);
      }
    }
    float* heads = heads_out_.data() + first * HEAD_CHANNELS;
    if (!int8_) conv(heads_, h, c, HEAD_CHANNELS, heads, nullptr, nullptr, Act::NONE, n, split);

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
  const kernels::Int8Kernels* int8_ = nullptr;  // in int8 only
  int max_batch_, channels_;
  bool bf16_ = false;
  Act act_ = Act::RELU;
  ThreadPool pool_;
  Conv stem_, heads_;
  std::vector<Conv> conv1_, conv2_;
  std::vector<float> skip_scale_;  // per block: the output's scale over the input's (int8)
  Aligned<float> fc1_t_;
  Aligned<float> input32_, h_, t_, heads_out_, value_planes_, hidden_;
  Aligned<uint16_t> input16_, h16_, t16_;
  Aligned<uint8_t> input8_, h8_, t8_;
  std::vector<float>* maxima_ = nullptr;  // during activation_maxima
  std::unique_ptr<SimdEvaluator> fp32_;   // int8: the positions that saturate (SATURATION_LIMIT), again in fp32
  std::vector<int> saturated_;            // int8: per position of a batch, its activations at 255
  std::mutex maxima_mutex_;
};

}  // namespace

std::unique_ptr<Evaluator> make_simd_evaluator(const FoldedModel& model, const BackendOptions& options) {
  return std::make_unique<SimdEvaluator>(model, options);
}

}  // namespace jiriki::nn
