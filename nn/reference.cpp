// The reference evaluator: the training form of the network (batch norms not folded) run through
// the one forward pass of nn/forward.h (direct loops of nn/layers.cpp, batch norm in EVAL mode) on
// one thread, the trainer's own arithmetic. Slow; used as the oracle in tests, so that a comparison
// checks both a backend's arithmetic and the batch-norm folding it relies on.
#include <algorithm>
#include <vector>

#include "nn/backend.h"
#include "nn/forward.h"
#include "nn/layers.h"

namespace jiriki::nn {

namespace {

// Positions per forward pass: every intermediate tensor is kept (Activations), so a large batch
// runs in pieces; in EVAL mode a position's outputs do not depend on the others in its piece.
constexpr int CHUNK = 16;

class ReferenceEvaluator : public Evaluator {
 public:
  ReferenceEvaluator(const Model& m, int max_batch) : m_(m), max_batch_(max_batch) {}

  void evaluate(const float* features, int n, float* policy_logits, float* value) override {
    check_batch_size(n, max_batch_);
    Activations acts(m_.arch, std::min(n, CHUNK));
    for (int first = 0; first < n; first += CHUNK) {
      const int k = std::min(CHUNK, n - first);
      forward(m_, acts, features + int64_t(first) * INPUT_SIZE, k, Mode::EVAL, 0.0f, pool_);
      std::copy_n(acts.policy.begin(), int64_t(k) * POLICY_SIZE, policy_logits + int64_t(first) * POLICY_SIZE);
      for (int b = 0; b < k; ++b) value[first + b] = sigmoid(acts.value_logit[b]);
    }
  }

  int max_batch() const override { return max_batch_; }
  std::string name() const override { return "reference (direct loops, fp32 with double accumulation)"; }

 private:
  Model m_;
  int max_batch_;
  ThreadPool pool_{1};
};

}  // namespace

std::unique_ptr<Evaluator> make_reference_evaluator(const Model& model, const BackendOptions& options) {
  return std::make_unique<ReferenceEvaluator>(model, options.max_batch);
}

}  // namespace jiriki::nn
