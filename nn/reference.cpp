// The reference evaluator: the training form of the network (batch norms not folded) run layer by
// layer with the direct loops of nn/layers.cpp. Slow; used as the oracle in tests, so that a
// comparison checks both a backend's arithmetic and the batch-norm folding it relies on.
#include <vector>

#include "nn/backend.h"
#include "nn/layers.h"

namespace jiriki::nn {

namespace {

class ReferenceEvaluator : public Evaluator {
 public:
  ReferenceEvaluator(const Model& m, int max_batch) : m_(m), max_batch_(max_batch) {}

  void evaluate(const float* features, int n, float* policy_logits, float* value) override {
    check_batch_size(n, max_batch_);
    const int c = m_.arch.channels;
    const Activation act = m_.arch.activation;
    const float eps = m_.arch.bn_eps;
    const int64_t hsize = int64_t(n) * c * SQUARES;
    std::vector<float> h(hsize), t(hsize), u(hsize);

    conv_forward(h.data(), features, m_.stem.weight.ptr(), nullptr, n, INPUT_PLANES, c, 3);
    batchnorm_forward(h.data(), h.data(), m_.stem.bn, eps, n, c);
    activation_forward(h.data(), h.data(), hsize, act);

    for (const auto& b : m_.blocks) {
      conv_forward(t.data(), h.data(), b.conv1.weight.ptr(), nullptr, n, c, c, 3);
      batchnorm_forward(t.data(), t.data(), b.conv1.bn, eps, n, c);
      activation_forward(t.data(), t.data(), hsize, act);
      conv_forward(u.data(), t.data(), b.conv2.weight.ptr(), nullptr, n, c, c, 3);
      batchnorm_forward(u.data(), u.data(), b.conv2.bn, eps, n, c);
      add_forward(h.data(), u.data(), hsize);
      activation_forward(h.data(), h.data(), hsize, act);
    }

    conv_forward(policy_logits, h.data(), m_.policy_conv.ptr(), nullptr, n, c, POLICY_LABELS, 1);
    for (int b = 0; b < n; ++b) add_forward(policy_logits + int64_t(b) * POLICY_SIZE, m_.policy_bias.ptr(), POLICY_SIZE);

    std::vector<float> v(int64_t(n) * POLICY_SIZE), hidden(int64_t(n) * VALUE_HIDDEN), logit(n);
    conv_forward(v.data(), h.data(), m_.value_conv.weight.ptr(), nullptr, n, c, VALUE_CHANNELS, 1);
    batchnorm_forward(v.data(), v.data(), m_.value_conv.bn, eps, n, VALUE_CHANNELS);
    activation_forward(v.data(), v.data(), int64_t(v.size()), act);
    linear_forward(hidden.data(), v.data(), m_.value_fc1_weight.ptr(), m_.value_fc1_bias.ptr(), n, POLICY_SIZE, VALUE_HIDDEN);
    activation_forward(hidden.data(), hidden.data(), int64_t(hidden.size()), act);
    linear_forward(logit.data(), hidden.data(), m_.value_fc2_weight.ptr(), m_.value_fc2_bias.ptr(), n, VALUE_HIDDEN, 1);
    for (int b = 0; b < n; ++b) value[b] = sigmoid(logit[b]);
  }

  int max_batch() const override { return max_batch_; }
  std::string name() const override { return "reference (direct loops, fp32 with double accumulation)"; }

 private:
  Model m_;
  int max_batch_;
};

}  // namespace

std::unique_ptr<Evaluator> make_reference_evaluator(const Model& model, const BackendOptions& options) {
  return std::make_unique<ReferenceEvaluator>(model, options.max_batch);
}

}  // namespace jiriki::nn
