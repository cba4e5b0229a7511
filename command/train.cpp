// `jiriki train`: trains a network on hcpe / hcpe3 records (training/trainer.h does the work).
#include <atomic>
#include <csignal>
#include <iostream>

#include "command/commands.h"
#include "command/options.h"
#include "common/args.h"
#include "training/trainer.h"
#include "training/tuner_file.h"

namespace jiriki {

namespace {
std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};
// The first Ctrl-C or SIGTERM (what a job scheduler, systemd or `timeout` sends) asks for a stop
// after the current step, with its checkpoint (lock-free atomic stores: safe in a handler); a second
// one ends the process at once.
void on_signal(int sig) {
  g_signal = sig;
  g_stop = true;
  std::signal(sig, SIG_DFL);
}
}  // namespace

int cmd_train(int argc, char** argv) {
  Args args("jiriki train --data PATH... --model-out FILE [--init FILE | --blocks N --channels C] [OPTIONS]",
            "Trains a network on hcpe / hcpe3 records (files, directories, globs). Ctrl-C stops after the current\n"
            "step and writes the checkpoint (so does SIGTERM); --resume continues exactly where it stopped.\n"
            "Several GPUs: --gpus 0,1,... (one thread each), or `mpirun -np K jiriki train ...` (one process per GPU,\n"
            "GPU = local rank); --batch auto picks the per-GPU batch by measured goodput.");
  training::TrainConfig c;
  options::Device device;
  std::string batch_text = std::to_string(c.batch), lr_text = "auto";
  int batch_start = 64;
  args.bind("data", c.data, "training data: .hcpe / .hcpe3 files, directories, glob patterns")
      .bind("model-out", c.model_out, "the trained model file to write (required)")
      .bind("init", c.init, "start from this model file instead of a fresh network")
      .bind("blocks", c.arch.blocks, "residual blocks of a fresh network", 0, 1024)
      .bind("channels", c.arch.channels, "channels of a fresh network", 1, 4096)
      .bind("activation", c.arch.activation, "relu or swish (fresh network)", nn::parse_activation, nn::activation_name)
      .bind("batch", batch_text, "positions per step on each replica, or auto: tuned for goodput (see --tune-*)")
      .bind("steps", c.steps, "steps to train (0: use --epochs)")
      .bind("epochs", c.epochs, "passes over the training data, when --steps is 0")
      .bind("optimizer", c.optimizer.kind, "sgd (Nesterov momentum) or adamw", training::parse_optimizer,
            training::optimizer_name)
      .bind("lr", lr_text, "peak learning rate (auto: 0.1 for sgd, 0.001 for adamw)")
      .bind("momentum", c.optimizer.momentum, "SGD momentum")
      .flag("no-nesterov", c.optimizer.nesterov, "plain momentum instead of Nesterov's (SGD)", false)
      .bind("weight-decay", c.optimizer.weight_decay, "weight decay of conv and fc weights (decoupled for adamw)")
      .bind("beta1", c.optimizer.beta1, "AdamW beta1")
      .bind("beta2", c.optimizer.beta2, "AdamW beta2")
      .bind("schedule", c.schedule.kind, "learning-rate schedule after warm-up: cosine, step or constant",
            training::parse_schedule, training::schedule_name)
      .bind("warmup-steps", c.schedule.warmup_steps, "steps of linear warm-up")
      .bind("lr-final-ratio", c.schedule.final_ratio, "cosine: final learning rate as a fraction of --lr")
      .bind("lr-step-every", c.schedule.step_every, "step: steps between decays")
      .bind("lr-step-gamma", c.schedule.gamma, "step: factor of each decay")
      .bind("clip-grad-norm", c.clip_grad_norm, "clip the global gradient norm to this (0: off)")
      .bind("val-lambda", c.val_lambda, "weight of the eval target in the value loss (dlshogi)")
      .flag("mirror", c.mirror, "train on left-right mirror images of half the positions (the rules are symmetric)")
      .bind("teacher", c.teacher,
            "distillation: a teacher network's model file (e.g. a larger network); its policy over the legal moves "
            "and its value become targets, mixed by --teacher-weight")
      .bind("teacher-weight", c.teacher_weight,
            "the teacher's share in the policy and eval targets of positions that have their own", 0.0, 1.0)
      .flag("teacher-recorded-only", c.teacher_every_move,
            "with --teacher, only the moves the records hold as training targets (by default every move of hcpe3 "
            "games is a position, those without a target of their own taking the teacher's)",
            false)
      .bind("bn-momentum", c.bn_momentum, "batch-norm running statistics momentum")
      .bind("window", c.window,
            "train on the newest N positions with a target of their own only (0: all; with --teacher, the moves "
            "between them too)")
      .bind("test", c.test, "held-out data for metrics")
      .bind("test-positions", c.test_positions, "held-out positions to evaluate (0: all)")
      .bind(
          "eval-every", c.eval_every,
          "held-out metrics every K steps of the starting batch (counted in samples under --batch auto; 0: at the end)")
      .bind("checkpoint", c.checkpoint, "checkpoint file (default: MODEL-OUT.ckpt)")
      .bind("checkpoint-every", c.checkpoint_every, "steps between checkpoints (0: only on Ctrl-C and at the end)")
      .flag("resume", c.resume, "continue from the checkpoint")
      .bind("stop-after", c.stop_after, "stop after N steps of this invocation, as on Ctrl-C (time-sliced jobs)")
      .bind("loader-threads", c.loader_threads, "data loader threads per replica (0: up to 4 on a GPU, 1 on the CPU)",
            0)
      .bind("log", c.log, "JSON-lines log (default: MODEL-OUT.log.jsonl)")
      .bind("log-every", c.log_every, "steps between progress lines")
      .bind("replicas", c.replicas, "data parallelism on the CPU: replicas on threads (--backend cpu)")
      .bind("allreduce", c.allreduce, "how replicas average gradients: nccl (GPUs, overlapped with backward) or host",
            training::parse_allreduce, training::allreduce_name)
      .bind("bucket-mb", c.bucket_mb, "gradient bucket size in MB (NCCL and host all-reduce)")
      .bind("check-every", c.check_every, "steps between checks that the replicas' weights are identical (0: never)")
      .bind("batch-start", batch_start, "--batch auto: the per-replica batch to start from")
      .bind("tune-min", c.tune_min, "--batch auto: smallest candidate per-replica batch")
      .bind("tune-max", c.tune_max, "--batch auto: largest candidate per-replica batch (powers of two from --tune-min)")
      .bind("tune-every", c.tune_every, "--batch auto: steps between decisions")
      .bind("tune-reps", c.tune_reps,
            "--batch auto: timed steps per candidate batch (the fitted step times are kept in "
            "~/.cache/jiriki/batch-tuner.txt, or $JIRIKI_TUNER_CACHE, for later runs of the same setting; "
            "JIRIKI_TUNER_CACHE=off times every run)")
      .bind("noise-every", c.noise_every,
            "steps between gradient-noise-scale samples (several replicas: each replica's gradient against the "
            "average; one replica with --batch auto: the first half of a batch against the whole)")
      .flag("noise-halves", c.noise_halves,
            "several replicas: also estimate the noise scale from each replica's batch halves (one more pass every "
            "--noise-every steps), logged as noise_scale_halves beside the replicas' noise_scale")
      .bind("lr-ramp-steps", c.lr_ramp_steps,
            "--batch auto: steps over which the learning rate moves to a new batch's");
  options::bind_device(args, device, nn::BackendUse::TRAINING,
                       "the CUDA devices, one replica each, e.g. 0 or 0,1,2,3 (cuda; a GPU trains in bf16 mixed "
                       "precision and needs channels a multiple of 8)");
  options::bind_threads(args, c.threads, "compute threads (0: all)");
  options::bind_seed(args, c.seed, "seed of the fresh network's weights and of the data shuffle");
  if (int rc = args.parse(argc, argv); rc >= 0) return rc;

  if (!args.has("data")) throw std::invalid_argument("--data PATH... is required");
  c.arch_given = args.has("blocks") || args.has("channels") || args.has("activation");
  if (args.has("init") && c.arch_given)
    throw std::invalid_argument(
        "--init takes the architecture from the model file: drop --blocks, --channels, --activation");
  c.batch_auto = batch_text == "auto";
  c.batch = c.batch_auto ? batch_start : int(parse_integer("batch", batch_text));
  c.schedule.lr =
      lr_text == "auto" ? (c.optimizer.kind == training::OptimizerKind::SGD ? 0.1 : 0.001) : parse_real("lr", lr_text);
  if (!args.has("checkpoint")) c.checkpoint = c.model_out.empty() ? "" : c.model_out + ".ckpt";
  if (!args.has("log")) c.log = c.model_out.empty() ? "" : c.model_out + ".log.jsonl";
  const nn::BackendChoice backend = options::backend(device, nn::BackendUse::TRAINING);
  c.backend = backend.kind;
  if (args.has("gpus")) c.gpus = device.gpus;
  c.cuda = nn::CudaSettings::from_environment();
  c.tuner_file = training::tuner_file_path();

  std::cerr << backend.line() << "\n";
  c.stop = &g_stop;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  training::TrainResult r = training::train(c);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  return r.interrupted && g_stop ? 128 + g_signal : 0;  // as a shell reports a command the signal ended
}

}  // namespace jiriki
