// The onednn backend: oneDNN primitives on the BN-folded network.
//
// Precision: fp32, or bf16 (weights and the residual stream in bf16, accumulation, biases and the
// heads' outputs in fp32), which computes the convolutions about twice as fast where the CPU has
// AVX-512 bf16 instructions (AMD Zen 4, Intel Cooper Lake and later); AUTO takes bf16 there, fp32
// elsewhere.
//
// int8 (ReLU networks only): weights in s8 with a scale per output channel, the activations of the
// trunk and the value head's planes in u8 with one scale per convolution's output, accumulation in
// s32; the policy logits and the value head's hidden layer come out in fp32. The activation scales
// are calibrated when the evaluator is made: the network plays a few games against itself in fp32
// (each move drawn from its policy) and the largest value each of those convolutions writes over
// those positions maps to 255. The input planes are 0 or 1, exact in u8. A layer then computes
//   dst = relu(out_scale[oc] * (acc + bias'[oc]) + sum_scale * dst),
// with bias' = bias * src_scale * weight_scale[oc] and out_scale = dst_scale / (src_scale *
// weight_scale[oc]); the in-place skip of a block is rescaled from the block input's scale to its
// output's (sum_scale).
//
// Each convolution carries its bias and activation as post-ops, and the second convolution of a
// residual block adds the skip with a sum post-op: it writes into the buffer that holds the block's
// input, so a block is two primitive calls and no extra pass over memory. oneDNN chooses the
// activation layout for the stem's output (channels-last on AVX-512, blocked nChw8c on AVX2) and
// every later layer keeps it; only the input and the two heads' outputs are reordered to or from
// NCHW. The per-logit policy bias and the value head's last layer (256 -> 1) run on the host.
//
// Primitives depend on the batch size, so they are built once per size and cached ("plans").
// Buffers are shared by all plans and sized for max_batch at construction; reordered weights are
// shared too, one copy per layout asked for. Scratchpads are ours (scratchpad_mode::user), not the
// library's per-thread one, so that an evaluator may move between threads.
#if JIRIKI_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "common/cpus.h"
#include "nn/backend.h"
#include "nn/cpu_kernels.h"
#include "nn/features.h"
#include "nn/layers.h"

namespace jiriki::nn {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using DataType = memory::data_type;
constexpr auto F32 = DataType::f32;

memory::desc md(const memory::dims& dims, Tag tag, DataType type = F32) { return memory::desc(dims, type, tag); }

enum class Arith { FP32, BF16, INT8 };

// Weights and bias of one layer in their file layout, plus copies in the layouts primitives chose.
// In int8, `user` holds the s8 weights, `bias` the rescaled bias and out_scales the output scales.
struct LayerWeights {
  memory user, bias;
  std::vector<std::pair<memory::desc, memory>> by_layout;
  std::vector<int8_t> quantized;
  std::vector<float> scaled_bias, out_scales;
};

// 255 over the largest value an activation takes (u8 units per unit).
float u8_scale(float max_value) { return max_value > 0 ? 255.0f / max_value : 1.0f; }

// The primitives of one batch size, with their arguments bound.
struct Plan {
  memory input, policy_out;     // user buffers; data handles set on each call
  std::vector<memory> scratch;  // scratchpads, all on the evaluator's one scratch buffer
  size_t scratch_bytes = 0;
  std::vector<std::pair<dnnl::primitive, std::unordered_map<int, memory>>> steps;
  std::vector<size_t> u8_steps;  // the convolutions with u8 outputs in int8: stem, each block's two, value head
  bool u8_nhwc_input = false;    // steps[0] reorders the input to u8 NHWC on the input buffer (int8)
};

class CpuEvaluator : public Evaluator {
 public:
  CpuEvaluator(const FoldedModel& m, const BackendOptions& o)
      : m_(m), eng_(dnnl::engine::kind::cpu, 0), stream_(eng_), max_batch_(o.max_batch) {
    if (o.precision == Precision::FP16)
      throw std::invalid_argument("the onednn backend computes in fp32, bf16 or int8, not fp16");
    if (o.precision == Precision::INT8 && m_.arch.activation != Activation::RELU)
      throw std::invalid_argument("the onednn backend computes int8 only for ReLU networks");
    const bool relu = m_.arch.activation == Activation::RELU, automatic = o.precision == Precision::AUTO;
    arith_ = o.precision == Precision::INT8 || (automatic && relu && cpu_has_native_int8()) ? Arith::INT8
             : o.precision == Precision::BF16 || (automatic && cpu_has_native_bf16())       ? Arith::BF16
                                                                                            : Arith::FP32;
    act_type_ = arith_ == Arith::INT8 ? DataType::u8 : arith_ == Arith::BF16 ? DataType::bf16 : F32;
    threads_ = o.threads > 0 ? o.threads : usable_cpus().count;
    const int c = m_.arch.channels;
    // Activation scales of the u8 outputs: h0 (stem), then t_b and h_b+1 for each block b, then the
    // value head's planes.
    const int blocks = m_.arch.blocks;
    std::vector<float> scale(2 + 2 * blocks, 1.0f);
    if (arith_ == Arith::INT8) {
      const std::vector<float> maxima = calibrated_maxima<CpuEvaluator>("onednn", m_, threads_);
      for (size_t i = 0; i < scale.size(); ++i) scale[i] = u8_scale(maxima[i]);
    }
    if (arith_ == Arith::INT8) {
      fp32_ = std::make_unique<CpuEvaluator>(m, saturation_fallback_options(o));
      saturated_.assign(size_t(max_batch_), 0);
    }
    const float trunk_out = scale[2 * blocks], value_planes = scale.back();
    stem_ = conv_weights(m_.stem, 1.0f, scale[0]);
    for (int b = 0; b < m_.arch.blocks; ++b) {
      conv1_.push_back(conv_weights(m_.block_conv1[b], scale[2 * b], scale[2 * b + 1]));
      conv2_.push_back(conv_weights(m_.block_conv2[b], scale[2 * b + 1], scale[2 * b + 2]));
      skip_scale_.push_back(scale[2 * b + 2] / scale[2 * b]);
    }
    policy_ = conv_weights(m_.policy_conv, trunk_out, 1.0f);
    value_ = conv_weights(m_.value_conv, trunk_out, value_planes);
    fc1_ =
        layer_weights({VALUE_HIDDEN, POLICY_SIZE}, Tag::oi, m_.value_fc1_weight, m_.value_fc1_bias, value_planes, 1.0f);
    // Room for any blocked layout: channels padded to a multiple of 16.
    auto room = [&](int channels) { return size_t(max_batch_) * ((channels + 15) / 16 * 16) * SQUARES; };
    input_.resize(room(INPUT_PLANES));
    h_.resize(room(c));
    t_.resize(room(c));
    policy_buf_.resize(room(POLICY_LABELS));
    value_buf_.resize(room(VALUE_CHANNELS));
    value_flat_.resize(size_t(max_batch_) * POLICY_SIZE);
    hidden_.resize(size_t(max_batch_) * VALUE_HIDDEN);
  }

  void evaluate(const float* features, int n, float* policy_logits, float* value) override {
    Plan& p = bound_plan(features, n, policy_logits);
    run_steps(p, 0, n);
    finish_heads(n, policy_logits, value);
    for (int b = 0; b < n && fp32_; ++b)
      if (saturated_[b] > SATURATION_LIMIT)
        fp32_->evaluate(features + int64_t(b) * INPUT_SIZE, 1, policy_logits + int64_t(b) * POLICY_SIZE, value + b);
  }

  // In int8, where the stem reads u8 NHWC, the bits go straight there (only the set ones written),
  // in place of expanding them to floats and reordering.
  void evaluate_packed(const uint8_t* packed, int n, float* policy_logits, float* value) override {
    Plan& p = bound_plan(nullptr, n, policy_logits);
    if (!p.u8_nhwc_input) return Evaluator::evaluate_packed(packed, n, policy_logits, value);
    uint8_t* planes = reinterpret_cast<uint8_t*>(input_.data());
    std::fill(planes, planes + size_t(n) * INPUT_SIZE, uint8_t(0));
    for (int b = 0; b < n; ++b) {
      const uint8_t* bits = packed + size_t(b) * PACKED_INPUT_BYTES;
      uint8_t* out = planes + size_t(b) * INPUT_SIZE;
      for (int w = 0; w < PACKED_INPUT_BYTES / 8; ++w) {
        uint64_t word;
        static_assert(std::endian::native == std::endian::little, "bit i of the planes is bit i % 64 of word i / 64");
        std::memcpy(&word, bits + 8 * w, 8);
        for (; word; word &= word - 1) {
          const int i = 64 * w + std::countr_zero(word);  // plane i / 81, square i % 81 (pad bits are zero)
          out[(i % SQUARES) * INPUT_PLANES + i / SQUARES] = 1;
        }
      }
    }
    run_steps(p, 1, n);
    finish_heads(n, policy_logits, value);
    for (int b = 0; b < n && fp32_; ++b)
      if (saturated_[b] > SATURATION_LIMIT)
        fp32_->evaluate_packed(packed + int64_t(b) * PACKED_INPUT_BYTES, 1, policy_logits + int64_t(b) * POLICY_SIZE,
                               value + b);
  }

  // fp32 only: the largest value each convolution with a u8 output in int8 writes (the stem, each
  // block's two, the value head's) over `count` positions of packed planes.
  std::vector<float> activation_maxima(const uint8_t* packed, int count) {
    std::vector<float> maxima(2 + 2 * size_t(m_.arch.blocks), 0.0f);
    std::vector<float> planes(size_t(max_batch_) * INPUT_SIZE), policy(size_t(max_batch_) * POLICY_SIZE);
    for (int next_start = 0; next_start < count; next_start += max_batch_) {
      // A last batch shorter than max_batch starts earlier instead, so that one plan serves every
      // call (positions counted twice change no maximum).
      const int start = std::max(0, std::min(next_start, count - max_batch_)), n = std::min(max_batch_, count);
      unpack_features(packed + size_t(start) * PACKED_INPUT_BYTES, n, planes.data());
      Plan& p = bound_plan(planes.data(), n, policy.data());
      for (size_t i = 0, next = 0; i < p.steps.size(); ++i) {
        p.steps[i].first.execute(stream_, p.steps[i].second);
        if (next < p.u8_steps.size() && p.u8_steps[next] == i) {
          stream_.wait();
          const memory& dst = p.steps[i].second.at(DNNL_ARG_DST);
          const float* v = static_cast<const float*>(dst.get_data_handle());
          const float most = *std::max_element(v, v + dst.get_desc().get_size() / sizeof(float));
          maxima[next] = std::max(maxima[next], most);
          ++next;
        }
      }
      stream_.wait();
    }
    return maxima;
  }

 private:
  // Runs the plan's steps from `first`; in int8 also counts, for each of the n positions, its
  // activations at 255 in the u8 outputs (saturated_).
  void run_steps(Plan& p, size_t first, int n) {
    if (arith_ != Arith::INT8) {
      for (size_t i = first; i < p.steps.size(); ++i) p.steps[i].first.execute(stream_, p.steps[i].second);
      stream_.wait();
      return;
    }
    std::fill_n(saturated_.begin(), n, 0);
    for (size_t i = first, next = 0; i < p.steps.size(); ++i) {
      p.steps[i].first.execute(stream_, p.steps[i].second);
      while (next < p.u8_steps.size() && p.u8_steps[next] < i) ++next;
      if (next == p.u8_steps.size() || p.u8_steps[next] != i) continue;
      stream_.wait();
      // Whatever the layout oneDNN chose, a position's activations are one contiguous block.
      const memory& dst = p.steps[i].second.at(DNNL_ARG_DST);
      const size_t per_position = dst.get_desc().get_size() / size_t(n);
      const uint8_t* a = static_cast<const uint8_t*>(dst.get_data_handle());
      for (int b = 0; b < n; ++b) saturated_[b] += kernels::count_saturated(a + b * per_position, per_position);
    }
    stream_.wait();
  }

  // The plan of batch size n with this call's input, policy output and scratchpad bound.
  Plan& bound_plan(const float* features, int n, float* policy_logits) {
    check_batch_size(n, max_batch_);
#ifdef _OPENMP
    omp_set_num_threads(threads_);  // per calling thread; also read when primitives are created
#endif
    auto it = plans_.find(n);
    if (it == plans_.end()) it = plans_.emplace(n, make_plan(n)).first;
    Plan& p = it->second;
    if (p.scratch_bytes > scratch_.size()) scratch_.resize(p.scratch_bytes);
    for (memory& m : p.scratch) m.set_data_handle(scratch_.data());
    p.input.set_data_handle(const_cast<float*>(features));
    p.policy_out.set_data_handle(policy_logits);
    return p;
  }

  // The per-logit policy bias and the value head's last layer, on the host.
  void finish_heads(int n, float* policy_logits, float* value) const {
    for (int b = 0; b < n; ++b) {
      float* logits = policy_logits + int64_t(b) * POLICY_SIZE;
      for (int i = 0; i < POLICY_SIZE; ++i) logits[i] += m_.policy_bias[i];
      double acc = m_.value_fc2_bias[0];
      const float* h = hidden_.data() + int64_t(b) * VALUE_HIDDEN;
      for (int i = 0; i < VALUE_HIDDEN; ++i) acc += double(m_.value_fc2_weight[i]) * h[i];
      value[b] = sigmoid(float(acc));
    }
  }

 public:
  int max_batch() const override { return max_batch_; }
  std::string name() const override {
    const dnnl_version_t* v = dnnl_version();
    const char* arith = arith_ == Arith::INT8 ? "int8" : arith_ == Arith::BF16 ? "bf16" : "fp32";
    return "onednn (oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + ", " +
           std::to_string(threads_) + " threads, " + arith + ")";
  }

 private:
  // A layer's weights (`outputs` rows of `dims` in layout `tag`) and bias; in int8 quantized for an
  // input at src_scale and an output at dst_scale (u8 units per unit; 1 for fp32 outputs).
  LayerWeights layer_weights(const memory::dims& dims, Tag tag, std::vector<float>& weight, std::vector<float>& bias,
                             float src_scale, float dst_scale) {
    LayerWeights w;
    const size_t outputs = bias.size();
    if (arith_ != Arith::INT8) {
      w.user = memory(md(dims, tag), eng_, weight.data());
      w.bias = memory(md({memory::dim(outputs)}, Tag::x), eng_, bias.data());
      return w;
    }
    const size_t per_output = weight.size() / outputs;
    w.quantized.resize(weight.size());
    w.scaled_bias.resize(outputs);
    w.out_scales.resize(outputs);
    for (size_t o = 0; o < outputs; ++o) {
      const float* row = weight.data() + o * per_output;
      float largest = 0.0f;
      for (size_t i = 0; i < per_output; ++i) largest = std::max(largest, std::abs(row[i]));
      const float weight_scale = largest > 0 ? 127.0f / largest : 1.0f;
      for (size_t i = 0; i < per_output; ++i)
        w.quantized[o * per_output + i] = int8_t(std::lround(row[i] * weight_scale));
      w.scaled_bias[o] = bias[o] * src_scale * weight_scale;
      w.out_scales[o] = dst_scale / (src_scale * weight_scale);
    }
    w.user = memory(md(dims, tag, DataType::s8), eng_, w.quantized.data());
    w.bias = memory(md({memory::dim(outputs)}, Tag::x), eng_, w.scaled_bias.data());
    return w;
  }

  LayerWeights conv_weights(FoldedConv& conv, float src_scale, float dst_scale) {
    return layer_weights({conv.out_channels, conv.in_channels, conv.kernel, conv.kernel}, Tag::oihw, conv.weight,
                         conv.bias, src_scale, dst_scale);
  }

  // The weights in the layout `want`, reordered once and kept.
  memory weights_as(LayerWeights& w, const memory::desc& want) {
    if (want == w.user.get_desc()) return w.user;
    for (auto& [d, mem] : w.by_layout)
      if (d == want) return mem;
    memory mem(want, eng_);
    dnnl::reorder(w.user, mem).execute(stream_, w.user, mem);
    stream_.wait();
    w.by_layout.emplace_back(want, mem);
    return mem;
  }

  // A memory in `desc` on one of the shared buffers, checking that it fits.
  memory on_buffer(const memory::desc& desc, std::vector<float>& buf) {
    if (desc.get_size() > buf.size() * sizeof(float))
      throw std::runtime_error("onednn backend: oneDNN chose a layout larger than the buffers allow");
    return memory(desc, eng_, buf.data());
  }

  // The activation, after adding the skip (times skip_scale) when asked.
  dnnl::post_ops activation_ops(bool add_skip, float skip_scale = 1.0f) const {
    dnnl::post_ops ops;
    if (add_skip) ops.append_sum(skip_scale);
    auto alg = m_.arch.activation == Activation::SWISH ? dnnl::algorithm::eltwise_swish : dnnl::algorithm::eltwise_relu;
    ops.append_eltwise(1.0f, alg, m_.arch.activation == Activation::SWISH ? 1.0f : 0.0f, 0.0f);
    return ops;
  }

  // The primitive descriptor of a convolution between the given layouts (Tag::any: oneDNN chooses),
  // its weights in the precision of the activations (s8 in int8, with w's output scales).
  dnnl::convolution_forward::primitive_desc conv_pd(const FoldedConv& conv, const LayerWeights& w,
                                                    const memory::desc& src, const memory::desc& dst,
                                                    const dnnl::post_ops* ops) {
    const memory::dim pad = conv.kernel / 2;
    const DataType weight_type = arith_ == Arith::INT8 ? DataType::s8 : act_type_;
    dnnl::convolution_forward::desc d(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
        md({conv.out_channels, conv.in_channels, conv.kernel, conv.kernel}, Tag::any, weight_type),
        md({conv.out_channels}, Tag::x), dst, {1, 1}, {pad, pad}, {pad, pad});
    try {
      return dnnl::convolution_forward::primitive_desc(d, attrs(ops, w.out_scales), eng_);
    } catch (const dnnl::error& e) {
      if (arith_ == Arith::FP32) throw;
      throw std::runtime_error(std::string("onednn backend: oneDNN has no ") +
                               (arith_ == Arith::INT8 ? "int8" : "bf16") + " convolution on this CPU (" + e.what() +
                               "); use fp32");
    }
  }

  // User scratchpad, the post-ops, and per-output-channel scales when given (int8).
  static dnnl::primitive_attr attrs(const dnnl::post_ops* ops, const std::vector<float>& out_scales = {}) {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (ops) attr.set_post_ops(*ops);
    if (!out_scales.empty()) attr.set_output_scales(1 << 1, out_scales);  // dimension 1: output channels
    return attr;
  }

  // Appends a primitive with its arguments, giving it the shared scratchpad when it needs one.
  void add_step(Plan& p, const dnnl::primitive_desc_base& pd, std::unordered_map<int, memory> args) {
    const memory::desc scratch = pd.scratchpad_desc();
    if (scratch.get_size() > 0) {
      p.scratch.emplace_back(scratch, eng_, nullptr);
      p.scratch_bytes = std::max(p.scratch_bytes, scratch.get_size());
      args[DNNL_ARG_SCRATCHPAD] = p.scratch.back();
    }
    p.steps.emplace_back(dnnl::primitive(pd.get()), std::move(args));
  }

  void add_conv(Plan& p, const dnnl::convolution_forward::primitive_desc& pd, LayerWeights& w, const memory& src,
                const memory& dst, bool u8_output = false) {
    if (u8_output) p.u8_steps.push_back(p.steps.size());
    add_step(p, pd,
             {{DNNL_ARG_SRC, src},
              {DNNL_ARG_WEIGHTS, weights_as(w, pd.weights_desc())},
              {DNNL_ARG_BIAS, w.bias},
              {DNNL_ARG_DST, dst}});
  }

  void add_reorder(Plan& p, const memory& from, const memory& to) {
    add_step(p, dnnl::reorder::primitive_desc(from, to, attrs(nullptr)), {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
  }

  Plan make_plan(int n) {
    Plan p;
    const memory::dim c = m_.arch.channels;
    const memory::dims in_dims{n, INPUT_PLANES, 9, 9}, h_dims{n, c, 9, 9};
    const memory::dims policy_dims{n, POLICY_LABELS, 9, 9}, value_dims{n, VALUE_CHANNELS, 9, 9};
    const auto act = activation_ops(false);

    p.input = memory(md(in_dims, Tag::nchw), eng_, nullptr);
    // The residual stream (and the stem's input) in the activations' precision; the heads' outputs in fp32.
    auto stem_pd = conv_pd(m_.stem, stem_, md(in_dims, Tag::any, act_type_), md(h_dims, Tag::any, act_type_), &act);
    memory stem_src = p.input;
    if (stem_pd.src_desc() != p.input.get_desc()) {
      stem_src = on_buffer(stem_pd.src_desc(), input_);
      add_reorder(p, p.input, stem_src);
      p.u8_nhwc_input = stem_src.get_desc() == md(in_dims, Tag::nhwc, DataType::u8);
    }
    const memory::desc hd = stem_pd.dst_desc();  // the layout of the residual stream
    memory h = on_buffer(hd, h_), t = on_buffer(hd, t_);
    add_conv(p, stem_pd, stem_, stem_src, h, true);
    for (int b = 0; b < m_.arch.blocks; ++b) {
      const auto act_skip = activation_ops(true, skip_scale_[b]);
      add_conv(p, conv_pd(m_.block_conv1[b], conv1_[b], hd, hd, &act), conv1_[b], h, t, true);
      add_conv(p, conv_pd(m_.block_conv2[b], conv2_[b], hd, hd, &act_skip), conv2_[b], t, h, true);  // h += conv(t)
    }

    p.policy_out = memory(md(policy_dims, Tag::nchw), eng_, nullptr);
    auto policy_pd = conv_pd(m_.policy_conv, policy_, hd, md(policy_dims, Tag::any), nullptr);
    if (policy_pd.dst_desc() == p.policy_out.get_desc()) {
      add_conv(p, policy_pd, policy_, h, p.policy_out);
    } else {
      memory blocked = on_buffer(policy_pd.dst_desc(), policy_buf_);
      add_conv(p, policy_pd, policy_, h, blocked);
      add_reorder(p, blocked, p.policy_out);
    }

    // The value planes in u8 (int8) or fp32, NCHW, which fc1 reads as [n][2187].
    const DataType value_type = arith_ == Arith::INT8 ? DataType::u8 : F32;
    memory value_flat = on_buffer(md(value_dims, Tag::nchw, value_type), value_flat_);
    auto value_pd = conv_pd(m_.value_conv, value_, hd, md(value_dims, Tag::any, value_type), &act);
    if (value_pd.dst_desc() == value_flat.get_desc()) {
      add_conv(p, value_pd, value_, h, value_flat, true);
    } else {
      memory blocked = on_buffer(value_pd.dst_desc(), value_buf_);
      add_conv(p, value_pd, value_, h, blocked, true);
      add_reorder(p, blocked, value_flat);
    }

    // fc1 (s8 weights in int8) to fp32; fc2 (256 -> 1) runs on the host.
    memory fc_in = on_buffer(md({n, POLICY_SIZE}, Tag::nc, value_type), value_flat_);
    memory hidden = on_buffer(md({n, VALUE_HIDDEN}, Tag::nc), hidden_);
    dnnl::inner_product_forward::desc fc1(
        dnnl::prop_kind::forward_inference, fc_in.get_desc(),
        md({VALUE_HIDDEN, POLICY_SIZE}, Tag::any, arith_ == Arith::INT8 ? DataType::s8 : F32),
        md({VALUE_HIDDEN}, Tag::x), hidden.get_desc());
    dnnl::inner_product_forward::primitive_desc fc1_pd(fc1, attrs(&act, fc1_.out_scales), eng_);
    add_step(p, fc1_pd,
             {{DNNL_ARG_SRC, fc_in},
              {DNNL_ARG_WEIGHTS, weights_as(fc1_, fc1_pd.weights_desc())},
              {DNNL_ARG_BIAS, fc1_.bias},
              {DNNL_ARG_DST, hidden}});
    return p;
  }

  FoldedModel m_;
  dnnl::engine eng_;
  dnnl::stream stream_;
  int max_batch_, threads_ = 1;
  Arith arith_ = Arith::FP32;
  DataType act_type_ = F32;  // the trunk's activations
  LayerWeights stem_, policy_, value_, fc1_;
  std::vector<LayerWeights> conv1_, conv2_;
  std::vector<float> skip_scale_;       // per block: the output's scale over the input's (1 but in int8)
  std::unique_ptr<CpuEvaluator> fp32_;  // int8: the positions that saturate, again in fp32
  std::vector<int> saturated_;          // int8: per position of a batch, its activations at 255
  std::vector<float> input_, h_, t_, policy_buf_, value_buf_, value_flat_, hidden_;
  std::vector<uint8_t> scratch_;
  std::map<int, Plan> plans_;
};

}  // namespace

bool cpu_has_native_bf16() {
  const auto bf16 = unsigned(dnnl::cpu_isa::avx512_core_bf16);
  return (unsigned(dnnl::get_effective_cpu_isa()) & bf16) == bf16;
}

bool cpu_has_native_int8() {
  // oneDNN's ISA values are bit sets, each including those it extends: AMX includes AVX-512 VNNI,
  // which includes AVX2. Without VNNI oneDNN multiplies u8 by s8 with AVX2's vpmaddubsw, still 2.2 to
  // 2.4 times fp32's playouts a second on an AVX2-only processor (docs/performance.md).
  const auto avx2 = unsigned(dnnl::cpu_isa::avx2);
  return (unsigned(dnnl::get_effective_cpu_isa()) & avx2) == avx2;
}

std::unique_ptr<Evaluator> make_onednn_evaluator(const FoldedModel& model, const BackendOptions& options) {
  return std::make_unique<CpuEvaluator>(model, options);
}

}  // namespace jiriki::nn
#endif  // JIRIKI_HAVE_DNNL
