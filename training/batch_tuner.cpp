#include "training/batch_tuner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <stdexcept>

namespace jiriki::training {

// ---------------------------------------------------------------------------------------------
// NoiseScaleEstimator

NoiseScaleEstimator::NoiseScaleEstimator(double decay, int64_t min_samples)
    : decay_(decay), min_samples_(std::max<int64_t>(min_samples, 1)) {
  if (!(decay >= 0 && decay < 1)) throw std::invalid_argument("noise scale: EMA decay must lie in [0, 1)");
}

void NoiseScaleEstimator::add(double small_norm2, double small_batch, double big_norm2, double big_batch) {
  if (!(small_batch > 0 && big_batch > small_batch))
    throw std::invalid_argument("noise scale: needs 0 < small batch < big batch");
  if (!std::isfinite(small_norm2) || !std::isfinite(big_norm2)) return;
  // E|g_B|^2 = |G|^2 + tr(Sigma)/B at both sizes: two equations, solved for the two unknowns.
  const double g2 = (big_batch * big_norm2 - small_batch * small_norm2) / (big_batch - small_batch);
  const double trace = (small_norm2 - big_norm2) / (1.0 / small_batch - 1.0 / big_batch);
  ema_g2_ = decay_ * ema_g2_ + (1 - decay_) * g2;
  ema_trace_ = decay_ * ema_trace_ + (1 - decay_) * trace;
  decay_pow_ *= decay_;
  ++samples_;
}

// The raw EMAs start at 0 and so underweight the first samples by 1 - decay^n; dividing that out makes
// the average an honest weighted mean from the first sample on.
double NoiseScaleEstimator::grad_norm2() const { return samples_ == 0 ? 0.0 : ema_g2_ / (1 - decay_pow_); }

double NoiseScaleEstimator::trace_sigma() const { return samples_ == 0 ? 0.0 : ema_trace_ / (1 - decay_pow_); }

bool NoiseScaleEstimator::ready() const { return samples_ >= min_samples_ && grad_norm2() > 0; }

double NoiseScaleEstimator::noise_scale() const {
  if (!ready()) return std::numeric_limits<double>::quiet_NaN();
  return std::max(0.0, trace_sigma() / grad_norm2());
}

// ---------------------------------------------------------------------------------------------
// Step-time model

double StepTimeModel::compute_seconds(double b) const { return alpha_c + beta_c * b; }

double StepTimeModel::step_seconds(double b) const {
  const double tc = compute_seconds(b);
  // (x^g + y^g)^(1/g) = m (1 + (s/m)^g)^(1/g) with m the larger, s the smaller: no overflow at large g.
  const double m = std::max(tc, t_n), s = std::min(tc, t_n);
  if (m <= 0) return 0;
  return m * std::pow(1 + std::pow(s / m, gamma), 1 / gamma);
}

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Sum of squared relative errors of the modelled step times: relative, so that the small batches'
// short steps count as much as the large ones'.
double relative_error(const StepTimeModel& m, const std::vector<StepSample>& samples) {
  double e = 0;
  for (const StepSample& s : samples) {
    const double r = (m.step_seconds(s.batch) - s.step_seconds) / s.step_seconds;
    e += r * r;
  }
  return e;
}

}  // namespace

StepTimeModel fit_step_time(const std::vector<StepSample>& samples) {
  std::set<double> batches;
  for (const StepSample& s : samples) {
    batches.insert(s.batch);
    if (!(s.step_seconds > 0)) throw std::invalid_argument("fit_step_time: step times must be positive");
  }
  if (batches.size() < 2) throw std::invalid_argument("fit_step_time: needs samples at 2 or more distinct batches");

  StepTimeModel m;
  // Compute time: ordinary least squares of compute_seconds on batch.
  const double n = double(samples.size());
  double mean_b = 0, mean_c = 0;
  for (const StepSample& s : samples) mean_b += s.batch / n, mean_c += s.compute_seconds / n;
  double sxx = 0, sxy = 0;
  for (const StepSample& s : samples) {
    sxx += (s.batch - mean_b) * (s.batch - mean_b);
    sxy += (s.batch - mean_b) * (s.compute_seconds - mean_c);
  }
  m.beta_c = sxy / sxx;  // sxx > 0: two distinct batches
  m.alpha_c = mean_c - m.beta_c * mean_b;
  // Negative coefficients are timing noise (a step cannot get faster with more samples, nor cost less
  // than nothing); rather than clamp one and keep the other, refit the best line under the constraint.
  if (m.beta_c < 0) {
    m.beta_c = 0, m.alpha_c = std::max(0.0, mean_c);
  } else if (m.alpha_c < 0) {
    double sbc = 0, sbb = 0;  // through the origin
    for (const StepSample& s : samples) sbc += s.batch * s.compute_seconds, sbb += s.batch * s.batch;
    m.alpha_c = 0, m.beta_c = std::max(0.0, sbc / sbb);
  }

  std::vector<double> comm;
  for (const StepSample& s : samples) comm.push_back(s.comm_seconds);
  m.t_n = std::max(0.0, median(comm));

  // gamma: the error need not be unimodal in gamma over [1, 10], so a grid finds the basin and a
  // golden-section search refines inside the neighbouring grid cells. Without communication (t_n = 0)
  // gamma has no effect, and 1 is kept.
  m.gamma = 1;
  if (m.t_n > 0) {
    constexpr double lo = 1, hi = 10, cell = 0.05;
    double best_gamma = lo, best_error = std::numeric_limits<double>::infinity();
    for (int i = 0; lo + i * cell <= hi + 1e-9; ++i) {
      m.gamma = lo + i * cell;
      const double e = relative_error(m, samples);
      if (e < best_error) best_error = e, best_gamma = m.gamma;
    }
    double a = std::max(lo, best_gamma - cell), b = std::min(hi, best_gamma + cell);
    const double inv_phi = (std::sqrt(5.0) - 1) / 2;
    auto error_at = [&](double g) {
      m.gamma = g;
      return relative_error(m, samples);
    };
    double x1 = b - inv_phi * (b - a), x2 = a + inv_phi * (b - a);
    double e1 = error_at(x1), e2 = error_at(x2);
    while (b - a > 1e-7) {
      if (e1 <= e2) {
        b = x2, x2 = x1, e2 = e1;
        x1 = b - inv_phi * (b - a), e1 = error_at(x1);
      } else {
        a = x1, x1 = x2, e1 = e2;
        x2 = a + inv_phi * (b - a), e2 = error_at(x2);
      }
    }
    const double refined = 0.5 * (a + b);
    m.gamma = error_at(refined) <= best_error ? refined : best_gamma;
  }
  return m;
}

// ---------------------------------------------------------------------------------------------
// Efficiency, goodput and the choice

double batch_efficiency(double global_batch, double noise_scale, double base_batch) {
  const double bn = std::max(0.0, noise_scale);
  return (bn + base_batch) / (bn + global_batch);
}

TunerDecision choose_batch(const StepTimeModel& model, const std::vector<int>& candidates, int replicas,
                           double noise_scale, double base_global_batch) {
  if (candidates.empty()) throw std::invalid_argument("choose_batch: no candidate batches");
  if (replicas < 1) throw std::invalid_argument("choose_batch: replicas must be >= 1");
  const bool measured = std::isfinite(noise_scale);

  TunerDecision d{0, {}, noise_scale};
  double best = -1;
  for (int b : candidates) {
    if (b < 1) throw std::invalid_argument("choose_batch: candidate batches must be >= 1");
    TunerRow r{};
    r.batch = b;
    const double step = model.step_seconds(b), compute = model.compute_seconds(b);
    r.step_ms = 1e3 * step;
    r.compute_ms = 1e3 * compute;
    r.exposed_comm_ms = 1e3 * std::max(0.0, step - compute);
    const double global = double(replicas) * b;
    r.samples_per_second = step > 0 ? global / step : std::numeric_limits<double>::infinity();
    r.efficiency = measured ? batch_efficiency(global, noise_scale, base_global_batch) : 1.0;
    r.goodput = r.samples_per_second * r.efficiency;
    if (r.goodput > best || (r.goodput == best && b < d.batch)) best = r.goodput, d.batch = b;
    d.table.push_back(r);
  }
  return d;
}

int keep_or_switch(const TunerDecision& d, int current, double min_gain) {
  double best = -1, now = -1;
  for (const TunerRow& r : d.table) {
    if (r.batch == d.batch) best = r.goodput;
    if (r.batch == current) now = r.goodput;
  }
  return now >= 0 && best < (1 + min_gain) * now ? current : d.batch;
}

std::string format_table(const TunerDecision& d) {
  std::string out;
  char line[160];
  if (std::isfinite(d.noise_scale)) std::snprintf(line, sizeof line, "gradient noise scale %.1f\n", d.noise_scale);
  else std::snprintf(line, sizeof line, "gradient noise scale not measured: efficiency taken as 1\n");
  out += line;
  std::snprintf(line, sizeof line, "%8s %10s %11s %16s %13s %11s %13s\n", "batch", "step ms", "compute ms",
                "exposed comm ms", "samples/s", "efficiency", "goodput");
  out += line;
  for (const TunerRow& r : d.table) {
    std::snprintf(line, sizeof line, "%8d %10.3f %11.3f %16.3f %13.1f %11.4f %13.1f%s\n", r.batch, r.step_ms,
                  r.compute_ms, r.exposed_comm_ms, r.samples_per_second, r.efficiency, r.goodput,
                  r.batch == d.batch ? " *" : "");
    out += line;
  }
  return out;
}

std::vector<int> timed_batches(const std::vector<int>& candidates, int start) {
  if (candidates.size() <= 2) return candidates;
  const auto listed = std::find(candidates.begin(), candidates.end(), start);
  const size_t i = listed != candidates.end() ? size_t(listed - candidates.begin()) : candidates.size() / 2;
  const size_t last = candidates.size() - 1;
  const size_t other = i + 2 <= last ? i + 2 : i < last ? last : i - 2;
  return {candidates[std::min(i, other)], candidates[std::max(i, other)]};
}

std::vector<int> geometric_batches(int lo, int hi) {
  if (lo < 1) throw std::invalid_argument("geometric_batches: lo must be >= 1");
  std::vector<int> v;
  for (int64_t b = lo; b <= hi; b *= 2) v.push_back(int(b));  // int64_t: doubling past INT_MAX is safe
  return v;
}

// ---------------------------------------------------------------------------------------------
// Learning rate

double scaled_lr(double base_lr, double base_global_batch, double global_batch, bool adam) {
  if (!(base_global_batch > 0 && global_batch > 0)) throw std::invalid_argument("scaled_lr: batches must be > 0");
  const double k = global_batch / base_global_batch;
  return base_lr * (adam ? std::sqrt(k) : k);
}

LrRamp::LrRamp(double from_lr, double to_lr, int64_t steps) : from_(from_lr), to_(to_lr), steps_(steps) {}

double LrRamp::at(int64_t steps_since_change) const {
  if (steps_ <= 0 || steps_since_change >= steps_) return to_;
  if (steps_since_change <= 0) return from_;
  const double t = double(steps_since_change) / double(steps_);
  return from_ + (to_ - from_) * t;
}

// ---------------------------------------------------------------------------------------------
// BatchTuner

BatchTuner::BatchTuner(const Config& config, int batch, int64_t step)
    : config_(config),
      half_noise_(config.replicas == 1 && config.enabled),
      change_step_(step),
      compare_halves_(config.compare_halves && config.replicas > 1) {
  if (config_.enabled && config_.candidates.empty()) throw std::invalid_argument("batch tuner: no candidate batches");
  ramp_ = LrRamp(lr_scale(batch), lr_scale(batch), 0);
}

double BatchTuner::lr_scale(int batch) const {
  return scaled_lr(1.0, config_.reference_global_batch, double(batch) * config_.replicas, config_.adam);
}

bool BatchTuner::measure_half(int64_t step, int size) const {
  return (half_noise_ || compare_halves_) && (step + 1) % config_.noise_every == 0 && size % 2 == 0;
}

void BatchTuner::add_step(double local_norm2, double grad_norm, double half_norm2, bool measured_half, int size) {
  if (measured_half && std::isnan(half_norm2)) {
    half_noise_ = compare_halves_ = false;  // the device cannot measure halves
  } else if (measured_half && config_.replicas == 1) {
    noise_.add(half_norm2, double(size / 2), grad_norm * grad_norm, double(size));
  } else if (measured_half) {
    pending_half_ += half_norm2;
    pending_half_local_ += local_norm2;
    ++pending_halves_;
  }
  pending_local_ += local_norm2;
  pending_global_ += grad_norm * grad_norm;
  ++pending_steps_;
}

void BatchTuner::add_sample(double local_sum_over_replicas, int batch, double half_sum_over_replicas,
                            double half_local_sum_over_replicas) {
  if (pending_halves_ > 0 && batch % 2 == 0) {
    const double n = double(config_.replicas) * double(pending_halves_);
    halves_.add(half_sum_over_replicas / n, batch / 2, half_local_sum_over_replicas / n, batch);
  }
  pending_half_ = pending_half_local_ = 0;
  pending_halves_ = 0;
  if (pending_steps_ == 0) return;
  const double steps = double(pending_steps_);
  noise_.add(local_sum_over_replicas / (config_.replicas * steps), batch, pending_global_ / steps,
             double(batch) * config_.replicas);
  pending_local_ = pending_global_ = 0;
  pending_steps_ = 0;
}

bool BatchTuner::decision_due(int64_t step, int batch) {
  noise_measured_ = noise_measured_ || noise_.ready();
  const bool awaiting_halves = half_noise_ && batch % 2 == 0 && !noise_.measured();
  return config_.enabled && step % config_.tune_every == 0 &&
         (noise_.ready() || (config_.replicas == 1 && !noise_measured_ && !awaiting_halves));
}

TunerDecision BatchTuner::decide(int batch, int* best) const {
  TunerDecision d = choose_batch(cost_, config_.candidates, config_.replicas,
                                 noise_.ready() ? noise_.noise_scale() : std::numeric_limits<double>::quiet_NaN(),
                                 double(config_.replicas) * config_.candidates.front());
  if (best) *best = d.batch;
  d.batch = keep_or_switch(d, batch, TUNER_MIN_GAIN);
  return d;
}

void BatchTuner::switched(int64_t step, int batch) {
  ramp_ = LrRamp(lr_factor(step), lr_scale(batch), config_.lr_ramp_steps);
  change_step_ = step;
  pending_local_ = pending_global_ = 0;
  pending_steps_ = 0;
  pending_half_ = pending_half_local_ = 0;
  pending_halves_ = 0;
}

BatchTuner::State BatchTuner::state() const {
  return {cost_,        noise_.state(), ramp_.from_lr(), ramp_.to_lr(), ramp_.steps(),
          change_step_, pending_local_, pending_global_, pending_steps_};
}

void BatchTuner::restore(const State& s) {
  cost_ = s.cost;
  noise_.restore(s.noise);
  ramp_ = LrRamp(s.ramp_from, s.ramp_to, s.ramp_steps);
  change_step_ = s.change_step;
  pending_local_ = s.pending_local;
  pending_global_ = s.pending_global;
  pending_steps_ = s.pending_steps;
}

}  // namespace jiriki::training
