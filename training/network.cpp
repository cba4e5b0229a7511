// The backward pass over the whole network (see training/network.h; the forward pass is nn/forward.h).
//
// Parallelism: every layer is split among the pool's threads along a dimension it does not sum
// over (samples for the input gradients, output channels for the weight gradients, elements for
// the activations), so every float is computed by one thread in a fixed order and the results are
// bit-identical for any number of threads. Batch norm, cheap next to the convolutions, runs on the
// calling thread.
#include "training/network.h"

#include <algorithm>

#include "nn/layers.h"

namespace jiriki::training {

using nn::SQUARES;

Workspace::Workspace(const nn::Architecture& arch, int capacity)
    : acts(arch, capacity), grads_acts(arch, capacity), grads(arch) {}

void zero_tensors(nn::Model& m) {
  for (auto& t : m.tensors()) std::fill(t.tensor->data.begin(), t.tensor->data.end(), 0.0f);
}

namespace {

// ---- each layer split among the threads (see the comment at the top) -------------------------

// din may be null (the stem: nothing needs the gradient of the input features).
void conv_backward(ThreadPool& pool, float* din, nn::Tensor& dw, const float* dout, const float* in,
                   const nn::Tensor& w, int batch, int cin, int cout, int k) {
  pool.parallel_for(cout, [&](int64_t o0, int64_t o1) {
    nn::conv_backward_weight(dw.ptr(), dout, in, batch, cin, cout, k, int(o0), int(o1));
  });
  if (!din) return;
  pool.parallel_for(batch, [&](int64_t b0, int64_t b1) {
    nn::conv_backward_data(din + b0 * cin * SQUARES, dout + b0 * cout * SQUARES, w.ptr(), int(b1 - b0), cin, cout, k);
  });
}

void linear_backward(ThreadPool& pool, float* din, nn::Tensor& dw, nn::Tensor& dbias, const float* dout,
                     const float* in, const nn::Tensor& w, int batch, int in_f, int out_f) {
  pool.parallel_for(out_f, [&](int64_t o0, int64_t o1) {
    nn::linear_backward_weight(dw.ptr(), dbias.ptr(), dout, in, batch, in_f, out_f, int(o0), int(o1));
  });
  pool.parallel_for(batch, [&](int64_t b0, int64_t b1) {
    nn::linear_backward_data(din + b0 * in_f, dout + b0 * out_f, w.ptr(), int(b1 - b0), in_f, out_f);
  });
}

void activation_backward(ThreadPool& pool, std::vector<float>& din, const std::vector<float>& dout,
                         const std::vector<float>& in, int64_t n, nn::Activation act) {
  pool.parallel_for(
      n, [&](int64_t i0, int64_t i1) { nn::activation_backward(&din[i0], &dout[i0], &in[i0], i1 - i0, act); });
}

// ---- convolution + batch norm, the network's unit ---------------------------------------------

// From g.bn (the gradient of the BN output) to the gradients of the weights (into gp) and of the
// input (into din, unless null), through g.conv.
void conv_bn_backward(ThreadPool& pool, const nn::ConvBN& p, const ConvBNActs& a, ConvBNActs& g, nn::ConvBN& gp,
                      const float* in, float* din, nn::LayerShape s) {
  nn::batchnorm_backward(g.conv.data(), gp.bn.gamma.ptr(), gp.bn.beta.ptr(), g.bn.data(), a.conv.data(), a.mean.data(),
                         a.invstd.data(), p.bn.gamma.ptr(), s.batch, s.cout);
  conv_backward(pool, din, gp.weight, g.conv.data(), in, p.weight, s.batch, s.cin, s.cout, s.kernel);
}

}  // namespace

void backward(const nn::Model& model, const Activations& a, Activations& g, nn::Model& grads, const float* features,
              int batch, ThreadPool& pool) {
  const int c = model.arch.channels;
  const nn::Activation act = model.arch.activation;
  const int64_t trunk_size = int64_t(batch) * c * SQUARES;
  const std::vector<float>& trunk = a.trunk();

  // Value head, from the logit back to the trunk.
  linear_backward(pool, g.fc1_act.data(), grads.value_fc2_weight, grads.value_fc2_bias, g.value_logit.data(),
                  a.fc1_act.data(), model.value_fc2_weight, batch, nn::VALUE_HIDDEN, 1);
  activation_backward(pool, g.fc1, g.fc1_act, a.fc1, int64_t(batch) * nn::VALUE_HIDDEN, act);
  linear_backward(pool, g.value_act.data(), grads.value_fc1_weight, grads.value_fc1_bias, g.fc1.data(),
                  a.value_act.data(), model.value_fc1_weight, batch, nn::POLICY_SIZE, nn::VALUE_HIDDEN);
  activation_backward(pool, g.value.bn, g.value_act, a.value.bn, int64_t(batch) * nn::POLICY_SIZE, act);
  conv_bn_backward(pool, model.value_conv, a.value, g.value, grads.value_conv, trunk.data(), g.trunk().data(),
                   {batch, c, nn::VALUE_CHANNELS, 1});

  // Policy head: the bias is shared by every sample, the convolution adds to the trunk's gradient.
  for (int n = 0; n < batch; ++n)
    nn::add_backward(grads.policy_bias.ptr(), g.policy.data() + int64_t(n) * nn::POLICY_SIZE, nn::POLICY_SIZE);
  conv_backward(pool, g.trunk().data(), grads.policy_conv, g.policy.data(), trunk.data(), model.policy_conv, batch, c,
                nn::POLICY_LABELS, 1);

  // Residual blocks, last to first.
  for (size_t i = a.blocks.size(); i-- > 0;) {
    const BlockActs& b = a.blocks[i];
    BlockActs& gb = g.blocks[i];
    const nn::ResidualBlock& p = model.blocks[i];
    const float* in = i ? a.blocks[i - 1].out.data() : a.stem_out.data();
    float* din = i ? g.blocks[i - 1].out.data() : g.stem_out.data();
    activation_backward(pool, gb.sum, gb.out, b.sum, trunk_size, act);
    nn::add_backward(din, gb.sum.data(), trunk_size);                 // the skip connection
    nn::add_backward(gb.conv2.bn.data(), gb.sum.data(), trunk_size);  // the residual branch
    conv_bn_backward(pool, p.conv2, b.conv2, gb.conv2, grads.blocks[i].conv2, b.act1.data(), gb.act1.data(),
                     {batch, c, c, 3});
    activation_backward(pool, gb.conv1.bn, gb.act1, b.conv1.bn, trunk_size, act);
    conv_bn_backward(pool, p.conv1, b.conv1, gb.conv1, grads.blocks[i].conv1, in, din, {batch, c, c, 3});
  }

  activation_backward(pool, g.stem.bn, g.stem_out, a.stem.bn, trunk_size, act);
  conv_bn_backward(pool, model.stem, a.stem, g.stem, grads.stem, features, nullptr, {batch, nn::INPUT_PLANES, c, 3});
}

nn::LossTotals compute_gradients(nn::Model& model, Workspace& ws, const Batch& batch, float val_lambda,
                                 float bn_momentum, float grad_scale, ThreadPool& pool) {
  zero_tensors(ws.grads);
  ws.grads_acts.zero();
  forward(model, ws.acts, batch.features, batch.size, Mode::TRAIN, bn_momentum, pool);
  nn::LossTotals totals;
  nn::loss_forward_backward(ws.grads_acts.policy.data(), ws.grads_acts.value_logit.data(), totals,
                            ws.acts.policy.data(), ws.acts.value_logit.data(), batch.policy_target, batch.value_result,
                            batch.value_eval, val_lambda, batch.size, grad_scale);
  backward(model, ws.acts, ws.grads_acts, ws.grads, batch.features, batch.size, pool);
  return totals;
}

nn::LossTotals evaluate_batch(nn::Model& model, Activations& acts, const Batch& batch, float val_lambda,
                              ThreadPool& pool) {
  forward(model, acts, batch.features, batch.size, Mode::EVAL, 0.0f, pool);
  nn::LossTotals totals;
  nn::loss_forward_backward(nullptr, nullptr, totals, acts.policy.data(), acts.value_logit.data(), batch.policy_target,
                            batch.value_result, batch.value_eval, val_lambda, batch.size, 0.0f);
  return totals;
}

}  // namespace jiriki::training
