// The network's forward pass (see nn/forward.h for the buffers and the parallelism).
#include "nn/forward.h"

#include <algorithm>

#include "nn/layers.h"
#include "nn/layers_backward.h"  // the trainer's float products, batch norm with the batch's statistics

namespace jiriki::nn {

Activations::Activations(const Architecture& arch, int cap) : capacity(cap) {
  const size_t b = size_t(cap), c = size_t(arch.channels);
  auto conv_bn = [&](ConvBNActs& x, size_t channels) {
    x.conv.assign(b * channels * SQUARES, 0.0f);
    x.bn.assign(b * channels * SQUARES, 0.0f);
    x.mean.assign(channels, 0.0f);
    x.invstd.assign(channels, 0.0f);
  };
  conv_bn(stem, c);
  stem_out.assign(b * c * SQUARES, 0.0f);
  blocks.resize(arch.blocks);
  for (auto& blk : blocks) {
    conv_bn(blk.conv1, c);
    blk.act1.assign(b * c * SQUARES, 0.0f);
    conv_bn(blk.conv2, c);
    blk.sum.assign(b * c * SQUARES, 0.0f);
    blk.out.assign(b * c * SQUARES, 0.0f);
  }
  policy.assign(b * POLICY_SIZE, 0.0f);
  conv_bn(value, VALUE_CHANNELS);
  value_act.assign(b * VALUE_CHANNELS * SQUARES, 0.0f);
  fc1.assign(b * VALUE_HIDDEN, 0.0f);
  fc1_act.assign(b * VALUE_HIDDEN, 0.0f);
  value_logit.assign(b, 0.0f);
}

void Activations::zero() {
  auto z = [](std::vector<float>& v) { std::fill(v.begin(), v.end(), 0.0f); };
  auto conv_bn = [&](ConvBNActs& x) { z(x.conv), z(x.bn), z(x.mean), z(x.invstd); };
  conv_bn(stem);
  z(stem_out);
  for (auto& blk : blocks) {
    conv_bn(blk.conv1), z(blk.act1), conv_bn(blk.conv2), z(blk.sum), z(blk.out);
  }
  z(policy);
  conv_bn(value);
  z(value_act), z(fc1), z(fc1_act), z(value_logit);
}

namespace {

// ---- each layer split among the threads: samples, or elements --------------------------------

void conv_forward(ThreadPool& pool, float* out, const float* in, const Tensor& w, int batch, int cin, int cout, int k) {
  pool.parallel_for(batch, [&](int64_t b0, int64_t b1) {
    nn::conv_forward_columns(out + b0 * cout * SQUARES, in + b0 * cin * SQUARES, w.ptr(), int(b1 - b0), cin, cout, k);
  });
}

void linear_forward(ThreadPool& pool, float* out, const float* in, const Tensor& w, const Tensor& bias, int batch,
                    int in_f, int out_f) {
  pool.parallel_for(batch, [&](int64_t b0, int64_t b1) {
    nn::linear_forward_lanes(out + b0 * out_f, in + b0 * in_f, w.ptr(), bias.ptr(), int(b1 - b0), in_f, out_f);
  });
}

void activation_forward(ThreadPool& pool, std::vector<float>& out, const std::vector<float>& in, int64_t n,
                        Activation act) {
  pool.parallel_for(n, [&](int64_t i0, int64_t i1) { nn::activation_forward(&out[i0], &in[i0], i1 - i0, act); });
}

// ---- convolution + batch norm, the network's unit ---------------------------------------------

void conv_bn_forward(ThreadPool& pool, ConvBN& p, ConvBNActs& a, const float* in, LayerShape s, Mode mode,
                     float momentum, float eps) {
  conv_forward(pool, a.conv.data(), in, p.weight, s.batch, s.cin, s.cout, s.kernel);
  if (mode == Mode::TRAIN)
    nn::batchnorm_train_forward(a.bn.data(), a.mean.data(), a.invstd.data(), p.bn.mean.ptr(), p.bn.var.ptr(), momentum,
                                a.conv.data(), p.bn.gamma.ptr(), p.bn.beta.ptr(), eps, s.batch, s.cout);
  else nn::batchnorm_forward(a.bn.data(), a.conv.data(), p.bn, eps, s.batch, s.cout);
}

}  // namespace

void forward(Model& model, Activations& a, const float* features, int batch, Mode mode, float bn_momentum,
             ThreadPool& pool) {
  const int c = model.arch.channels;
  const Activation act = model.arch.activation;
  const float eps = model.arch.bn_eps;
  const int64_t trunk_size = int64_t(batch) * c * SQUARES;

  conv_bn_forward(pool, model.stem, a.stem, features, {batch, INPUT_PLANES, c, 3}, mode, bn_momentum, eps);
  activation_forward(pool, a.stem_out, a.stem.bn, trunk_size, act);

  const std::vector<float>* h = &a.stem_out;
  for (size_t i = 0; i < a.blocks.size(); ++i) {
    BlockActs& b = a.blocks[i];
    ResidualBlock& p = model.blocks[i];
    conv_bn_forward(pool, p.conv1, b.conv1, h->data(), {batch, c, c, 3}, mode, bn_momentum, eps);
    activation_forward(pool, b.act1, b.conv1.bn, trunk_size, act);
    conv_bn_forward(pool, p.conv2, b.conv2, b.act1.data(), {batch, c, c, 3}, mode, bn_momentum, eps);
    std::copy_n(h->begin(), trunk_size, b.sum.begin());
    nn::add_forward(b.sum.data(), b.conv2.bn.data(), trunk_size);
    activation_forward(pool, b.out, b.sum, trunk_size, act);
    h = &b.out;
  }

  conv_forward(pool, a.policy.data(), h->data(), model.policy_conv, batch, c, POLICY_LABELS, 1);
  for (int n = 0; n < batch; ++n)
    nn::add_forward(a.policy.data() + int64_t(n) * POLICY_SIZE, model.policy_bias.ptr(), POLICY_SIZE);

  conv_bn_forward(pool, model.value_conv, a.value, h->data(), {batch, c, VALUE_CHANNELS, 1}, mode, bn_momentum, eps);
  activation_forward(pool, a.value_act, a.value.bn, int64_t(batch) * POLICY_SIZE, act);
  linear_forward(pool, a.fc1.data(), a.value_act.data(), model.value_fc1_weight, model.value_fc1_bias, batch,
                 POLICY_SIZE, VALUE_HIDDEN);
  activation_forward(pool, a.fc1_act, a.fc1, int64_t(batch) * VALUE_HIDDEN, act);
  linear_forward(pool, a.value_logit.data(), a.fc1_act.data(), model.value_fc2_weight, model.value_fc2_bias, batch,
                 VALUE_HIDDEN, 1);
}

}  // namespace jiriki::nn
