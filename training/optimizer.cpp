#include "training/optimizer.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace jiriki::training {

OptimizerKind parse_optimizer(const std::string& name) {
  if (name == "sgd") return OptimizerKind::SGD;
  if (name == "adamw") return OptimizerKind::ADAMW;
  throw std::invalid_argument("unknown optimizer '" + name + "' (expected sgd or adamw)");
}

const char* optimizer_name(OptimizerKind k) { return k == OptimizerKind::ADAMW ? "adamw" : "sgd"; }

Optimizer::Optimizer(const OptimizerConfig& config, nn::Model& model) : config_(config) {
  for (auto& t : model.tensors()) {
    if (!t.trainable) continue;
    names_.push_back(t.name);
    first_.emplace_back(t.tensor->shape);
    if (config.kind == OptimizerKind::ADAMW) second_.emplace_back(t.tensor->shape);
  }
}

std::vector<Optimizer::NamedState> Optimizer::state() {
  std::vector<NamedState> out;
  const char* first = config_.kind == OptimizerKind::ADAMW ? "adam_m." : "momentum.";
  for (size_t i = 0; i < names_.size(); ++i) out.push_back({first + names_[i], &first_[i]});
  for (size_t i = 0; i < second_.size(); ++i) out.push_back({"adam_v." + names_[i], &second_[i]});
  return out;
}

void Optimizer::step(nn::Model& model, const nn::Model& grads, double lr) {
  ++steps_;
  auto params = model.tensors();
  auto gs = grads.tensors();  // same order as params
  const OptimizerConfig& c = config_;
  // Adam's bias corrections for this step.
  const double bc1 = 1.0 - std::pow(c.beta1, double(steps_)), bc2 = 1.0 - std::pow(c.beta2, double(steps_));
  size_t k = 0;
  for (size_t t = 0; t < params.size(); ++t) {
    if (!params[t].trainable) continue;
    float* w = params[t].tensor->ptr();
    const float* g = gs[t].tensor->ptr();
    const size_t n = params[t].tensor->size();
    const double wd = params[t].tensor->shape.size() >= 2 ? c.weight_decay : 0.0;
    float* m = first_[k].ptr();
    if (c.kind == OptimizerKind::SGD) {
      for (size_t i = 0; i < n; ++i) {
        double gi = g[i] + wd * w[i];
        m[i] = float(c.momentum * m[i] + gi);
        double update = c.nesterov ? gi + c.momentum * m[i] : m[i];
        w[i] = float(w[i] - lr * update);
      }
    } else {
      float* v = second_[k].ptr();
      for (size_t i = 0; i < n; ++i) {
        double wi = w[i] * (1.0 - lr * wd);
        m[i] = float(c.beta1 * m[i] + (1.0 - c.beta1) * g[i]);
        v[i] = float(c.beta2 * v[i] + (1.0 - c.beta2) * double(g[i]) * g[i]);
        w[i] = float(wi - lr * (m[i] / bc1) / (std::sqrt(v[i] / bc2) + c.eps));
      }
    }
    ++k;
  }
}

double gradient_norm(const nn::Model& grads) {
  double sum = 0;
  for (auto& t : grads.tensors())
    if (t.trainable)
      for (float x : t.tensor->data) sum += double(x) * x;
  return std::sqrt(sum);
}

void scale_gradients(nn::Model& grads, float s) {
  for (auto& t : grads.tensors())
    if (t.trainable)
      for (float& x : t.tensor->data) x *= s;
}

double Schedule::at(int64_t step) const {
  if (step < warmup_steps) return lr * double(step + 1) / double(warmup_steps);
  const int64_t s = step - warmup_steps;
  switch (kind) {
    case COSINE: {
      const int64_t span = std::max<int64_t>(1, total_steps - warmup_steps);
      const double progress = std::min(1.0, double(s) / double(span));
      return lr * (final_ratio + (1.0 - final_ratio) * 0.5 * (1.0 + std::cos(M_PI * progress)));
    }
    case STEP: return lr * std::pow(gamma, double(s / step_every));
    case CONSTANT: return lr;
  }
  return lr;
}

Schedule::Kind parse_schedule(const std::string& name) {
  if (name == "cosine") return Schedule::COSINE;
  if (name == "step") return Schedule::STEP;
  if (name == "constant") return Schedule::CONSTANT;
  throw std::invalid_argument("unknown schedule '" + name + "' (expected cosine, step or constant)");
}

const char* schedule_name(Schedule::Kind k) {
  switch (k) {
    case Schedule::COSINE: return "cosine";
    case Schedule::STEP: return "step";
    case Schedule::CONSTANT: return "constant";
  }
  return "?";
}

}  // namespace jiriki::training
