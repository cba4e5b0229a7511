// Optimizers, the learning-rate schedule and gradient clipping, on the fp32 master weights.
//
// Weight decay applies to the convolution and fully connected weights (tensors of rank >= 2), not
// to batch-norm gammas and betas or biases: decaying those only fights the normalisation.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nn/model.h"

namespace jiriki::training {

enum class OptimizerKind { SGD, ADAMW };
OptimizerKind parse_optimizer(const std::string& name);  // "sgd" | "adamw"; throws std::invalid_argument
const char* optimizer_name(OptimizerKind k);

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::SGD;
  double weight_decay = 1e-4;
  // SGD (PyTorch's formulation): g = grad + wd w;  buf = momentum buf + g;
  //   w -= lr (g + momentum buf) with Nesterov, w -= lr buf without.
  double momentum = 0.9;
  bool nesterov = true;
  // AdamW (decoupled decay): w -= lr wd w;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
  //   w -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
};

class Optimizer {
 public:
  Optimizer(const OptimizerConfig& config, nn::Model& model);

  // One update of every trainable tensor of `model` from the same tensor of `grads`.
  void step(nn::Model& model, const nn::Model& grads, double lr);

  const OptimizerConfig& config() const { return config_; }
  int64_t steps() const { return steps_; }
  void set_steps(int64_t s) { steps_ = s; }

  // The state tensors with stable names ("momentum.<tensor>", "adam_m.<tensor>", "adam_v.<tensor>"),
  // for checkpoints.
  struct NamedState {
    std::string name;
    nn::Tensor* tensor;
  };
  std::vector<NamedState> state();

 private:
  OptimizerConfig config_;
  std::vector<nn::Tensor> first_, second_;  // per trainable tensor: momentum / Adam m, Adam v
  std::vector<std::string> names_;          // of the trainable tensors, in Model::tensors() order
  int64_t steps_ = 0;
};

// sqrt(sum of squares) over every trainable tensor of a gradient model (summed in double).
double gradient_norm(const nn::Model& grads);
// Multiplies every trainable gradient by s.
void scale_gradients(nn::Model& grads, float s);

// Learning rate at each step: linear warm-up from lr / warmup_steps to lr over the first
// warmup_steps steps, then
//   COSINE:   from lr down to lr * final_ratio at total_steps along half a cosine,
//   STEP:     lr * gamma ^ floor((step - warmup_steps) / step_every),
//   CONSTANT: lr.
struct Schedule {
  enum Kind { COSINE, STEP, CONSTANT } kind = COSINE;
  double lr = 0.1;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  double final_ratio = 0.0;
  int64_t step_every = 0;  // STEP only; > 0
  double gamma = 0.1;      // STEP only

  double at(int64_t step) const;
};
Schedule::Kind parse_schedule(const std::string& name);  // "cosine" | "step" | "constant"; throws
const char* schedule_name(Schedule::Kind k);

}  // namespace jiriki::training
