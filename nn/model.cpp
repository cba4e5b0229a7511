// The network's tensors, their names, deterministic initialisation and batch-norm folding.
#include "nn/model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "common/splitmix.h"

namespace jiriki::nn {

const char* activation_name(Activation a) { return a == Activation::SWISH ? "swish" : "relu"; }

Activation parse_activation(const std::string& name) {
  if (name == "relu") return Activation::RELU;
  if (name == "swish") return Activation::SWISH;
  throw std::invalid_argument("unknown activation '" + name + "' (expected relu or swish)");
}

int64_t macs_per_position(const Architecture& a) {
  int64_t c = a.channels;
  int64_t conv3 = int64_t(SQUARES) * 9 * c;                     // a 3x3 convolution to C channels, per input channel
  return conv3 * INPUT_PLANES                                   // stem
         + conv3 * c * 2 * a.blocks                             // residual blocks
         + int64_t(SQUARES) * c * POLICY_LABELS                 // policy 1x1
         + int64_t(SQUARES) * c * VALUE_CHANNELS                // value 1x1
         + int64_t(POLICY_SIZE) * VALUE_HIDDEN + VALUE_HIDDEN;  // fc1, fc2
}

int64_t tensor_floats(const Architecture& a) {
  const int64_t c = a.channels;
  const int64_t bn = 4;                                                            // gamma, beta, mean, var per channel
  return (c * INPUT_PLANES * 9 + bn * c)                                           // stem
         + a.blocks * 2 * (c * c * 9 + bn * c)                                     // residual blocks
         + POLICY_LABELS * c + POLICY_SIZE                                         // policy conv and bias
         + (VALUE_CHANNELS * c + bn * VALUE_CHANNELS)                              // value conv
         + int64_t(VALUE_HIDDEN) * POLICY_SIZE + VALUE_HIDDEN + VALUE_HIDDEN + 1;  // fc1, fc2
}

Tensor::Tensor(std::vector<int> s, float fill) : shape(std::move(s)) {
  size_t n = 1;
  for (int d : shape) n *= size_t(d);
  data.assign(n, fill);
}

std::string shape_string(const std::vector<int>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(shape[i]);
  }
  return s + ']';
}

static BatchNorm make_bn(int channels) {
  return BatchNorm{Tensor({channels}, 1.0f), Tensor({channels}, 0.0f), Tensor({channels}, 0.0f),
                   Tensor({channels}, 1.0f)};
}

static ConvBN make_conv_bn(int out, int in, int kernel) {
  return ConvBN{Tensor({out, in, kernel, kernel}), make_bn(out)};
}

Model::Model(const Architecture& a) : arch(a) {
  if (a.blocks < 0 || a.channels < 1)
    throw std::invalid_argument("bad architecture: blocks must be >= 0 and channels >= 1");
  const int c = a.channels;
  stem = make_conv_bn(c, INPUT_PLANES, 3);
  blocks.resize(a.blocks);
  for (auto& b : blocks) b = ResidualBlock{make_conv_bn(c, c, 3), make_conv_bn(c, c, 3)};
  policy_conv = Tensor({POLICY_LABELS, c, 1, 1});
  policy_bias = Tensor({POLICY_SIZE});
  value_conv = make_conv_bn(VALUE_CHANNELS, c, 1);
  value_fc1_weight = Tensor({VALUE_HIDDEN, POLICY_SIZE});
  value_fc1_bias = Tensor({VALUE_HIDDEN});
  value_fc2_weight = Tensor({1, VALUE_HIDDEN});
  value_fc2_bias = Tensor({1});
}

static void add_conv_bn(std::vector<Model::Named>& out, const std::string& prefix, ConvBN& c) {
  out.push_back({prefix + ".weight", &c.weight, true});
  out.push_back({prefix + ".bn.gamma", &c.bn.gamma, true});
  out.push_back({prefix + ".bn.beta", &c.bn.beta, true});
  out.push_back({prefix + ".bn.mean", &c.bn.mean, false});
  out.push_back({prefix + ".bn.var", &c.bn.var, false});
}

std::vector<Model::Named> Model::tensors() {
  std::vector<Named> out;
  add_conv_bn(out, "stem.conv", stem);
  for (size_t i = 0; i < blocks.size(); ++i) {
    add_conv_bn(out, "blocks." + std::to_string(i) + ".conv1", blocks[i].conv1);
    add_conv_bn(out, "blocks." + std::to_string(i) + ".conv2", blocks[i].conv2);
  }
  out.push_back({"policy.conv.weight", &policy_conv, true});
  out.push_back({"policy.bias", &policy_bias, true});
  add_conv_bn(out, "value.conv", value_conv);
  out.push_back({"value.fc1.weight", &value_fc1_weight, true});
  out.push_back({"value.fc1.bias", &value_fc1_bias, true});
  out.push_back({"value.fc2.weight", &value_fc2_weight, true});
  out.push_back({"value.fc2.bias", &value_fc2_bias, true});
  return out;
}

std::vector<Model::NamedTensor<const Tensor>> Model::tensors() const {
  std::vector<NamedTensor<const Tensor>> out;
  for (auto& n : const_cast<Model*>(this)->tensors()) out.push_back({n.name, n.tensor, n.trainable});
  return out;
}

namespace {
// Box-Muller over splitmix64: the same numbers on every compiler, unlike std::normal_distribution.
struct Rng : SplitMix64 {
  double uniform() { return double((next() >> 11) + 1) * 0x1.0p-53; }  // (0, 1]
  double normal() { return std::sqrt(-2.0 * std::log(uniform())) * std::cos(6.283185307179586 * uniform()); }
};

void fill_normal(Tensor& t, Rng& rng, double stddev) {
  for (float& x : t.data) x = float(rng.normal() * stddev);
}
}  // namespace

void init_model(Model& model, uint64_t seed) {
  Rng rng{{seed}};
  for (auto& n : model.tensors()) {
    const auto& shape = n.tensor->shape;
    bool is_gamma_or_var = n.name.ends_with(".bn.gamma") || n.name.ends_with(".bn.var");
    if (shape.size() >= 2) {
      // fan_in = in * kh * kw (or in_features); He-normal suits ReLU and Swish alike. The last
      // layer (value fc2) feeds a sigmoid, so it gets the unit-gain (LeCun) scale instead.
      int64_t fan_in = 1;
      for (size_t i = 1; i < shape.size(); ++i) fan_in *= shape[i];
      double gain = n.name == "value.fc2.weight" ? 1.0 : 2.0;
      fill_normal(*n.tensor, rng, std::sqrt(gain / double(fan_in)));
    } else {
      std::fill(n.tensor->data.begin(), n.tensor->data.end(), is_gamma_or_var ? 1.0f : 0.0f);
    }
  }
}

static FoldedConv fold(const ConvBN& c, float eps) {
  FoldedConv f;
  f.out_channels = c.weight.shape[0];
  f.in_channels = c.weight.shape[1];
  f.kernel = c.weight.shape[2];
  f.weight = c.weight.data;
  f.bias.resize(f.out_channels);
  const size_t per_out = f.weight.size() / f.out_channels;
  for (int o = 0; o < f.out_channels; ++o) {
    double scale = c.bn.gamma.data[o] / std::sqrt(double(c.bn.var.data[o]) + eps);
    for (size_t i = 0; i < per_out; ++i) f.weight[o * per_out + i] = float(f.weight[o * per_out + i] * scale);
    f.bias[o] = float(c.bn.beta.data[o] - c.bn.mean.data[o] * scale);
  }
  return f;
}

FoldedModel fold_batch_norm(const Model& m) {
  FoldedModel f;
  f.arch = m.arch;
  const float eps = m.arch.bn_eps;
  f.stem = fold(m.stem, eps);
  for (const auto& b : m.blocks) {
    f.block_conv1.push_back(fold(b.conv1, eps));
    f.block_conv2.push_back(fold(b.conv2, eps));
  }
  f.policy_conv =
      FoldedConv{POLICY_LABELS, m.arch.channels, 1, m.policy_conv.data, std::vector<float>(POLICY_LABELS, 0.0f)};
  f.policy_bias = m.policy_bias.data;
  f.value_conv = fold(m.value_conv, eps);
  f.value_fc1_weight = m.value_fc1_weight.data;
  f.value_fc1_bias = m.value_fc1_bias.data;
  f.value_fc2_weight = m.value_fc2_weight.data;
  f.value_fc2_bias = m.value_fc2_bias.data;
  return f;
}

}  // namespace jiriki::nn
