// The training run (see training/trainer.h), readable from top to bottom: train() at the end.
#include "training/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <memory>
#include <optional>
#include <stdexcept>

#include "common/atomic_file.h"
#include "nn/model_file.h"
#include "training/checkpoint.h"
#include "training/data.h"
#include "training/loader.h"
#include "training/network.h"
#include "training/thread_pool.h"
#if JIRIKI_HAVE_CUDA
#include "training/cuda/gpu_trainer.h"
#endif

namespace jiriki::training {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

Metrics summarize(const nn::LossTotals& t, float val_lambda) {
  Metrics m;
  m.samples = t.samples;
  if (t.samples == 0) return m;
  const double n = double(t.samples);
  m.policy_loss = t.policy / n;
  m.value_loss = t.value_result / n;
  m.value_eval_loss = t.value_eval / n;
  m.loss = m.policy_loss + (1.0 - val_lambda) * m.value_loss + val_lambda * m.value_eval_loss;
  m.policy_accuracy = double(t.policy_correct) / n;
  m.value_accuracy = t.value_decisive ? double(t.value_correct) / double(t.value_decisive) : 0.0;
  return m;
}

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

json metrics_json(const Metrics& m) {
  return {{"loss", m.loss},
          {"policy_loss", m.policy_loss},
          {"value_loss", m.value_loss},
          {"value_eval_loss", m.value_eval_loss},
          {"policy_accuracy", m.policy_accuracy},
          {"value_accuracy", m.value_accuracy},
          {"samples", m.samples}};
}

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  char buf[32];
  long t = long(s + 0.5);
  std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  return buf;
}

void check_config(const TrainConfig& c) {
  auto fail = [](const std::string& m) { throw std::invalid_argument(m); };
  if (c.data.empty()) fail("no training data: give --data PATH...");
  if (c.model_out.empty() && !c.loader_only) fail("--model-out FILE is required");
  if (c.batch < 1) fail("--batch must be at least 1");
  if (c.steps < 0) fail("--steps must not be negative");
  if (c.steps == 0 && !(c.epochs > 0)) fail("--epochs must be positive");
  if (!(c.schedule.lr > 0)) fail("--lr must be positive");
  if (c.schedule.warmup_steps < 0) fail("--warmup-steps must not be negative");
  if (c.schedule.kind == Schedule::STEP && c.schedule.step_every < 1)
    fail("--schedule step needs --lr-step-every K >= 1");
  if (!(c.val_lambda >= 0 && c.val_lambda <= 1)) fail("--val-lambda must be in [0, 1]");
  if (c.clip_grad_norm < 0) fail("--clip-grad-norm must not be negative");
  if (c.resume && c.checkpoint.empty()) fail("--resume needs --checkpoint FILE");
  if (c.resume && !c.init.empty()) fail("--resume takes the model from the checkpoint: drop --init");
  if (c.backend != "cpu" && c.backend != "cuda") fail("unknown backend '" + c.backend + "' (expected cpu or cuda)");
#if !JIRIKI_HAVE_CUDA
  if (c.backend == "cuda") fail("--backend cuda: this jiriki was built without CUDA");
#endif
  if (c.checkpoint_every < 0 || c.log_every < 1 || c.eval_every < 0 || c.window < 0 || c.test_positions < 0)
    fail("--checkpoint-every, --eval-every, --window and --test-positions must not be negative, --log-every positive");
}

// Everything that must be the same for a resumed run to continue the interrupted one exactly.
json run_signature(const TrainConfig& c) {
  const OptimizerConfig& o = c.optimizer;
  const Schedule& s = c.schedule;
  return {{"batch", c.batch},
          {"seed", c.seed},
          {"optimizer", optimizer_name(o.kind)},
          {"weight_decay", o.weight_decay},
          {"momentum", o.momentum},
          {"nesterov", o.nesterov},
          {"beta1", o.beta1},
          {"beta2", o.beta2},
          {"eps", o.eps},
          {"lr", s.lr},
          {"schedule", schedule_name(s.kind)},
          {"warmup_steps", s.warmup_steps},
          {"final_ratio", s.final_ratio},
          {"step_every", s.step_every},
          {"gamma", s.gamma},
          {"clip_grad_norm", c.clip_grad_norm},
          {"val_lambda", c.val_lambda},
          {"bn_momentum", c.bn_momentum},
          {"window", c.window}};
}

void check_resume(const json& meta, const TrainConfig& c, int64_t total_steps, uint64_t fingerprint) {
  const json now = run_signature(c);
  std::string diff;
  for (const auto& [key, value] : now.items())
    if (!meta["config"].contains(key) || meta["config"][key] != value)
      diff += "\n  " + key + ": " + meta["config"].value(key, json()).dump() + " in the checkpoint, " + value.dump() +
              " now";
  if (!diff.empty()) throw std::runtime_error("the checkpoint was written by a run with other settings:" + diff);
  if (meta["total_steps"] != total_steps)
    std::cerr << "warning: the run now has " << total_steps << " steps, the checkpoint's had " << meta["total_steps"]
              << ": the learning-rate schedule changes from here on\n";
  if (meta["data_fingerprint"] != fingerprint)
    std::cerr << "warning: the training data differ from the checkpoint's: the run continues at the same stream "
                 "position, but it is no longer an exact continuation\n";
}

// A JSON-lines log: one object per line, appended (a resumed run continues the same file).
struct Log {
  std::ofstream out;
  explicit Log(const std::string& path) {
    if (path.empty()) return;
    out.open(path, std::ios::app);
    if (!out) throw std::runtime_error(path + ": cannot open the log for appending");
  }
  void write(const json& j) {
    if (out.is_open()) out << j.dump() << '\n' << std::flush;
  }
};

void report_issues(const Dataset& d, const char* what, bool quiet, Log& log) {
  constexpr size_t SHOWN = 20;
  for (size_t i = 0; i < d.issues.size(); ++i) {
    const DataIssue& is = d.issues[i];
    log.write(
        {{"type", "data_issue"}, {"data", what}, {"file", is.file}, {"offset", is.offset}, {"message", is.message}});
    if (!quiet && i < SHOWN) std::cerr << "warning: skipped: " << is.to_string() << "\n";
  }
  if (!quiet && d.issues.size() > SHOWN)
    std::cerr << "warning: " << d.issues.size() - SHOWN << " more problems in the " << what << " data (see the log)\n";
  if (!quiet)
    std::cerr << what << " data: " << d.positions.size() << " positions from " << d.files.size() << " files"
              << (d.issues.empty() ? "" : ", " + std::to_string(d.issues.size()) + " problems skipped") << "\n";
}

// Where the steps run. The CPU works on the caller's model and optimizer in place; the GPU keeps its
// own copy of both and brings the caller's up to date in sync_host(), before a checkpoint or the
// export.
class Device {
 public:
  struct Step {
    nn::LossTotals totals;
    double grad_norm = 0;  // before clipping
  };
  virtual ~Device() = default;
  // Forward, loss, backward, clipping and the optimizer's update on one batch.
  virtual Step step(const Batch& batch, double lr) = 0;
  // Loss totals in EVAL mode; nothing changes.
  virtual nn::LossTotals evaluate(const Batch& batch) = 0;
  virtual void sync_host() {}
  // Memory for the loaders' batches (null: the heap).
  virtual HostAllocator* allocator() { return nullptr; }
  virtual std::string name() const = 0;
};

class CpuDevice final : public Device {
 public:
  CpuDevice(const TrainConfig& c, nn::Model& model, Optimizer& optimizer, ThreadPool& pool)
      : c_(c), model_(model), optimizer_(optimizer), pool_(pool), ws_(model.arch, c.batch) {}
  Step step(const Batch& batch, double lr) override {
    Step s;
    s.totals = compute_gradients(model_, ws_, batch, c_.val_lambda, c_.bn_momentum, 1.0f / float(batch.size), pool_);
    s.grad_norm = gradient_norm(ws_.grads);
    if (c_.clip_grad_norm > 0 && s.grad_norm > c_.clip_grad_norm)
      scale_gradients(ws_.grads, float(c_.clip_grad_norm / s.grad_norm));
    optimizer_.step(model_, ws_.grads, lr);
    return s;
  }
  nn::LossTotals evaluate(const Batch& batch) override {
    return evaluate_batch(model_, ws_.acts, batch, c_.val_lambda, pool_);
  }
  std::string name() const override { return "cpu, " + std::to_string(pool_.size()) + " compute threads"; }

 private:
  const TrainConfig& c_;
  nn::Model& model_;
  Optimizer& optimizer_;
  ThreadPool& pool_;
  Workspace ws_;
};

#if JIRIKI_HAVE_CUDA
class GpuDevice final : public Device {
 public:
  GpuDevice(const TrainConfig& c, nn::Model& model, Optimizer& optimizer)
      : c_(c), model_(model), optimizer_(optimizer), gpu_(model, c.optimizer, c.batch, c.gpu) {
    gpu_.upload_optimizer(optimizer);
  }
  Step step(const Batch& batch, double lr) override {
    const auto r = gpu_.train_step(batch, c_.val_lambda, c_.bn_momentum, lr, c_.clip_grad_norm);
    return {r.totals, r.grad_norm};
  }
  nn::LossTotals evaluate(const Batch& batch) override { return gpu_.evaluate(batch, c_.val_lambda); }
  void sync_host() override {
    gpu_.download_model(model_);
    gpu_.download_optimizer(optimizer_);
  }
  HostAllocator* allocator() override { return gpu_.host_allocator(); }
  std::string name() const override { return gpu_.description(); }

 private:
  const TrainConfig& c_;
  nn::Model& model_;
  Optimizer& optimizer_;
  cuda::GpuTrainer gpu_;
};
#endif

std::unique_ptr<Device> make_device(const TrainConfig& c, nn::Model& model, Optimizer& optimizer, ThreadPool& pool) {
#if JIRIKI_HAVE_CUDA
  if (c.backend == "cuda") return std::make_unique<GpuDevice>(c, model, optimizer);
#endif
  return std::make_unique<CpuDevice>(c, model, optimizer, pool);
}

// Held-out metrics: the first `limit` positions (0: all) in file order, batch norm in EVAL mode.
Metrics evaluate(Device& device, const Dataset& test, const TrainConfig& c) {
  uint64_t n = test.positions.size();
  if (c.test_positions > 0) n = std::min<uint64_t>(n, uint64_t(c.test_positions));
  Loader loader(test, {.batch_size = c.batch,
                       .seed = c.seed,
                       .shuffle = false,
                       .start = 0,
                       .end = n,
                       .threads = c.loader_threads,
                       .allocator = device.allocator()});
  nn::LossTotals totals;
  while (const Batch* b = loader.acquire()) {
    totals.add(device.evaluate(*b));
    loader.release(b);
  }
  return summarize(totals, c.val_lambda);
}

nn::Model fresh_model(const TrainConfig& c) {
  nn::Model m(c.arch);
  nn::init_model(m, c.seed);
  return m;
}

void export_model(const nn::Model& model, const std::string& path) {
  const std::vector<uint8_t> bytes = nn::serialize_model(model);
  write_file_atomically(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

// The loader on its own, for as many batches as the run would take: its samples per second.
TrainResult run_loader_only(const Dataset& data, const TrainConfig& c, uint64_t start, int64_t steps) {
  Loader loader(data, {.batch_size = c.batch, .seed = c.seed, .start = start, .threads = c.loader_threads});
  const auto t0 = Clock::now();
  for (int64_t s = 0; s < steps; ++s) loader.release(loader.acquire());
  TrainResult r;
  r.loader_samples_per_second = double(steps) * c.batch / seconds_since(t0);
  if (!c.quiet)
    std::cerr << "loader: " << steps * c.batch << " positions in " << seconds_since(t0)
              << " s = " << r.loader_samples_per_second << " samples/s with " << loader.threads() << " threads\n";
  return r;
}

}  // namespace

TrainResult train(const TrainConfig& config) {
  check_config(config);
  TrainConfig c = config;
  ThreadPool pool(c.threads);
  Log log(c.log);

  // ---- data ----------------------------------------------------------------------------------
  const int read_threads = std::max(pool.size(), c.loader_threads);
  const Dataset data = load_dataset(c.data, {.window = c.window, .threads = read_threads});
  report_issues(data, "training", c.quiet, log);
  Dataset test;
  if (!c.test.empty()) {
    test = load_dataset(c.test, {.threads = read_threads});
    report_issues(test, "held-out", c.quiet, log);
  }
  const int64_t total_steps =
      c.steps > 0 ? c.steps
                  : std::max<int64_t>(1, int64_t(std::ceil(c.epochs * double(data.positions.size()) / c.batch)));
  c.schedule.total_steps = total_steps;

  // ---- model and optimizer, fresh or from the checkpoint ---------------------------------------
  // (A resumed run's architecture is the checkpoint's, whatever the options say.)
  std::optional<Checkpoint> resumed;
  if (c.resume) {
    resumed = load_checkpoint(c.checkpoint);
    check_resume(resumed->meta, c, total_steps, data.fingerprint);
  }
  nn::Model model = resumed ? std::move(resumed->model) : !c.init.empty() ? nn::load_model(c.init) : fresh_model(c);
  Optimizer optimizer(c.optimizer, model);
  int64_t step = 0;
  uint64_t stream = 0;  // the data stream position (training/loader.h)
  if (resumed) {
    restore_optimizer_state(*resumed, optimizer);
    step = resumed->meta["step"].get<int64_t>();
    stream = resumed->meta["samples"].get<uint64_t>();
    optimizer.set_steps(step);
    resumed.reset();
    if (!c.quiet) std::cerr << "resumed from " << c.checkpoint << " at step " << step << "\n";
  }
  if (c.loader_only) return run_loader_only(data, c, stream, total_steps - step);
  const std::unique_ptr<Device> device = make_device(c, model, optimizer, pool);

  auto save = [&] {
    if (c.checkpoint.empty()) return;
    device->sync_host();
    json meta = {{"step", step},
                 {"samples", stream},
                 {"total_steps", total_steps},
                 {"data_fingerprint", data.fingerprint},
                 {"data_positions", data.positions.size()},
                 {"config", run_signature(c)}};
    save_checkpoint(c.checkpoint, meta, model, optimizer);
    log.write({{"type", "checkpoint"}, {"step", step}, {"path", c.checkpoint}});
  };
  auto test_metrics = [&] {
    Metrics m = evaluate(*device, test, c);
    json j = metrics_json(m);
    j["type"] = "test";
    j["step"] = step;
    log.write(j);
    if (!c.quiet)
      std::fprintf(
          stderr,
          "test  step %lld  loss %.4f (policy %.4f, value %.4f, eval %.4f)  policy top-1 %.2f%%  value %.2f%%\n",
          (long long)step, m.loss, m.policy_loss, m.value_loss, m.value_eval_loss, 100 * m.policy_accuracy,
          100 * m.value_accuracy);
    return m;
  };

  if (!c.quiet)
    std::cerr << "training a " << model.arch.blocks << "x" << model.arch.channels << " "
              << nn::activation_name(model.arch.activation) << " network: " << total_steps << " steps of " << c.batch
              << " positions, " << optimizer_name(c.optimizer.kind) << ", " << c.loader_threads << " loader threads; "
              << device->name() << "\n";

  // ---- the step loop -----------------------------------------------------------------------------
  Loader loader(data, {.batch_size = c.batch,
                       .seed = c.seed,
                       .start = stream,
                       .threads = c.loader_threads,
                       .allocator = device->allocator()});
  TrainResult result;
  nn::LossTotals interval;
  int64_t interval_steps = 0;
  double aside = 0;  // seconds of held-out metrics and checkpoints during the loop
  double interval_grad_norm = 0, interval_wait = 0;
  const auto run_start = Clock::now();
  auto interval_start = run_start;
  const int64_t first_step = step;

  while (step < total_steps) {
    const auto t_wait = Clock::now();
    const Batch* batch = loader.acquire();
    interval_wait += seconds_since(t_wait);
    const double lr = c.schedule.at(step);

    // Forward, loss, backward and the update, on the mean loss over the batch.
    const Device::Step done = device->step(*batch, lr);
    interval.add(done.totals);
    interval_grad_norm += done.grad_norm;
    stream += uint64_t(batch->size);
    loader.release(batch);
    ++step;
    ++interval_steps;

    if (step % c.log_every == 0 || step == total_steps) {
      const double elapsed = seconds_since(interval_start);
      const double rate = double(interval.samples) / elapsed;
      const double loader_rate = loader.samples_built() / std::max(1e-9, loader.busy_seconds()) * loader.threads();
      const double eta = double(total_steps - step) * c.batch / rate;
      result.last_train = summarize(interval, c.val_lambda);
      json j = metrics_json(result.last_train);
      j.update({{"type", "train"},
                {"step", step},
                {"samples", stream},
                {"epoch", double(stream) / double(data.positions.size())},
                {"lr", lr},
                {"grad_norm", interval_grad_norm / double(interval_steps)},
                {"samples_per_second", rate},
                {"loader_samples_per_second", loader_rate},
                {"data_wait_fraction", interval_wait / elapsed},
                {"elapsed_seconds", seconds_since(run_start)}});
      log.write(j);
      if (!c.quiet) {
        const Metrics& m = result.last_train;
        std::fprintf(
            stderr,
            "step %lld/%lld (%.1f%%)  loss %.4f (policy %.4f, value %.4f, eval %.4f)  lr %.3g  | %.0f samples/s, "
            "loader %.0f samples/s, data wait %.0f%%  | ETA %s\n",
            (long long)step, (long long)total_steps, 100.0 * step / total_steps, m.loss, m.policy_loss, m.value_loss,
            m.value_eval_loss, lr, rate, loader_rate, 100 * interval_wait / elapsed, format_duration(eta).c_str());
      }
      interval = {};
      interval_steps = 0;
      interval_grad_norm = interval_wait = 0;
      interval_start = Clock::now();
    }
    // Held-out metrics and checkpoints along the way; their time is kept out of the samples/s.
    const auto t_aside = Clock::now();
    if (!test.positions.empty() && c.eval_every > 0 && step % c.eval_every == 0 && step < total_steps) test_metrics();

    const bool stop = (c.stop && c.stop->load()) || (c.stop_after > 0 && step - first_step >= c.stop_after);
    if (stop && step < total_steps) {
      save();
      if (!c.quiet)
        std::cerr << "stopped at step " << step
                  << (c.checkpoint.empty() ? " (no --checkpoint: the state is lost)\n"
                                           : "; continue with --resume --checkpoint " + c.checkpoint + "\n");
      result.interrupted = true;
      break;
    }
    if (c.checkpoint_every > 0 && step % c.checkpoint_every == 0 && step < total_steps) save();
    interval_start += Clock::now() - t_aside;
    aside += seconds_since(t_aside);
  }

  const double seconds = seconds_since(run_start);
  result.step = step;
  result.samples_per_second = double(step - first_step) * c.batch / std::max(1e-9, seconds - aside);
  result.loader_samples_per_second = loader.samples_built() / std::max(1e-9, loader.busy_seconds()) * loader.threads();
  if (result.interrupted) return result;

  // ---- the end: held-out metrics, the exported model, a final checkpoint -----------------------
  if (!test.positions.empty()) result.test = test_metrics();
  device->sync_host();
  export_model(model, c.model_out);
  save();
  log.write({{"type", "done"},
             {"step", step},
             {"model", c.model_out},
             {"seconds", seconds},
             {"samples_per_second", result.samples_per_second}});
  if (!c.quiet)
    std::cerr << "wrote " << c.model_out << " after " << step << " steps (" << format_duration(seconds) << ", "
              << std::lround(result.samples_per_second) << " samples/s)\n";
  return result;
}

}  // namespace jiriki::training
