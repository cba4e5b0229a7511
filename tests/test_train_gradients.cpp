// Gradients of the training layers (nn/layers_backward.h) and of the whole network
// (training/network.h) against central finite differences of the forward passes, on random inputs.
//
// How the comparisons are made. Each layer is checked through a scalar L = sum_k r_k out_k with
// fixed random r_k, so that d(L)/d(out) = r is what the backward pass receives. Central differences
// (L(p + h) - L(p - h)) / (2h) use the perturbation actually stored in float (p + h rounded), and L
// is summed in double. The forward passes keep float32 outputs, so L carries rounding of about 1e-7
// relative per layer; that, divided by 2h, is the noise floor of a finite difference. The relative
// error |analytic - numeric| / max(|analytic|, |numeric|, floor) therefore uses a floor: a small
// fraction of the largest gradient of the tensor, below which a component is compared on that
// absolute scale. Each tolerance below is stated with the errors actually seen and the margin.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "nn/backend.h"
#include "nn/layers.h"
#include "nn/layers_backward.h"
#include "training/network.h"

using namespace jiriki;
using namespace jiriki::nn;
using jiriki::ThreadPool;

namespace {

std::vector<float> random_vector(size_t n, std::mt19937_64& rng, double mean = 0.0, double stddev = 1.0) {
  std::normal_distribution<double> d(mean, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = float(d(rng));
  return v;
}

double weighted_sum(const float* out, const std::vector<double>& r) {
  double s = 0;
  for (size_t k = 0; k < r.size(); ++k) s += r[k] * out[k];
  return s;
}

std::vector<double> random_weights(size_t n, std::mt19937_64& rng) {
  std::normal_distribution<double> d(0.0, 1.0);
  std::vector<double> r(n);
  for (double& x : r) x = float(d(rng));  // representable in float: the backward pass gets exactly r
  return r;
}

std::vector<float> as_float(const std::vector<double>& r) { return std::vector<float>(r.begin(), r.end()); }

// Largest relative error between an analytic gradient and central differences of loss() over the
// coordinates `which` of `param`. floor_fraction: see the comment at the top.
double max_relative_error(float* param, const float* analytic, size_t n, const std::vector<size_t>& which, float h,
                          const std::function<double()>& loss, double floor_fraction) {
  double largest = 0;
  for (size_t i = 0; i < n; ++i) largest = std::max(largest, std::abs(double(analytic[i])));
  const double floor = std::max(floor_fraction * largest, 1e-12);
  double worst = 0;
  for (size_t i : which) {
    const float saved = param[i];
    const float up = saved + h, down = saved - h;
    param[i] = up;
    const double lp = loss();
    param[i] = down;
    const double lm = loss();
    param[i] = saved;
    const double numeric = (lp - lm) / (double(up) - double(down));
    const double err =
        std::abs(analytic[i] - numeric) / std::max({std::abs(double(analytic[i])), std::abs(numeric), floor});
    worst = std::max(worst, err);
  }
  return worst;
}

std::vector<size_t> all_indices(size_t n) {
  std::vector<size_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

std::vector<size_t> sample_indices(size_t n, size_t count, std::mt19937_64& rng) {
  if (n <= count) return all_indices(n);
  std::vector<size_t> v;
  std::uniform_int_distribution<size_t> d(0, n - 1);
  for (size_t i = 0; i < count; ++i) v.push_back(d(rng));
  return v;
}

}  // namespace

TEST_CASE("the trainer's forward products equal the reference loops to float rounding", "[train][gradients]") {
  // Output channels and features that leave the blocks of four rows and the eight lanes a tail,
  // and a bias the reference adds that the trainer's convolution has none of.
  std::mt19937_64 rng(10);
  for (int kernel : {3, 1})
    for (int cout : {4, 7}) {
      const int batch = 3, cin = 5;
      const auto in = random_vector(size_t(batch) * cin * SQUARES, rng);
      const auto w = random_vector(size_t(cout) * cin * kernel * kernel, rng, 0.0, 0.3);
      std::vector<float> reference(size_t(batch) * cout * SQUARES), fast(reference.size(), -1.0f);
      conv_forward(reference.data(), in.data(), w.data(), nullptr, batch, cin, cout, kernel);
      conv_forward_columns(fast.data(), in.data(), w.data(), batch, cin, cout, kernel);
      CAPTURE(kernel, cout);
      for (size_t i = 0; i < fast.size(); ++i) REQUIRE(fast[i] == Approx(reference[i]).margin(1e-5));
      // Sample by sample: the last sample alone gives the same bits (threads split the batch).
      std::vector<float> last(size_t(cout) * SQUARES);
      conv_forward_columns(last.data(), in.data() + size_t(batch - 1) * cin * SQUARES, w.data(), 1, cin, cout, kernel);
      CHECK(std::equal(last.begin(), last.end(), fast.end() - last.size()));
    }
  for (int in_features : {8, 21}) {
    const int batch = 2, out_features = 3;
    const auto in = random_vector(size_t(batch) * in_features, rng);
    const auto w = random_vector(size_t(out_features) * in_features, rng);
    const auto bias = random_vector(out_features, rng);
    std::vector<float> reference(size_t(batch) * out_features), fast(reference.size());
    linear_forward(reference.data(), in.data(), w.data(), bias.data(), batch, in_features, out_features);
    linear_forward_lanes(fast.data(), in.data(), w.data(), bias.data(), batch, in_features, out_features);
    CAPTURE(in_features);
    for (size_t i = 0; i < fast.size(); ++i) CHECK(fast[i] == Approx(reference[i]).margin(1e-5));
  }
}

TEST_CASE("conv backward: data and weight gradients match finite differences (3x3 and 1x1)", "[train][gradients]") {
  std::mt19937_64 rng(11);
  for (int kernel : {3, 1}) {
    const int batch = 2, cin = 5, cout = 4;
    auto in = random_vector(size_t(batch) * cin * SQUARES, rng);
    auto w = random_vector(size_t(cout) * cin * kernel * kernel, rng, 0.0, 0.3);
    std::vector<float> out(size_t(batch) * cout * SQUARES);
    auto r = random_weights(out.size(), rng);
    auto loss = [&] {
      conv_forward(out.data(), in.data(), w.data(), nullptr, batch, cin, cout, kernel);
      return weighted_sum(out.data(), r);
    };
    // The backward passes add to what the buffers hold: start from non-zero values and subtract.
    const auto din0 = random_vector(in.size(), rng), dw0 = random_vector(w.size(), rng);
    auto din = din0, dw = dw0;
    const auto dout = as_float(r);
    conv_backward_data(din.data(), dout.data(), w.data(), batch, cin, cout, kernel);
    conv_backward_weight(dw.data(), dout.data(), in.data(), batch, cin, cout, kernel, 0, cout);
    for (size_t i = 0; i < din.size(); ++i) din[i] -= din0[i];
    for (size_t i = 0; i < dw.size(); ++i) dw[i] -= dw0[i];

    // Linear in both arguments: central differences are exact up to rounding, so a large h (0.5)
    // puts the rounding of the float outputs (about 1e-6 in L) far below the gradients.
    // Seen: < 6e-5.
    CAPTURE(kernel);
    CHECK(max_relative_error(in.data(), din.data(), in.size(), all_indices(in.size()), 0.5f, loss, 1e-3) < 2e-4);
    CHECK(max_relative_error(w.data(), dw.data(), w.size(), all_indices(w.size()), 0.5f, loss, 1e-3) < 2e-4);

    // Splitting the output channels gives the same bits as one call (what the threads rely on).
    std::vector<float> whole(w.size(), 0.0f), split(w.size(), 0.0f);
    conv_backward_weight(whole.data(), dout.data(), in.data(), batch, cin, cout, kernel, 0, cout);
    conv_backward_weight(split.data(), dout.data(), in.data(), batch, cin, cout, kernel, 0, 1);
    conv_backward_weight(split.data(), dout.data(), in.data(), batch, cin, cout, kernel, 1, cout);
    CHECK(whole == split);
  }
}

TEST_CASE("batch norm in training mode: statistics, running averages and gradients", "[train][gradients]") {
  std::mt19937_64 rng(12);
  const int batch = 2, channels = 3;
  const size_t n = size_t(batch) * channels * SQUARES;
  auto in = random_vector(n, rng, 3.0, 2.0);  // an offset mean: the variance must not cancel
  auto gamma = random_vector(channels, rng, 1.0, 0.3), beta = random_vector(channels, rng);
  std::vector<float> out(n), mean(channels), invstd(channels);
  const float eps = 1e-5f;

  // Forward against statistics computed here independently, in double.
  std::vector<float> rmean = {0.5f, -1.0f, 2.0f}, rvar = {1.0f, 2.0f, 0.5f};
  const auto rmean0 = rmean, rvar0 = rvar;
  batchnorm_train_forward(out.data(), mean.data(), invstd.data(), rmean.data(), rvar.data(), 0.1f, in.data(),
                          gamma.data(), beta.data(), eps, batch, channels);
  const double m = double(batch) * SQUARES;
  for (int c = 0; c < channels; ++c) {
    double s = 0, ss = 0;
    for (int b = 0; b < batch; ++b)
      for (int q = 0; q < SQUARES; ++q) s += in[(b * channels + c) * SQUARES + q];
    const double mu = s / m;
    for (int b = 0; b < batch; ++b)
      for (int q = 0; q < SQUARES; ++q) ss += std::pow(in[(b * channels + c) * SQUARES + q] - mu, 2);
    const double var = ss / m;
    CHECK(mean[c] == Approx(mu).epsilon(1e-6));
    CHECK(invstd[c] == Approx(1 / std::sqrt(var + eps)).epsilon(1e-6));
    CHECK(rmean[c] == Approx(0.9 * rmean0[c] + 0.1 * mu).epsilon(1e-6));
    CHECK(rvar[c] == Approx(0.9 * rvar0[c] + 0.1 * var * m / (m - 1)).epsilon(1e-6));  // unbiased
    const int k = (1 * channels + c) * SQUARES + 7;
    CHECK(out[k] == Approx((in[k] - mu) / std::sqrt(var + eps) * gamma[c] + beta[c]).margin(1e-5));
  }

  auto r = random_weights(n, rng);
  auto loss = [&] {
    batchnorm_train_forward(out.data(), mean.data(), invstd.data(), nullptr, nullptr, 0.0f, in.data(), gamma.data(),
                            beta.data(), eps, batch, channels);
    return weighted_sum(out.data(), r);
  };
  loss();
  std::vector<float> din(n, 0.0f), dgamma(channels, 0.0f), dbeta(channels, 0.0f);
  const auto dout = as_float(r);
  batchnorm_backward(din.data(), dgamma.data(), dbeta.data(), dout.data(), in.data(), mean.data(), invstd.data(),
                     gamma.data(), batch, channels);
  // Nonlinear through the statistics, but each input moves them by only 1/M, so the curvature is
  // small and a large h (0.1) keeps the truncation error below the rounding floor: a perturbed
  // input changes every output of its channel (162 of them, each rounded to 6e-8 relative).
  // Seen: < 1e-3 for din (5.7e-3 with h = 0.01), < 1e-5 for gamma and beta.
  CHECK(max_relative_error(in.data(), din.data(), n, sample_indices(n, 120, rng), 0.1f, loss, 1e-2) < 1e-2);
  CHECK(max_relative_error(gamma.data(), dgamma.data(), channels, all_indices(channels), 0.01f, loss, 1e-3) < 1e-3);
  CHECK(max_relative_error(beta.data(), dbeta.data(), channels, all_indices(channels), 0.01f, loss, 1e-3) < 1e-3);
}

TEST_CASE("activation backward: ReLU and Swish derivatives match finite differences", "[train][gradients]") {
  std::mt19937_64 rng(13);
  for (Activation act : {Activation::RELU, Activation::SWISH}) {
    auto in = random_vector(500, rng, 0.0, 3.0);
    const float h = 1e-2f;
    for (float& x : in)  // keep ReLU's inputs away from its kink, where no derivative exists
      if (std::abs(x) < 4 * h) x = 0.5f;
    std::vector<float> out(in.size());
    auto r = random_weights(in.size(), rng);
    auto loss = [&] {
      activation_forward(out.data(), in.data(), int64_t(in.size()), act);
      return weighted_sum(out.data(), r);
    };
    std::vector<float> din(in.size(), 0.0f);
    const auto dout = as_float(r);
    activation_backward(din.data(), dout.data(), in.data(), int64_t(in.size()), act);
    // Elementwise: a perturbation changes one output, so the only noise is that output's rounding
    // (up to 5e-7 for outputs near 9, times |r| <= 3, over 2h: 7e-5); Swish's third derivative
    // (< 0.5) makes the h^2 / 6 term < 3e-5. Against the floor (1e-2 of the largest derivative,
    // about 3e-2) that is 3e-3 at most. Seen: 4e-4 for Swish, 1e-11 for ReLU (piecewise linear).
    CAPTURE(activation_name(act));
    CHECK(max_relative_error(in.data(), din.data(), in.size(), all_indices(in.size()), h, loss, 1e-2) < 5e-3);
  }
}

TEST_CASE("add and linear backward match finite differences", "[train][gradients]") {
  std::mt19937_64 rng(14);
  // add: out += in, so d/d(in) = dout, added to what din holds.
  std::vector<float> din = {1.0f, 2.0f}, dout = {0.25f, -3.0f};
  add_backward(din.data(), dout.data(), 2);
  CHECK(din == std::vector<float>{1.25f, -1.0f});

  const int batch = 3, nin = 40, nout = 7;
  auto in = random_vector(size_t(batch) * nin, rng), w = random_vector(size_t(nout) * nin, rng, 0.0, 0.2);
  auto bias = random_vector(nout, rng);
  std::vector<float> out(size_t(batch) * nout);
  auto r = random_weights(out.size(), rng);
  auto loss = [&] {
    linear_forward(out.data(), in.data(), w.data(), bias.data(), batch, nin, nout);
    return weighted_sum(out.data(), r);
  };
  std::vector<float> dx(in.size(), 0.0f), dw(w.size(), 0.0f), db(nout, 0.0f);
  const auto g = as_float(r);
  linear_backward_data(dx.data(), g.data(), w.data(), batch, nin, nout);
  linear_backward_weight(dw.data(), db.data(), g.data(), in.data(), batch, nin, nout, 0, 3);
  linear_backward_weight(dw.data(), db.data(), g.data(), in.data(), batch, nin, nout, 3, nout);
  // Linear: exact up to rounding (h = 0.5 as for the convolutions). Seen: < 2e-5.
  CHECK(max_relative_error(in.data(), dx.data(), in.size(), all_indices(in.size()), 0.5f, loss, 1e-3) < 2e-4);
  CHECK(max_relative_error(w.data(), dw.data(), w.size(), all_indices(w.size()), 0.5f, loss, 1e-3) < 2e-4);
  CHECK(max_relative_error(bias.data(), db.data(), nout, all_indices(nout), 0.5f, loss, 1e-3) < 2e-4);
}

TEST_CASE("loss: hand-worked values, accuracies and gradients", "[train][gradients][loss]") {
  // eval_to_win_probability is dlshogi's sigmoid(eval / 756.0864962951762).
  CHECK(eval_to_win_probability(0.0f) == 0.5f);
  CHECK(eval_to_win_probability(756.0864962951762f) == Approx(1.0 / (1.0 + std::exp(-1.0))).epsilon(1e-6));

  // All-zero logits: the softmax is uniform, so the cross-entropy is ln 2187 against any target;
  // a zero value logit predicts 1/2, whose cross-entropy is ln 2 against any target.
  const int batch = 2;
  std::vector<float> logits(batch * POLICY_SIZE, 0.0f), target(batch * POLICY_SIZE, 0.0f), value(batch, 0.0f);
  target[5] = 1.0f;                 // sample 0: one-hot on label 5
  target[POLICY_SIZE + 9] = 0.75f;  // sample 1: visits 3:1 on labels 9 and 100
  target[POLICY_SIZE + 100] = 0.25f;
  std::vector<float> result = {1.0f, 0.5f}, evalp = {0.8f, 0.3f};
  LossTotals t;
  loss_forward_backward(nullptr, nullptr, t, logits.data(), value.data(), target.data(), result.data(), evalp.data(),
                        0.25f, batch, 1.0f);
  CHECK(t.samples == 2);
  CHECK(t.policy == Approx(2 * std::log(2187.0)).epsilon(1e-12));
  CHECK(t.value_result == Approx(2 * std::log(2.0)).epsilon(1e-12));
  CHECK(t.value_eval == Approx(2 * std::log(2.0)).epsilon(1e-12));
  CHECK(t.value_decisive == 1);  // the draw does not count

  // Accuracies: argmax of the logits vs of the target; value on the winner's side of 1/2.
  logits[5] = 2.0f;                  // sample 0 right
  logits[POLICY_SIZE + 100] = 1.0f;  // sample 1 wrong (target's argmax is 9)
  value[0] = 0.3f;                   // sample 0 won and predicted > 1/2
  LossTotals a;
  loss_forward_backward(nullptr, nullptr, a, logits.data(), value.data(), target.data(), result.data(), evalp.data(),
                        0.25f, batch, 1.0f);
  CHECK(a.policy_correct == 1);
  CHECK(a.value_correct == 1);
  // Sample 0 by hand: -log softmax_5 with one logit 2 and 2186 zeros.
  const double p0 = std::log(std::exp(2.0) + 2186.0) - 2.0;
  const double p1 = std::log(std::exp(1.0) + 2186.0) - (0.75 * 0.0 + 0.25 * 1.0);
  CHECK(a.policy == Approx(p0 + p1).epsilon(1e-9));

  // Gradients against finite differences of the total loss (computed in double from float inputs,
  // so the only error is the h^2 term: seen < 3e-7). grad_scale 1/2 makes the loss a mean.
  std::mt19937_64 rng(15);
  logits = random_vector(logits.size(), rng, 0.0, 2.0);
  value = {0.7f, -1.2f};
  const float lambda = 0.25f, scale = 0.5f;
  auto loss = [&] {
    LossTotals l;
    loss_forward_backward(nullptr, nullptr, l, logits.data(), value.data(), target.data(), result.data(), evalp.data(),
                          lambda, batch, scale);
    return scale * (l.policy + (1 - lambda) * l.value_result + lambda * l.value_eval);
  };
  std::vector<float> dlogits(logits.size(), 0.0f), dvalue(batch, 0.0f);
  LossTotals unused;
  loss_forward_backward(dlogits.data(), dvalue.data(), unused, logits.data(), value.data(), target.data(),
                        result.data(), evalp.data(), lambda, batch, scale);
  std::vector<size_t> which = sample_indices(logits.size(), 200, rng);
  which.insert(which.end(), {5, size_t(POLICY_SIZE + 9), size_t(POLICY_SIZE + 100)});  // the target labels
  CHECK(max_relative_error(logits.data(), dlogits.data(), logits.size(), which, 1e-3f, loss, 1e-3) < 1e-4);
  CHECK(max_relative_error(value.data(), dvalue.data(), batch, all_indices(batch), 1e-3f, loss, 1e-3) < 1e-4);
  // The value gradient is sigmoid(y) - blended target, by hand for sample 0.
  CHECK(dvalue[0] == Approx(scale * (1 / (1 + std::exp(-0.7)) - (0.75 * 1.0 + 0.25 * 0.8))).epsilon(1e-6));
}

namespace {

// A tiny network with every parameter random (BN gammas, betas and biases included), so that no
// path is trivially zero.
Model random_model(int blocks, int channels, Activation act, uint64_t seed) {
  Architecture arch;
  arch.blocks = blocks;
  arch.channels = channels;
  arch.activation = act;
  Model m(arch);
  init_model(m, seed);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.2f);
  for (auto& t : m.tensors()) {
    if (t.name.ends_with(".bn.gamma"))
      for (float& x : t.tensor->data) x = 1.0f + d(rng);
    else if (t.name.ends_with(".bn.var"))
      for (float& x : t.tensor->data) x = 1.0f + std::abs(d(rng));
    else if (t.tensor->shape.size() == 1)
      for (float& x : t.tensor->data) x = d(rng);
  }
  return m;
}

// A batch of random inputs shaped like real ones: 0/1 feature planes, target distributions, game
// results 1 / 0 / 0.5 and eval probabilities.
training::Batch random_batch(int size, std::mt19937_64& rng) {
  training::Batch b;
  b.allocate(size);
  b.size = size;
  std::bernoulli_distribution bit(0.2);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int i = 0; i < size * INPUT_SIZE; ++i) b.features[i] = bit(rng) ? 1.0f : 0.0f;
  for (int s = 0; s < size; ++s) {
    float* t = b.policy_target + s * POLICY_SIZE;
    double sum = 0;
    for (int k = 0; k < 6; ++k) {
      float v = u(rng);
      t[(k * 397 + s * 31) % POLICY_SIZE] += v;
      sum += v;
    }
    for (int k = 0; k < POLICY_SIZE; ++k) t[k] = float(t[k] / sum);
    b.value_result[s] = float(s % 3) * 0.5f;
    b.value_eval[s] = u(rng);
  }
  return b;
}

// The mean training loss of the batch (TRAIN mode, running statistics left alone).
double network_loss(Model& m, training::Activations& acts, const training::Batch& b, float lambda, ThreadPool& pool) {
  training::forward(m, acts, b.features, b.size, training::Mode::TRAIN, 0.0f, pool);
  LossTotals t;
  loss_forward_backward(nullptr, nullptr, t, acts.policy.data(), acts.value_logit.data(), b.policy_target,
                        b.value_result, b.value_eval, lambda, b.size, 0.0f);
  return (t.policy + (1 - lambda) * t.value_result + lambda * t.value_eval) / b.size;
}

}  // namespace

// Signs of the inputs of every activation of the network: a ReLU network is smooth between two
// parameter values exactly when none of these changes.
std::vector<bool> activation_signs(const training::Activations& a) {
  std::vector<bool> s;
  auto add = [&](const std::vector<float>& v) {
    for (float x : v) s.push_back(x > 0);
  };
  add(a.stem.bn);
  for (const auto& b : a.blocks) add(b.conv1.bn), add(b.sum);
  add(a.value.bn);
  add(a.fc1);
  return s;
}

TEST_CASE("whole network: gradients of every tensor match finite differences", "[train][gradients]") {
  // The loss is a float32 network's, exact to about 1e-6 relative; with h = 1e-2 that is a noise
  // floor near 1e-4 of a typical gradient (smaller h raises it: at 1e-4 the errors reach 5e-2;
  // larger h lets the h^2 term in: at 3e-2 they reach 1.5e-2). So each tensor is checked on its
  // largest components (where the check is sharp) plus a few random ones, with the floor at 5% of
  // the tensor's largest component.
  //
  // A ReLU network is only piecewise smooth: a difference over an interval in which some unit's
  // input changes sign measures the average of two slopes, not the gradient (with thousands of
  // units, h = 1e-2 gave errors of 20-30% that way). So for ReLU a difference counts only if no
  // activation input changes sign between p - h and p + h, trying h = 3e-3, 1e-3, 3e-4, 1e-4;
  // a coordinate next to a kink for all of them is skipped, and at least half must be checked.
  // The smallest steps raise the noise floor (1e-6 / 2e-4 relative to the gradients' scale), hence
  // the looser bound for ReLU. Seen: < 6e-3 for Swish, < 1.6e-2 for ReLU (with 0 and 8 of about
  // 120 coordinates skipped); a missing term or a wrong factor is off by >= 10%.
  ThreadPool pool(2);
  for (Activation act : {Activation::SWISH, Activation::RELU}) {
    for (int blocks : {1, 2}) {
      const int channels = blocks == 1 ? 8 : 4, batch = act == Activation::RELU ? 2 : 3;
      const float lambda = 0.333f;
      Model m = random_model(blocks, channels, act, 20 + blocks);
      std::mt19937_64 rng(30 + blocks);
      training::Batch b = random_batch(batch, rng);
      training::Workspace ws(m.arch, batch);
      training::compute_gradients(m, ws, b, lambda, 0.0f, 1.0f / batch, pool);
      training::Activations acts(m.arch, batch);
      network_loss(m, acts, b, lambda, pool);
      const std::vector<bool> base = activation_signs(acts);
      const std::vector<float> steps =
          act == Activation::RELU ? std::vector<float>{3e-3f, 1e-3f, 3e-4f, 1e-4f} : std::vector<float>{1e-2f};
      const double tolerance = act == Activation::RELU ? 3e-2 : 2e-2;

      auto grads = ws.grads.tensors();
      auto params = m.tensors();
      int checked = 0, skipped = 0;
      for (size_t t = 0; t < params.size(); ++t) {
        if (!params[t].trainable) continue;
        const nn::Tensor& g = *grads[t].tensor;
        nn::Tensor& p = *params[t].tensor;
        std::vector<size_t> order = all_indices(g.size());
        const size_t top = std::min<size_t>(3, order.size());
        std::partial_sort(order.begin(), order.begin() + top, order.end(),
                          [&](size_t i, size_t j) { return std::abs(g.data[i]) > std::abs(g.data[j]); });
        std::vector<size_t> which(order.begin(), order.begin() + top);
        auto more = sample_indices(g.size(), 3, rng);
        which.insert(which.end(), more.begin(), more.end());
        const double largest = std::abs(g.data[order[0]]);
        for (size_t i : which) {
          const float saved = p.data[i];
          bool done = false;
          for (float h : steps) {
            const float up = saved + h, down = saved - h;
            p.data[i] = up;
            const double lp = network_loss(m, acts, b, lambda, pool);
            const bool smooth_up = activation_signs(acts) == base;
            p.data[i] = down;
            const double lm = network_loss(m, acts, b, lambda, pool);
            const bool smooth_down = activation_signs(acts) == base;
            p.data[i] = saved;
            if (act == Activation::RELU && !(smooth_up && smooth_down)) continue;
            const double numeric = (lp - lm) / (double(up) - double(down));
            const double err = std::abs(g.data[i] - numeric) /
                               std::max({std::abs(double(g.data[i])), std::abs(numeric), 5e-2 * largest, 1e-12});
            CAPTURE(activation_name(act), blocks, params[t].name, i, h, g.data[i], numeric);
            CHECK(err < tolerance);
            done = true;
            break;
          }
          ++(done ? checked : skipped);
        }
      }
      CAPTURE(activation_name(act), blocks, checked, skipped);
      CHECK(checked >= skipped);
    }
  }
}

TEST_CASE("whole network: results do not depend on the number of threads", "[train][gradients]") {
  const Model before = random_model(1, 8, Activation::RELU, 40);
  Model m1 = before, m2 = before;
  std::mt19937_64 rng(41);
  training::Batch b = random_batch(5, rng);
  ThreadPool one(1), three(3);
  training::Workspace w1(m1.arch, 5), w3(m2.arch, 5);
  auto t1 = training::compute_gradients(m1, w1, b, 0.333f, 0.1f, 0.2f, one);
  auto t3 = training::compute_gradients(m2, w3, b, 0.333f, 0.1f, 0.2f, three);
  CHECK(t1.policy == t3.policy);
  auto g1 = w1.grads.tensors(), g3 = w3.grads.tensors();
  for (size_t i = 0; i < g1.size(); ++i) {
    CAPTURE(g1[i].name);
    CHECK(g1[i].tensor->data == g3[i].tensor->data);
  }
  // The running statistics moved, identically.
  CHECK(m1.stem.bn.mean.data == m2.stem.bn.mean.data);
  CHECK(m1.stem.bn.mean.data != before.stem.bn.mean.data);
}

TEST_CASE("whole network: EVAL mode computes what the engine's reference evaluator computes", "[train]") {
  Model m = random_model(2, 8, Activation::SWISH, 50);
  std::mt19937_64 rng(51);
  training::Batch b = random_batch(3, rng);
  ThreadPool pool(2);
  training::Activations acts(m.arch, 3);
  training::forward(m, acts, b.features, 3, training::Mode::EVAL, 0.0f, pool);
  BackendOptions o;
  o.kind = BackendKind::REFERENCE;
  auto ref = make_evaluator(m, o);
  std::vector<float> policy(3 * POLICY_SIZE), value(3);
  ref->evaluate(b.features, 3, policy.data(), value.data());
  for (int i = 0; i < 3 * POLICY_SIZE; i += 7) CHECK(acts.policy[i] == Approx(policy[i]).margin(1e-5));
  for (int i = 0; i < 3; ++i) CHECK(sigmoid(acts.value_logit[i]) == Approx(value[i]).margin(1e-6));
}
