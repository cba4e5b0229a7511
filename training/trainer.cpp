// The training run (see training/trainer.h), readable from top to bottom: train() at the end.
#include "training/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <thread>

#include "common/atomic_file.h"
#include "common/cpus.h"
#include "common/thread_pool.h"
#include "nn/model_file.h"
#include "training/batch_tuner.h"
#include "training/checkpoint.h"
#include "training/comm.h"
#include "training/data.h"
#include "training/device.h"
#include "training/loader.h"
#include "training/teacher.h"
#include "training/tuner_file.h"

namespace jiriki::training {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

AllReduce parse_allreduce(const std::string& name) {
  if (name == "auto") return AllReduce::AUTO;
  if (name == "nccl") return AllReduce::NCCL;
  if (name == "host") return AllReduce::HOST;
  throw std::invalid_argument("unknown --allreduce '" + name + "' (expected auto, nccl or host)");
}

const char* allreduce_name(AllReduce a) {
  switch (a) {
    case AllReduce::AUTO: return "auto";
    case AllReduce::NCCL: return "nccl";
    case AllReduce::HOST: return "host";
  }
  return "?";
}

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
  if (c.model_out.empty()) fail("--model-out FILE is required");
  if (c.batch < 1) fail("--batch must be at least 1");
  if (c.steps < 0) fail("--steps must not be negative");
  if (c.steps == 0 && !(c.epochs > 0)) fail("--epochs must be positive");
  if (!(c.schedule.lr > 0)) fail("--lr must be positive");
  if (c.schedule.warmup_steps < 0) fail("--warmup-steps must not be negative");
  if (c.schedule.kind == Schedule::STEP && c.schedule.step_every < 1)
    fail("--schedule step needs --lr-step-every K >= 1");
  if (!(c.val_lambda >= 0 && c.val_lambda <= 1)) fail("--val-lambda must be in [0, 1]");
  if (!(c.teacher_weight >= 0 && c.teacher_weight <= 1)) fail("--teacher-weight must be in [0, 1]");
  if (c.clip_grad_norm < 0) fail("--clip-grad-norm must not be negative");
  if (c.resume && c.checkpoint.empty()) fail("--resume needs --checkpoint FILE");
  if (c.resume && !c.init.empty()) fail("--resume takes the model from the checkpoint: drop --init");
  const bool cuda = c.backend == nn::BackendKind::CUDA;
  if (!cuda && c.backend != nn::BackendKind::CPU) fail("the trainer runs on the cpu or cuda backend");
  if (std::string why; cuda && nn::cuda_device_count(&why) == 0) fail("--backend cuda: " + why);
  if (c.replicas < 1) fail("--replicas must be at least 1");
  if (!cuda && c.allreduce == AllReduce::NCCL)
    fail("--allreduce nccl needs --backend cuda (the CPU replicas use host)");
  if (!cuda && !c.gpus.empty()) fail("--gpus needs --backend cuda (CPU replicas: --replicas N)");
  if (cuda && c.replicas > 1) fail("--replicas is for the CPU backend: give the GPUs with --gpus");
  // Two replicas on one GPU: NCCL refuses it, the host aggregation does not (tests on one GPU use it).
  for (size_t i = 0; i < c.gpus.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (c.gpus[i] == c.gpus[j] && c.allreduce != AllReduce::HOST)
        fail("--gpus lists GPU " + std::to_string(c.gpus[i]) + " twice (allowed only with --allreduce host)");
  if (!(c.bucket_mb > 0)) fail("--bucket-mb must be positive");
  if (c.batch_auto && (c.tune_min < 1 || c.tune_max < c.tune_min || c.tune_every < 1 || c.tune_reps < 1))
    fail("--batch auto needs 1 <= --tune-min <= --tune-max, --tune-every >= 1, --tune-reps >= 1");
  if (c.noise_every < 1 || c.lr_ramp_steps < 0 || c.check_every < 0)
    fail("--noise-every must be positive, --lr-ramp-steps and --check-every not negative");
  if (c.checkpoint_every < 0 || c.log_every < 1 || c.eval_every < 0 || c.window < 0 || c.test_positions < 0)
    fail("--checkpoint-every, --eval-every, --window and --test-positions must not be negative, --log-every positive");
}

// Everything that must be the same for a resumed run to continue the interrupted one exactly.
json run_signature(const TrainConfig& c) {
  const OptimizerConfig& o = c.optimizer;
  const Schedule& s = c.schedule;
  json sig = {{"batch", c.batch},
              {"batch_auto", c.batch_auto},
              {"replicas", std::max<size_t>({c.gpus.size(), size_t(c.replicas), size_t(process_layout().size)})},
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
  if (c.mirror) sig["mirror"] = true;  // (absent when off: checkpoints from before the option resume)
  if (!c.teacher.empty()) {            // (the same)
    sig["teacher_weight"] = c.teacher_weight;
    sig["teacher_every_move"] = c.teacher_every_move;
  }
  return sig;
}

// What a step's time depends on, as the tuner's file keys it (training/tuner_file.h): the device and
// its aggregation, the network, the optimizer and the batches timed.
std::string tuner_file_key(const Device& device, const nn::Architecture& arch, const TrainConfig& c,
                           const std::vector<int>& timed) {
  std::string key = device.hardware() + "; " + std::to_string(arch.blocks) + "x" + std::to_string(arch.channels) + " " +
                    nn::activation_name(arch.activation) + ", features " + std::to_string(int(arch.feature_set)) +
                    ", " + optimizer_name(c.optimizer.kind) + ", timed";
  for (int b : timed) key += " " + std::to_string(b);
  return key + " x" + std::to_string(c.tune_reps);
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

// Batch-norm running statistics: each replica keeps its own during training (it sees other
// positions). Held-out metrics, checkpoints and the export see their mean over the replicas; the
// replicas' own are put back afterwards, and a checkpoint keeps every replica's, so that neither
// evaluations nor checkpoints change the run and a resumed run continues it exactly.

// The replicas' mean into `model` (and into the device when `to_device`); returns this replica's own
// for restore_own_statistics. Collective.
std::vector<float> mean_running_statistics(Device& device, nn::Model& model, HostComm& comm, bool to_device) {
  device.sync_host();
  std::vector<float> own = flatten(model, false);
  if (comm.size() == 1) return own;
  std::vector<float> mean = own;
  comm.sum(mean.data(), mean.size());
  for (float& v : mean) v /= float(comm.size());
  unflatten(mean, model, false);
  if (to_device) device.load_host();
  return own;
}

// Undoes mean_running_statistics(..., to_device) on this replica.
void restore_own_statistics(Device& device, nn::Model& model, HostComm& comm, const std::vector<float>& own,
                            bool to_device) {
  if (comm.size() == 1) return;
  unflatten(own, model, false);
  if (to_device) device.load_host();
}

// Every replica's own statistics, rank by rank, on every rank (collective; exact: broadcasts).
std::vector<std::vector<float>> gather_statistics(const std::vector<float>& own, HostComm& comm) {
  std::vector<std::vector<float>> all(size_t(comm.size()), std::vector<float>(own.size()));
  all[size_t(comm.rank())] = own;
  for (int r = 0; r < comm.size(); ++r) comm.broadcast(all[size_t(r)].data(), own.size() * sizeof(float), r);
  return all;
}

// Loss totals summed over the replicas (collective).
nn::LossTotals sum_over_replicas(const nn::LossTotals& t, HostComm& comm) {
  double v[7] = {t.policy,
                 t.value_result,
                 t.value_eval,
                 double(t.samples),
                 double(t.policy_correct),
                 double(t.value_decisive),
                 double(t.value_correct)};
  comm.sum(v, 7);
  return {v[0], v[1], v[2], int64_t(v[3]), int64_t(v[4]), int64_t(v[5]), int64_t(v[6])};
}

// Held-out metrics: the first `limit` positions (0: all) in file order, batch norm in EVAL mode,
// split among the replicas (replica r takes every r-th batch) and summed. Collective.
Metrics evaluate(Device& device, const Dataset& test, const TrainConfig& c, HostComm& comm) {
  uint64_t n = test.positions.size();
  if (c.test_positions > 0) n = std::min<uint64_t>(n, uint64_t(c.test_positions));
  const uint64_t per = uint64_t(c.batch), ranks = uint64_t(comm.size()), r = uint64_t(comm.rank());
  nn::LossTotals totals;
  if (r * per < n) {
    Loader loader(test, {.batch_size = c.batch,
                         .seed = c.seed,
                         .shuffle = false,
                         .start = 0,
                         .end = n,
                         .stride = per * ranks,
                         .offset = r * per,
                         .threads = std::min(c.loader_threads, 4),  // ~0.1 s for 25,000 positions
                         .allocator = device.allocator()});
    while (const Batch* b = loader.acquire()) {
      if (b->size > 0) totals.add(device.evaluate(*b));
      loader.release(b);
    }
  }
  return summarize(sum_over_replicas(totals, comm), c.val_lambda);
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

// ---- one replica's run -----------------------------------------------------------------------------
// Every replica runs this same loop on its own model copy, device and slice of each global batch;
// the collectives (step's average, the log's totals, the noise samples, checkpoints) happen at the
// same steps on every replica. Rank 0 alone prints, logs and writes files.
// What makes each loader worker's teacher (null without one): on the replica's GPU, else on the
// CPU with the worker's own thread.
std::function<std::unique_ptr<Teacher>()> teacher_maker(const TrainConfig& c, const nn::Model* teacher,
                                                        const ReplicaPlace& place) {
  if (!teacher) return nullptr;
  nn::BackendOptions o;
  o.kind = c.backend == nn::BackendKind::CUDA ? nn::BackendKind::CUDA : nn::default_cpu_backend();
  o.gpu = place.gpu;
  o.threads = 1;
  o.cuda = c.cuda;
  o.cuda.cudnn_sweep = 0;  // a teacher's batches are the loader's: cuDNN's heuristics, no sweep at start-up
  return [teacher, o, weight = c.teacher_weight] { return std::make_unique<Teacher>(*teacher, o, weight); };
}

TrainResult run_replica(const TrainConfig& c, const Dataset& data, const Dataset& test, const nn::Model* teacher,
                        int64_t total_steps, HostComm& comm, const ReplicaPlace& place, ThreadPool& pool) {
  const auto replica_start = Clock::now();
  double evaluating = 0;  // seconds of held-out evaluations
  const bool lead = comm.rank() == 0, quiet = c.quiet || !lead;
  const int replicas = comm.size();
  const uint64_t rank = uint64_t(comm.rank());
  Log log(lead ? c.log : "");
  // The learning rate and the schedule are given for the starting global batch; the run's length is
  // total_steps of it, counted in samples so that it holds whatever batch the tuner picks.
  const uint64_t reference_batch = uint64_t(replicas) * uint64_t(c.batch);
  const uint64_t total_samples = uint64_t(total_steps) * reference_batch;

  // ---- model and optimizer, fresh or from the checkpoint ---------------------------------------
  // (A resumed run's architecture is the checkpoint's; asking for another is refused, as another
  // --batch is, rather than silently resuming the checkpoint's shape.)
  std::optional<Checkpoint> resumed;
  if (c.resume) {
    resumed = load_checkpoint(c.checkpoint);
    check_resume(resumed->meta, c, total_steps, data.fingerprint);
    const nn::Architecture& a = resumed->model.arch;
    if (c.arch_given &&
        (a.blocks != c.arch.blocks || a.channels != c.arch.channels || a.activation != c.arch.activation))
      throw std::runtime_error("the checkpoint holds a " + std::to_string(a.blocks) + "x" + std::to_string(a.channels) +
                               " " + nn::activation_name(a.activation) + " network, the options ask for " +
                               std::to_string(c.arch.blocks) + "x" + std::to_string(c.arch.channels) + " " +
                               nn::activation_name(c.arch.activation) +
                               ": drop --blocks/--channels/--activation to resume it, or start a new run");
  }
  nn::Model model = resumed ? std::move(resumed->model) : !c.init.empty() ? nn::load_model(c.init) : fresh_model(c);
  Optimizer optimizer(c.optimizer, model);
  int64_t step = 0;
  uint64_t stream = 0;  // the data stream position (training/loader.h), over all replicas
  int batch = c.batch;  // per replica
  json tuner_state;     // --batch auto: the tuner's state in the checkpoint, null if none
  if (resumed) {
    restore_optimizer_state(*resumed, optimizer);
    step = resumed->meta["step"].get<int64_t>();
    stream = resumed->meta["samples"].get<uint64_t>();
    batch = resumed->meta.value("batch", c.batch);
    // Each replica's own running statistics (a checkpoint without them: their mean, for every replica).
    if (const auto own = resumed->meta.find("replica_statistics");
        own != resumed->meta.end() && own->is_array() && own->size() == size_t(replicas)) {
      std::vector<float> mine = (*own)[rank].get<std::vector<float>>();
      if (mine.size() != flatten(model, false).size())
        throw std::runtime_error(c.checkpoint + ": its replicas' batch-norm statistics do not fit its model");
      unflatten(mine, model, false);
    }
    if (c.batch_auto) tuner_state = resumed->meta.value("tuner", json());
    optimizer.set_steps(step);
    resumed.reset();
    if (!quiet) std::cerr << "resumed from " << c.checkpoint << " at step " << step << "\n";
  }
  // --batch auto's state, kept in checkpoints: the step-time model (measured below), the noise
  // averages, and the learning-rate ramp after the latest batch change.
  const std::vector<int> candidates = c.batch_auto ? geometric_batches(c.tune_min, c.tune_max) : std::vector<int>{};
  BatchTuner tuner({.enabled = c.batch_auto,
                    .candidates = candidates,
                    .replicas = replicas,
                    .reference_global_batch = double(reference_batch),
                    .adam = c.optimizer.kind == OptimizerKind::ADAMW,
                    .tune_every = c.tune_every,
                    .noise_every = c.noise_every,
                    .lr_ramp_steps = c.lr_ramp_steps,
                    .compare_halves = c.noise_halves},
                   batch, step);

  // One device per batch size in use (the tuner switches between them; each keeps its buffers, and
  // on a GPU its tuned convolutions and captured graphs).
  std::map<int, std::unique_ptr<Device>> devices;
  const DeviceSettings settings{.backend = c.backend,
                                .cuda = c.cuda,
                                .optimizer = c.optimizer,
                                .val_lambda = c.val_lambda,
                                .bn_momentum = c.bn_momentum,
                                .clip_grad_norm = c.clip_grad_norm,
                                .host_allreduce = c.allreduce == AllReduce::HOST,
                                .bucket_mb = c.bucket_mb};
  auto device_for = [&](int b) -> Device& {
    auto& d = devices[b];
    if (!d) {
      // Its set-up time is part of what --batch auto costs (on an H200 0.7-3 s, mostly cuDNN compiling
      // kernels; up to 20 s where cuDNN's choices are not yet tuned). `seconds`, as in the held-out
      // records: since the data was read, evaluations left out.
      const auto made = Clock::now();
      d = make_device(settings, b, model, optimizer, pool, comm, place);
      log.write({{"type", "device"},
                 {"batch", b},
                 {"setup_seconds", seconds_since(made)},
                 {"seconds", seconds_since(replica_start) - evaluating}});
    }
    return *d;
  };
  Device* device = &device_for(batch);
  auto switch_to = [&](int b) {
    device->sync_host();
    device = &device_for(b);
    device->load_host();
  };
  std::unique_ptr<Loader> loader;
  auto open_loader = [&] {
    loader.reset();
    loader = std::make_unique<Loader>(data, LoaderOptions{.batch_size = batch,
                                                          .seed = c.seed,
                                                          .start = stream,
                                                          .stride = uint64_t(batch) * uint64_t(replicas),
                                                          .offset = rank * uint64_t(batch),
                                                          .threads = c.loader_threads,
                                                          .mirror = c.mirror,
                                                          .allocator = device->allocator(),
                                                          .teacher = teacher_maker(c, teacher, place)});
  };

  // What a checkpoint says besides the tensors (rank 0).
  auto checkpoint_meta = [&] {
    json meta = {{"step", step},
                 {"samples", stream},
                 {"batch", batch},
                 {"total_steps", total_steps},
                 {"data_fingerprint", data.fingerprint},
                 {"data_positions", data.positions.size()},
                 {"config", run_signature(c)}};
    if (c.batch_auto) {
      const BatchTuner::State t = tuner.state();
      const StepTimeModel& m = t.cost;
      const NoiseScaleEstimator::State& n = t.noise;
      meta["tuner"] = {
          {"cost", {{"alpha_c", m.alpha_c}, {"beta_c", m.beta_c}, {"t_n", m.t_n}, {"gamma", m.gamma}}},
          {"noise",
           {{"ema_trace", n.ema_trace}, {"ema_g2", n.ema_g2}, {"decay_pow", n.decay_pow}, {"samples", n.samples}}},
          {"ramp", {{"from", t.ramp_from}, {"to", t.ramp_to}, {"steps", t.ramp_steps}, {"change_step", t.change_step}}},
          {"pending", {{"local", t.pending_local}, {"global", t.pending_global}, {"steps", t.pending_steps}}}};
    }
    return meta;
  };
  auto save = [&] {
    if (c.checkpoint.empty()) return;
    // The model file inside: the replicas' mean of the running statistics, as exported; beside it
    // every replica's own.
    const std::vector<float> own = mean_running_statistics(*device, model, comm, false);
    const auto replica_statistics = replicas > 1 ? gather_statistics(own, comm) : std::vector<std::vector<float>>{};
    if (lead) {
      json meta = checkpoint_meta();
      if (replicas > 1) meta["replica_statistics"] = replica_statistics;
      save_checkpoint(c.checkpoint, meta, model, optimizer);
      log.write({{"type", "checkpoint"}, {"step", step}, {"path", c.checkpoint}});
    }
    restore_own_statistics(*device, model, comm, own, false);
  };
  auto test_metrics = [&] {
    const auto t_eval = Clock::now();
    // Time to a held-out loss: everything since the data was read (the tuner's measurements and
    // batch changes included) except the held-out evaluations, this one too.
    const double trained = seconds_since(replica_start) - evaluating;
    const std::vector<float> own = mean_running_statistics(*device, model, comm, true);
    Metrics m = evaluate(*device, test, c, comm);
    restore_own_statistics(*device, model, comm, own, true);
    json j = metrics_json(m);
    j["type"] = "test";
    j["step"] = step;
    j["samples"] = stream;
    j["seconds"] = trained;
    j["eval_seconds"] = seconds_since(t_eval);
    evaluating += j["eval_seconds"].get<double>();
    log.write(j);
    if (!quiet)
      std::fprintf(
          stderr,
          "test  step %lld  loss %.4f (policy %.4f, value %.4f, eval %.4f)  policy top-1 %.2f%%  value %.2f%%  "
          "(%.2f s)\n",
          (long long)step, m.loss, m.policy_loss, m.value_loss, m.value_eval_loss, 100 * m.policy_accuracy,
          100 * m.value_accuracy, j["eval_seconds"].get<double>());
    return m;
  };

  // ---- the tuner: the cost of every candidate batch, measured once ------------------------------
  if (c.batch_auto && !tuner_state.is_null()) {
    // Resumed: the interrupted run's step-time model, noise averages, ramp and pending noise sums, so
    // that its decisions go on as they would have (measuring the steps again would give other times).
    const json& t = tuner_state;
    tuner.restore(
        {.cost = {t["cost"]["alpha_c"], t["cost"]["beta_c"], t["cost"]["t_n"], t["cost"]["gamma"]},
         .noise = {t["noise"]["ema_trace"], t["noise"]["ema_g2"], t["noise"]["decay_pow"], t["noise"]["samples"]},
         .ramp_from = t["ramp"]["from"],
         .ramp_to = t["ramp"]["to"],
         .ramp_steps = t["ramp"]["steps"],
         .change_step = t["ramp"]["change_step"],
         .pending_local = t["pending"]["local"],
         .pending_global = t["pending"]["global"],
         .pending_steps = t["pending"]["steps"]});
  } else if (c.batch_auto) {
    // A model kept by an earlier run of this setting (training/tuner_file.h), as the lead read it.
    const std::vector<int> timed = timed_batches(candidates, batch);
    const std::string key = tuner_file_key(*device, model.arch, c, timed);
    double kept[5] = {0, 0, 0, 0, 0};  // found, alpha_c, beta_c, t_n, gamma
    if (lead)
      if (const auto m = read_step_time_model(c.tuner_file, key))
        kept[0] = 1, kept[1] = m->alpha_c, kept[2] = m->beta_c, kept[3] = m->t_n, kept[4] = m->gamma;
    comm.broadcast(kept, sizeof kept, 0);
    if (kept[0] == 1) {
      tuner.set_cost({kept[1], kept[2], kept[3], kept[4]});
    } else {
      device->sync_host();
      const nn::Model saved_model = model;
      const Optimizer saved_optimizer = optimizer;
      std::vector<StepSample> samples;
      for (int b : timed) {
        Device& d = device_for(b);
        d.load_host();
        Loader probe(data, {.batch_size = b,
                            .seed = c.seed,
                            .start = stream,
                            .stride = uint64_t(b) * uint64_t(replicas),
                            .offset = rank * uint64_t(b),
                            .threads = 1,
                            .allocator = d.allocator(),
                            .timing_only = true});
        const Batch* first = probe.acquire();
        StepSample s = d.time_step(*first, c.tune_reps);
        probe.release(first);
        // A step lasts as long as its slowest replica.
        s.step_seconds = comm.max(s.step_seconds);
        s.compute_seconds = comm.max(s.compute_seconds);
        s.comm_seconds = comm.max(s.comm_seconds);
        samples.push_back(s);
        log.write({{"type", "tuner_cost"},
                   {"batch", b},
                   {"seconds", seconds_since(replica_start) - evaluating},
                   {"step_ms", 1e3 * s.step_seconds},
                   {"compute_ms", 1e3 * s.compute_seconds},
                   {"comm_ms", 1e3 * s.comm_seconds}});
        if (!quiet)
          std::fprintf(stderr,
                       "tuner: per-replica batch %5d: step %.3f ms, compute %.3f ms, all-reduce alone %.3f ms\n", b,
                       1e3 * s.step_seconds, 1e3 * s.compute_seconds, 1e3 * s.comm_seconds);
      }
      model = saved_model;
      optimizer = saved_optimizer;
      device = &device_for(batch);
      device->load_host();
      tuner.set_cost(fit_step_time(samples));
      if (lead) keep_step_time_model(c.tuner_file, key, tuner.cost());
    }
    const StepTimeModel& cost = tuner.cost();
    log.write({{"type", "tuner_model"},
               {"seconds", seconds_since(replica_start) - evaluating},
               {"alpha_c_ms", 1e3 * cost.alpha_c},
               {"beta_c_ms", 1e3 * cost.beta_c},
               {"t_n_ms", 1e3 * cost.t_n},
               {"gamma", cost.gamma},
               {"kept", kept[0] == 1}});
    if (!quiet)
      std::fprintf(stderr, "tuner: step time model T_c = %.4f + %.6f b ms, T_n = %.4f ms, gamma %.2f%s\n",
                   1e3 * cost.alpha_c, 1e3 * cost.beta_c, 1e3 * cost.t_n, cost.gamma,
                   kept[0] == 1 ? (" (measured by an earlier run, kept in " + c.tuner_file + ")").c_str() : "");
  }

  if (!quiet)
    std::cerr << "training a " << model.arch.blocks << "x" << model.arch.channels << " "
              << nn::activation_name(model.arch.activation) << " network: " << total_steps << " steps of "
              << reference_batch << " positions"
              << (replicas > 1 ? " (" + std::to_string(replicas) + " replicas x " + std::to_string(c.batch) + ")" : "")
              << (c.batch_auto ? ", batch tuned" : "") << ", " << optimizer_name(c.optimizer.kind) << ", "
              << c.loader_threads << " loader threads; " << device->name() << "\n";

  // ---- the step loop -----------------------------------------------------------------------------
  open_loader();
  TrainResult result;
  nn::LossTotals interval;
  int64_t interval_steps = 0;
  double aside = 0;  // seconds of held-out metrics, checkpoints and tuning during the loop
  double interval_grad_norm = 0, interval_wait = 0;
  const auto run_start = Clock::now();
  auto interval_start = run_start;
  const int64_t first_step = step;
  const uint64_t first_stream = stream;

  // The batch after the current one, taken from the loader a step early so that a GPU copies it
  // over while the current step computes; given back whenever the loader is replaced.
  const Batch* next = nullptr;
  auto drop_next = [&] {
    if (next) loader->release(next);
    next = nullptr;
  };
  while (stream < total_samples) {
    const auto t_wait = Clock::now();
    const Batch* b = next ? next : loader->acquire();
    next = stream + uint64_t(batch) * uint64_t(replicas) < total_samples ? loader->acquire() : nullptr;
    interval_wait += seconds_since(t_wait);
    const double lr = c.schedule.at(int64_t(stream / reference_batch)) * tuner.lr_factor(step);

    // Forward, loss, backward, the average over the replicas and the update, on the mean loss. With
    // one replica and --batch auto, every noise_every steps the first half's gradient too: the small
    // batch of the noise scale's two-batch estimate, the whole batch being the big one. (Only even
    // batches are halved, so that both halves are alike.)
    const bool measure_half = tuner.measure_half(step, b->size);
    const Device::Step done = device->step(*b, lr, measure_half, next);
    tuner.add_step(done.local_norm2, done.grad_norm, done.half_norm2, measure_half, b->size);
    interval.add(done.totals);
    interval_grad_norm += done.grad_norm;
    stream += uint64_t(batch) * uint64_t(replicas);
    loader->release(b);
    ++step;
    ++interval_steps;

    // A sync point every noise_every steps: a noise-scale sample (the mean over the replicas of their
    // own gradients' squared norms against the averaged gradient's) and the stop decision, which
    // must be the same on every replica.
    bool stop = c.stop_after > 0 && step - first_step >= c.stop_after;
    if (replicas == 1) {
      stop = stop || (c.stop && c.stop->load());
    } else if (tuner.sample_due() || stream >= total_samples || stop) {
      double v[4] = {tuner.pending_local(), lead && c.stop && c.stop->load() ? 1.0 : 0.0, tuner.pending_half(),
                     tuner.pending_half_local()};
      comm.sum(v, 4);
      tuner.add_sample(v[0], batch, v[2], v[3]);
      stop = stop || v[1] > 0;
    }

    if (step % c.log_every == 0 || stream >= total_samples) {
      const nn::LossTotals all = sum_over_replicas(interval, comm);
      const double elapsed = seconds_since(interval_start);
      const double rate = double(all.samples) / elapsed;
      const double loader_rate = loader->samples_built() / std::max(1e-9, loader->busy_seconds()) * loader->threads();
      const double eta = double(total_samples - std::min(stream, total_samples)) / rate;
      const double progress = double(stream) / double(total_samples);
      result.last_train = summarize(all, c.val_lambda);
      json j = metrics_json(result.last_train);
      j.update({{"type", "train"},
                {"step", step},
                {"samples", stream},
                {"batch", batch},
                {"epoch", double(stream) / double(data.positions.size())},
                {"lr", lr},
                {"grad_norm", interval_grad_norm / double(interval_steps)},
                {"samples_per_second", rate},
                {"loader_samples_per_second", loader_rate},
                {"data_wait_fraction", interval_wait / elapsed},
                {"elapsed_seconds", seconds_since(run_start)}});
      if (tuner.noise().ready()) j["noise_scale"] = tuner.noise().noise_scale();
      if (tuner.halves().ready()) j["noise_scale_halves"] = tuner.halves().noise_scale();
      log.write(j);
      if (!quiet) {
        const Metrics& m = result.last_train;
        std::fprintf(stderr,
                     "step %lld (%.1f%%)  loss %.4f (policy %.4f, value %.4f, eval %.4f)  lr %.3g  | %.0f samples/s, "
                     "loader %.0f samples/s, data wait %.0f%%  | ETA %s\n",
                     (long long)step, 100.0 * std::min(1.0, progress), m.loss, m.policy_loss, m.value_loss,
                     m.value_eval_loss, lr, rate, loader_rate, 100 * interval_wait / elapsed,
                     format_duration(eta).c_str());
      }
      interval = {};
      interval_steps = 0;
      interval_grad_norm = interval_wait = 0;
      interval_start = Clock::now();
    }
    // Held-out metrics, checks, tuning and checkpoints along the way; their time is kept out of the
    // samples/s.
    const auto t_aside = Clock::now();
    // Every eval_every steps of the starting global batch, counted in samples: evaluations stay
    // evenly spaced in data seen whatever batch the tuner picks.
    const uint64_t eval_span = uint64_t(std::max<int64_t>(c.eval_every, 0)) * reference_batch;
    const bool eval_due = eval_span > 0 && stream / eval_span != (stream - uint64_t(batch) * replicas) / eval_span;
    if (!test.positions.empty() && eval_due && stream < total_samples) test_metrics();
    if (replicas > 1 && c.check_every > 0 && step % c.check_every == 0 && !comm.all_equal(device->weights_checksum()))
      throw std::runtime_error("the replicas' weights differ at step " + std::to_string(step) +
                               ": data-parallel training has diverged");
    // The tuner decides once the noise scale is measured (BatchTuner::decision_due).
    if (tuner.decision_due(step, batch) && stream < total_samples) {
      int best = 0;
      TunerDecision d = tuner.decide(batch, &best);
      comm.broadcast(&d.batch, sizeof d.batch, 0);
      json rows = json::array();
      for (const TunerRow& r : d.table)
        rows.push_back({{"batch", r.batch},
                        {"step_ms", r.step_ms},
                        {"compute_ms", r.compute_ms},
                        {"exposed_comm_ms", r.exposed_comm_ms},
                        {"samples_per_second", r.samples_per_second},
                        {"efficiency", r.efficiency},
                        {"goodput", r.goodput}});
      log.write({{"type", "tuner"},
                 {"step", step},
                 {"samples", stream},
                 {"seconds", seconds_since(replica_start) - evaluating},
                 {"noise_scale", d.noise_scale},
                 {"batch", d.batch},
                 {"best", best},
                 {"previous_batch", batch},
                 {"table", rows}});
      if (!quiet)
        std::fprintf(stderr, "tuner at step %lld: noise scale %.1f, per-replica batch %d -> %d\n%s", (long long)step,
                     d.noise_scale, batch, d.batch, format_table(d).c_str());
      if (d.batch != batch) {
        drop_next();
        switch_to(d.batch);
        batch = d.batch;
        open_loader();
        tuner.switched(step, batch);
      }
    }
    if (stop && stream < total_samples) {
      save();
      if (!quiet)
        std::cerr << "stopped at step " << step
                  << (c.checkpoint.empty() ? " (no --checkpoint: the state is lost)\n"
                                           : "; continue with --resume --checkpoint " + c.checkpoint + "\n");
      result.interrupted = true;
      break;
    }
    if (c.checkpoint_every > 0 && step % c.checkpoint_every == 0 && stream < total_samples) save();
    interval_start += Clock::now() - t_aside;
    aside += seconds_since(t_aside);
  }

  drop_next();
  const double seconds = seconds_since(run_start);
  result.step = step;
  result.batch = batch;
  result.noise_scale = tuner.noise().ready() ? tuner.noise().noise_scale() : NAN;
  result.samples_per_second = double(stream - first_stream) / std::max(1e-9, seconds - aside);
  result.loader_samples_per_second =
      loader->samples_built() / std::max(1e-9, loader->busy_seconds()) * loader->threads();
  if (result.interrupted) return result;

  // ---- the end: held-out metrics, the exported model, a final checkpoint -----------------------
  if (!test.positions.empty()) result.test = test_metrics();
  const std::vector<float> own = mean_running_statistics(*device, model, comm, false);
  if (lead) export_model(model, c.model_out);
  restore_own_statistics(*device, model, comm, own, false);
  save();
  log.write({{"type", "done"},
             {"step", step},
             {"model", c.model_out},
             {"seconds", seconds},
             {"samples_per_second", result.samples_per_second}});
  if (!quiet)
    std::cerr << "wrote " << c.model_out << " after " << step << " steps (" << format_duration(seconds) << ", "
              << std::lround(result.samples_per_second) << " samples/s)\n";
  return result;
}

}  // namespace

TrainResult train(const TrainConfig& config) {
  check_config(config);
  TrainConfig c = config;
  // Under mpirun this process is one replica; otherwise this process runs every replica on a thread.
  std::unique_ptr<HostComm> mpi = mpi_comm();
  const ProcessLayout layout = process_layout();
  const bool cuda = c.backend == nn::BackendKind::CUDA;
  if (c.gpus.empty()) c.gpus = {0};
  if (c.allreduce == AllReduce::AUTO) c.allreduce = cuda ? AllReduce::NCCL : AllReduce::HOST;
  const int local = mpi ? 1 : cuda ? int(c.gpus.size()) : c.replicas;
  if (mpi && (c.replicas > 1 || (cuda && c.gpus.size() > 1 && int(c.gpus.size()) < layout.local_size)))
    throw std::invalid_argument("under mpirun each process is one replica: give --gpus a GPU per local rank (or none)");
  const bool lead_process = !mpi || mpi->rank() == 0;
  if (!lead_process) c.quiet = true;
  const int hardware = usable_cpus().count;  // the affinity mask's and cgroup quota's, not the machine's
  const int threads = std::max(1, (c.threads > 0 ? c.threads : hardware) / local);
  // One loader thread kept an H200 waiting 78% of a 6x64's steps; four, 20% (bench/results/loop_rl_h200).
  if (c.loader_threads <= 0) c.loader_threads = cuda ? std::clamp(threads / 2, 1, 4) : 1;

  // ---- data, read once per process and shared by its replicas -----------------------------------
  Log log(lead_process ? c.log : "");  // data problems; the run's own records come from rank 0
  const int read_threads = std::max(threads * local, c.loader_threads);
  const bool every_move = !c.teacher.empty() && c.teacher_every_move;
  const Dataset data = load_dataset(c.data, {.window = c.window, .threads = read_threads, .every_move = every_move});
  report_issues(data, "training", c.quiet, log);
  Dataset test;
  if (!c.test.empty()) {
    test = load_dataset(c.test, {.threads = read_threads});
    report_issues(test, "held-out", c.quiet, log);
  }
  std::optional<nn::Model> teacher;
  if (!c.teacher.empty()) {
    teacher = nn::load_model(c.teacher);
    if (lead_process && !c.quiet) {
      const int64_t own = std::count_if(data.positions.begin(), data.positions.end(), has_own_target);
      std::cerr << "teacher " << c.teacher << " (" << teacher->arch.blocks << "x" << teacher->arch.channels
                << "), weight " << c.teacher_weight << ": " << own << " positions with their own targets, "
                << int64_t(data.positions.size()) - own << " with the teacher's alone\n";
    }
  }
  const nn::Model* teacher_model = teacher ? &*teacher : nullptr;
  const int64_t replicas = mpi ? mpi->size() : local;
  const int64_t total_steps =
      c.steps > 0 ? c.steps
                  : std::max<int64_t>(
                        1, int64_t(std::ceil(c.epochs * double(data.positions.size()) / double(c.batch * replicas))));
  c.schedule.total_steps = total_steps;
  const bool nccl = cuda && c.allreduce == AllReduce::NCCL;

  if (mpi) {
    ReplicaPlace place;
    place.gpu = c.gpus.size() > 1 ? c.gpus[size_t(layout.local_rank)] : c.gpus[0] + layout.local_rank;
    const NcclComms comms = nccl ? NcclComms::for_process(*mpi, place.gpu) : NcclComms();
    place.nccl = comms.at(0);
    ThreadPool pool(threads);
    return run_replica(c, data, test, teacher_model, total_steps, *mpi, place, pool);
  }
  if (local == 1) {
    // One GPU with `--allreduce nccl` asked for explicitly still runs the all-reduce (of one rank):
    // it measures its cost and checks the buckets on a machine with one GPU.
    SoloComm solo;
    ThreadPool pool(threads);
    const NcclComms comms = cuda && config.allreduce == AllReduce::NCCL ? NcclComms::for_gpus(c.gpus) : NcclComms();
    const ReplicaPlace place{.gpu = c.gpus[0], .nccl = comms.at(0)};
    return run_replica(c, data, test, teacher_model, total_steps, solo, place, pool);
  }

  // Several replicas on threads: one per GPU, or CPU replicas sharing the cores.
  const NcclComms comms = nccl ? NcclComms::for_gpus(c.gpus) : NcclComms();
  std::vector<TrainResult> results(static_cast<size_t>(local));
  run_on_threads(local, [&](int r, HostComm& comm) {
    const ReplicaPlace place{.gpu = cuda ? c.gpus[size_t(r)] : 0, .nccl = comms.at(size_t(r))};
    ThreadPool pool(threads);
    results[size_t(r)] = run_replica(c, data, test, teacher_model, total_steps, comm, place, pool);
  });
  return results[0];
}

}  // namespace jiriki::training
