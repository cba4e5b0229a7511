// The arithmetic behind choosing the per-GPU minibatch: no I/O, no CUDA.
//
// The tuner maximises goodput = throughput x statistical efficiency, as Pollux (Qiao et al., OSDI 2021)
// does. Throughput comes from a model of one step's time fitted to measured steps; efficiency comes
// from the gradient noise scale of McCandlish et al. 2018 ("An Empirical Model of Large-Batch
// Training"), which says how much of each sample's progress survives when the global batch grows.
// A larger batch amortises the fixed costs of a step (kernel launches, the all-reduce) but, past the
// noise scale, averages away noise that no longer limits progress; the best batch balances the two.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace jiriki::training {

// Estimates the gradient noise scale B_noise = tr(Sigma) / |G|^2 (Sigma: covariance of a per-sample
// gradient, G: the true gradient) from gradient norms measured at two batch sizes, with the unbiased
// two-batch estimators of McCandlish et al., appendix A.1. With E|g_B|^2 = |G|^2 + tr(Sigma)/B:
//   |G|^2    ~ (B_big |g_big|^2 - B_small |g_small|^2) / (B_big - B_small)
//   tr(Sigma) ~ (|g_small|^2 - |g_big|^2) / (1/B_small - 1/B_big)
// Each single-step estimate is very noisy (|G|^2 can come out negative), so the two are averaged
// separately and the noise scale is the ratio of the averages: a ratio of noisy quantities is biased,
// an average of ratios more so. The averages are exponential moving averages, bias-corrected as in
// Adam, so that early values are not pulled towards zero and old training states fade out.
class NoiseScaleEstimator {
 public:
  // decay: EMA factor in [0, 1); min_samples: steps needed before ready() (early EMAs rest on few,
  // very noisy estimates). Throws std::invalid_argument on a decay outside [0, 1).
  explicit NoiseScaleEstimator(double decay = 0.99, int64_t min_samples = 20);

  // One step's measurement. small_norm2 = |g_small|^2 of a gradient averaged over small_batch samples
  // (data parallel: the mean over replicas of each replica's squared local gradient norm, batch b);
  // big_norm2 = |g_big|^2 of the gradient averaged over big_batch samples (the all-reduced one, N b).
  // Throws std::invalid_argument unless 0 < small_batch < big_batch. A non-finite norm (a step whose
  // mixed-precision gradients overflowed) is ignored rather than poisoning the averages.
  void add(double small_norm2, double small_batch, double big_norm2, double big_batch);

  // True once min_samples steps were added and the average |G|^2 is positive.
  bool ready() const;
  // True once min_samples steps were added, whatever |G|^2 came to (not positive: the gradient is
  // lost in its noise, so the noise scale is beyond measure and large batches lose nothing).
  bool measured() const { return samples_ >= min_samples_; }
  // EMA(tr Sigma) / EMA(|G|^2), clamped at 0 below (a negative trace is estimation noise); NaN while
  // !ready().
  double noise_scale() const;

  // Bias-corrected EMA of the tr(Sigma) estimates (0 before any sample).
  double trace_sigma() const;
  // Bias-corrected EMA of the |G|^2 estimates (0 before any sample).
  double grad_norm2() const;
  // Number of samples taken into the averages.
  int64_t samples() const { return samples_; }

  // The averages as they stand, for a checkpoint, and their return on resume.
  struct State {
    double ema_trace = 0, ema_g2 = 0, decay_pow = 1;
    int64_t samples = 0;
  };
  State state() const { return {ema_trace_, ema_g2_, decay_pow_, samples_}; }
  void restore(const State& s) {
    ema_trace_ = s.ema_trace, ema_g2_ = s.ema_g2, decay_pow_ = s.decay_pow, samples_ = s.samples;
  }

 private:
  double decay_;
  int64_t min_samples_;
  double ema_trace_ = 0, ema_g2_ = 0;  // raw EMAs, before bias correction
  double decay_pow_ = 1;               // decay^samples, for the bias correction
  int64_t samples_ = 0;
};

// One measured training step at per-GPU batch `batch`: its whole time, its time without the gradient
// communication, and the time of the all-reduce measured alone (all in seconds).
struct StepSample {
  double batch, step_seconds, compute_seconds, comm_seconds;
};

// Pollux's step-time model: T(b) = (T_c(b)^gamma + T_n^gamma)^(1/gamma), T_c(b) = alpha_c + beta_c b,
// T_n constant (the all-reduce moves a gradient of fixed size whatever the batch). gamma interpolates
// between no overlap of compute and communication (gamma = 1: T = T_c + T_n) and perfect overlap
// (gamma -> infinity: T = max(T_c, T_n)).
struct StepTimeModel {
  double alpha_c = 0, beta_c = 0, t_n = 0, gamma = 1;

  // Modelled seconds of one step at per-GPU batch b.
  double step_seconds(double b) const;
  // Modelled seconds of the computation alone, alpha_c + beta_c b.
  double compute_seconds(double b) const;
};

// Fits a StepTimeModel to measured steps (several samples per batch are welcome: they average out
// timing noise). alpha_c, beta_c: least squares on (batch, compute_seconds), kept >= 0; t_n: the
// median of comm_seconds (robust to the odd slow all-reduce); gamma: a search in [1, 10] minimising
// the squared relative error of step_seconds. Throws std::invalid_argument with fewer than 2 distinct
// batches or a non-positive step_seconds.
StepTimeModel fit_step_time(const std::vector<StepSample>& samples);

// The fraction of a sample's progress kept at global batch B relative to batch B0:
// (B_noise + B0) / (B_noise + B). McCandlish's steps S(B) = S_min (1 + B_noise/B) give per-sample
// progress proportional to 1 / (B_noise + B); this is the same ratio as AdaScale's gain divided by the
// scale B/B0. A noise scale below 0 is taken as 0. noise_scale must not be NaN (see choose_batch).
double batch_efficiency(double global_batch, double noise_scale, double base_batch);

// One candidate batch as the tuner judged it (times in milliseconds, rates per second).
struct TunerRow {
  int batch;
  double step_ms, compute_ms, exposed_comm_ms, samples_per_second, efficiency, goodput;
};

// The chosen per-GPU batch, every candidate's row (in the order given), and the noise scale used.
struct TunerDecision {
  int batch;
  std::vector<TunerRow> table;
  double noise_scale;
};

// Scores each per-GPU candidate batch b on `replicas` GPUs: samples/s = replicas b / T(b), efficiency
// = batch_efficiency(replicas b, noise_scale, base_global_batch), goodput = their product, and picks
// the highest goodput (ties go to the smaller batch: same progress, less memory, smaller lr change).
// A NaN or infinite noise_scale (not measured yet) makes every efficiency 1, so the choice is pure
// throughput. Throws std::invalid_argument on no candidates, a candidate < 1 or replicas < 1.
TunerDecision choose_batch(const StepTimeModel& model, const std::vector<int>& candidates, int replicas,
                           double noise_scale, double base_global_batch);

// The batch to run next: the decision's, unless `current` is among its rows and the decision's
// goodput beats current's by less than the fraction min_gain. A change costs (buffers switched, the
// loader restarted, a learning-rate ramp), and a noisy noise scale near a tie between two candidates
// would otherwise flip between them at every decision (seen on an H200: 512 and 1024 alternating).
int keep_or_switch(const TunerDecision& decision, int current, double min_gain);

// The trainer's min_gain: a change must promise 5% more goodput.
inline constexpr double TUNER_MIN_GAIN = 0.05;

// The decision as a fixed-width table for logs, the chosen row marked with '*'.
std::string format_table(const TunerDecision& decision);

// The candidates whose steps are timed to fit the model: all of up to two, else the starting batch
// (the middle candidate if it is none) and the one two places above it, four times as large in a
// geometric list (the largest if there is none that far; two places below from the largest). The
// step time is close to linear in the batch, and the line through 64 and 256 predicts the H200's
// steps at 128-512, where the tuner's choices fall, within 2% (through 64 and 1,024: up to 8%
// low there). Each timed batch costs a device of its own before training starts (on an H200 0.7-3 s,
// most of it compiling cuDNN's kernels), the starting batch's is needed anyway, and a batch four
// times the start is one the tuner often moves to, which then costs nothing more.
std::vector<int> timed_batches(const std::vector<int>& candidates, int start);

// lo, 2 lo, 4 lo, ... up to hi: hi itself is included only when it is lo times a power of two (the
// list stays geometric). Empty when lo > hi; throws std::invalid_argument when lo < 1.
std::vector<int> geometric_batches(int lo, int hi);

// The learning rate for global batch B given one tuned at B0: linear scaling B/B0 for SGD (Goyal et
// al. 2017), square-root scaling sqrt(B/B0) for Adam(W), whose update is already normalised by the
// gradient's second moment (Malladi et al. 2022). Throws std::invalid_argument on a batch <= 0.
double scaled_lr(double base_lr, double base_global_batch, double global_batch, bool adam);

// A linear ramp of the learning rate after a batch change, so that the optimiser's momentum, tuned to
// the old step size, is not hit by a jump of the new one.
class LrRamp {
 public:
  // From from_lr (at 0 steps) to to_lr (at `steps` steps and after); steps <= 0 means no ramp.
  LrRamp(double from_lr, double to_lr, int64_t steps);
  // The learning rate `steps_since_change` steps after the change (negative counts as 0).
  double at(int64_t steps_since_change) const;
  double from_lr() const { return from_; }
  double to_lr() const { return to_; }
  int64_t steps() const { return steps_; }

 private:
  double from_, to_;
  int64_t steps_;
};

// --batch auto's state between the trainer's steps, and its decisions: the step-time model (set
// once from measured steps), the noise scale's averages (from every step's gradient norms), the
// learning-rate factor of the current batch with its ramp after a change, and when to decide. The
// trainer gives it measurements and acts on what it says; the state travels with checkpoints
// (state() and restore()), so that a resumed run decides as the interrupted one would have. Without
// --batch auto it still estimates the noise scale (logged) and gives the learning-rate factor of
// the batch in use.
class BatchTuner {
 public:
  struct Config {
    bool enabled = false;         // --batch auto: decides; else only measures
    std::vector<int> candidates;  // per-replica batches (enabled only)
    int replicas = 1;
    double reference_global_batch = 1;  // the global batch the learning rate and schedule are given for
    bool adam = false;                  // the learning rate scales as sqrt(B) rather than B
    int64_t tune_every = 200;           // steps between decisions
    int64_t noise_every = 50;           // steps between noise samples
    int64_t lr_ramp_steps = 50;         // the ramp after a batch change
    // Several replicas: also estimate the noise scale from each replica's batch halves, as one replica
    // does, logged beside the replicas' estimate (halves()) as a check of it; decisions keep the
    // replicas'. Costs one more pass every noise_every steps; not kept in checkpoints.
    bool compare_halves = false;
  };
  // At `step` on per-replica batch `batch`; throws std::invalid_argument on an enabled tuner without
  // candidates.
  BatchTuner(const Config& config, int batch, int64_t step);

  // The learning-rate factor at `step`: the current batch's scaling, ramped after a change.
  double lr_factor(int64_t step) const { return ramp_.at(step - change_step_); }
  // Whether the step that completes `step` + 1 should also measure the first half of its batch of
  // `size` positions (one replica: the small batch of the noise scale's two-batch estimate; several
  // with compare_halves: the halves' estimate).
  bool measure_half(int64_t step, int size) const;
  // One step's measurements: this replica's squared gradient norm (batch `size`), the averaged
  // gradient's norm, and the first half's squared norm when measured (NaN: the device cannot, and
  // the tuner goes on throughput).
  void add_step(double local_norm2, double grad_norm, double half_norm2, bool measured_half, int size);
  // Several replicas: whether a noise sample is due (every noise_every steps); the sum over this
  // replica's steps since the last sample of its squared local norms (summed over the replicas by
  // the caller); and the sample, from that sum over the replicas at per-replica batch `batch`.
  bool sample_due() const { return pending_steps_ >= config_.noise_every; }
  double pending_local() const { return pending_local_; }
  // compare_halves: this replica's sums since the last sample over its steps that measured halves,
  // of the first half's squared norm and of the whole local batch's (summed over the replicas by the
  // caller, and given to add_sample with the rest).
  double pending_half() const { return pending_half_; }
  double pending_half_local() const { return pending_half_local_; }
  void add_sample(double local_sum_over_replicas, int batch, double half_sum_over_replicas = 0,
                  double half_local_sum_over_replicas = 0);

  // The step-time model, from the measured steps of timed_batches() (enabled only).
  void set_cost(const StepTimeModel& cost) { cost_ = cost; }
  const StepTimeModel& cost() const { return cost_; }
  const NoiseScaleEstimator& noise() const { return noise_; }
  // compare_halves: the noise scale from the replicas' batch halves (per-replica batch b/2 against b).
  const NoiseScaleEstimator& halves() const { return halves_; }

  // Whether a decision is due after `step` on per-replica batch `batch`: every tune_every steps, once
  // the noise scale is measured. One replica measuring batch halves keeps its starting batch until
  // the estimator has its samples (with a sparse noise_every, throughput alone would jump to the
  // largest batch on no evidence); then, while |G|^2 is not resolved from the noise, and on a device
  // or an odd batch without halves, it decides on throughput alone. Once measured, a noise scale
  // that is unready again (its |G|^2 average fell to 0 or below: a noisy stretch late in training)
  // holds the batch rather than falling back.
  bool decision_due(int64_t step, int batch);
  // The decision at per-replica batch `batch` (choose_batch, then keep_or_switch); `best` receives
  // choose_batch's own pick.
  TunerDecision decide(int batch, int* best = nullptr) const;
  // The batch in use becomes `batch` after `step`: the learning rate ramps from its factor now to
  // the new batch's, and the noise sums start again.
  void switched(int64_t step, int batch);

  // What a checkpoint keeps.
  struct State {
    StepTimeModel cost;
    NoiseScaleEstimator::State noise;
    double ramp_from = 1, ramp_to = 1;
    int64_t ramp_steps = 0, change_step = 0;
    double pending_local = 0, pending_global = 0;
    int64_t pending_steps = 0;
  };
  State state() const;
  void restore(const State& s);

 private:
  double lr_scale(int batch) const;

  Config config_;
  StepTimeModel cost_;
  NoiseScaleEstimator noise_;
  bool noise_measured_ = false;  // the noise scale has been ready at some decision
  bool half_noise_;              // one replica: the noise scale from batch halves
  LrRamp ramp_{1.0, 1.0, 0};
  int64_t change_step_;
  double pending_local_ = 0, pending_global_ = 0;  // sums over the steps since the last sample
  int64_t pending_steps_ = 0;
  NoiseScaleEstimator halves_;                        // compare_halves
  double pending_half_ = 0, pending_half_local_ = 0;  // ... over the steps that measured halves
  int64_t pending_halves_ = 0;
  bool compare_halves_;
};

}  // namespace jiriki::training
