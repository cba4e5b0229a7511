// `jiriki train`: trains a network on hcpe / hcpe3 records (training/trainer.h does the work).
#include <atomic>
#include <csignal>
#include <iostream>

#include "command/commands.h"
#include "command/options.h"
#include "common/args.h"
#include "training/trainer.h"

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
  args.option("data", "", "training data: .hcpe / .hcpe3 files, directories, glob patterns", true)
      .option("model-out", "", "the trained model file to write (required)")
      .option("init", "", "start from this model file instead of a fresh network")
      .option("blocks", "10", "residual blocks of a fresh network")
      .option("channels", "192", "channels of a fresh network")
      .option("activation", "relu", "relu or swish (fresh network)")
      .option("batch", "256", "positions per step on each replica, or auto: tuned for goodput (see --tune-*)")
      .option("steps", "0", "steps to train (0: use --epochs)")
      .option("epochs", "1", "passes over the training data, when --steps is 0")
      .option("optimizer", "sgd", "sgd (Nesterov momentum) or adamw")
      .option("lr", "auto", "peak learning rate (auto: 0.1 for sgd, 0.001 for adamw)")
      .option("momentum", "0.9", "SGD momentum")
      .flag("no-nesterov", "plain momentum instead of Nesterov's (SGD)")
      .option("weight-decay", "0.0001", "weight decay of conv and fc weights (decoupled for adamw)")
      .option("beta1", "0.9", "AdamW beta1")
      .option("beta2", "0.999", "AdamW beta2")
      .option("schedule", "cosine", "learning-rate schedule after warm-up: cosine, step or constant")
      .option("warmup-steps", "0", "steps of linear warm-up")
      .option("lr-final-ratio", "0", "cosine: final learning rate as a fraction of --lr")
      .option("lr-step-every", "0", "step: steps between decays")
      .option("lr-step-gamma", "0.1", "step: factor of each decay")
      .option("clip-grad-norm", "0", "clip the global gradient norm to this (0: off)")
      .option("val-lambda", "0.333", "weight of the eval target in the value loss (dlshogi)")
      .flag("mirror", "train on left-right mirror images of half the positions (the rules are symmetric)")
      .option("bn-momentum", "0.1", "batch-norm running statistics momentum")
      .option("window", "0", "train on the newest N positions only (0: all)")
      .option("test", "", "held-out data for metrics", true)
      .option("test-positions", "0", "held-out positions to evaluate (0: all)")
      .option(
          "eval-every", "0",
          "held-out metrics every K steps of the starting batch (counted in samples under --batch auto; 0: at the end)")
      .option("checkpoint", "", "checkpoint file (default: MODEL-OUT.ckpt)")
      .option("checkpoint-every", "0", "steps between checkpoints (0: only on Ctrl-C and at the end)")
      .flag("resume", "continue from the checkpoint")
      .option("stop-after", "0", "stop after N steps of this invocation, as on Ctrl-C (time-sliced jobs)")
      .option("loader-threads", "0", "data loader threads per replica (0: up to 4 on a GPU, 1 on the CPU)")
      .option("log", "", "JSON-lines log (default: MODEL-OUT.log.jsonl)")
      .option("log-every", "100", "steps between progress lines")
      .option("replicas", "1", "data parallelism on the CPU: replicas on threads (--backend cpu)")
      .option("allreduce", "auto", "how replicas average gradients: nccl (GPUs, overlapped with backward) or host")
      .option("bucket-mb", "4", "gradient bucket size in MB (NCCL and host all-reduce)")
      .option("check-every", "1000", "steps between checks that the replicas' weights are identical (0: never)")
      .option("batch-start", "64", "--batch auto: the per-replica batch to start from")
      .option("tune-min", "8", "--batch auto: smallest candidate per-replica batch")
      .option("tune-max", "1024", "--batch auto: largest candidate per-replica batch (powers of two from --tune-min)")
      .option("tune-every", "200", "--batch auto: steps between decisions")
      .option("tune-reps", "10", "--batch auto: timed steps per candidate batch")
      .option("noise-every", "50",
              "steps between gradient-noise-scale samples (several replicas: each replica's gradient against the "
              "average; one replica with --batch auto: the first half of a batch against the whole)")
      .option("lr-ramp-steps", "50", "--batch auto: steps over which the learning rate moves to a new batch's");
  options::add_backend(args, nn::BackendUse::TRAINING);
  options::add_gpus(args,
                    "the CUDA devices, one replica each, e.g. 0 or 0,1,2,3 (cuda; a GPU trains in bf16 mixed "
                    "precision and needs channels a multiple of 8)");
  options::add_threads(args, "compute threads (0: all)");
  options::add_seed(args, "seed of the fresh network's weights and of the data shuffle");
  if (int rc = args.parse(argc, argv); rc >= 0) return rc;

  if (!args.has("data")) throw std::invalid_argument("--data PATH... is required");
  if (args.has("init") && (args.has("blocks") || args.has("channels") || args.has("activation")))
    throw std::invalid_argument(
        "--init takes the architecture from the model file: drop --blocks, --channels, --activation");

  training::TrainConfig c;
  c.data = args.all("data");
  c.test = args.has("test") ? args.all("test") : std::vector<std::string>{};
  c.model_out = args.str("model-out");
  c.init = args.str("init");
  c.arch.blocks = int(args.integer("blocks"));
  c.arch.channels = int(args.integer("channels"));
  if (c.arch.blocks < 0 || c.arch.blocks > 1024) throw std::invalid_argument("--blocks must be between 0 and 1024");
  if (c.arch.channels < 1 || c.arch.channels > 4096)
    throw std::invalid_argument("--channels must be between 1 and 4096");
  c.arch.activation = nn::parse_activation(args.str("activation"));
  c.arch_given = args.has("blocks") || args.has("channels") || args.has("activation");
  c.seed = options::seed(args);
  c.batch_auto = args.str("batch") == "auto";
  c.batch = int(c.batch_auto ? args.integer("batch-start") : args.integer("batch"));
  c.steps = args.integer("steps");
  c.epochs = args.real("epochs");
  c.optimizer.kind = training::parse_optimizer(args.str("optimizer"));
  c.optimizer.momentum = args.real("momentum");
  c.optimizer.nesterov = !args.has("no-nesterov");
  c.optimizer.weight_decay = args.real("weight-decay");
  c.optimizer.beta1 = args.real("beta1");
  c.optimizer.beta2 = args.real("beta2");
  c.schedule.kind = training::parse_schedule(args.str("schedule"));
  c.schedule.lr =
      args.str("lr") == "auto" ? (c.optimizer.kind == training::OptimizerKind::SGD ? 0.1 : 0.001) : args.real("lr");
  c.schedule.warmup_steps = args.integer("warmup-steps");
  c.schedule.final_ratio = args.real("lr-final-ratio");
  c.schedule.step_every = args.integer("lr-step-every");
  c.schedule.gamma = args.real("lr-step-gamma");
  c.clip_grad_norm = args.real("clip-grad-norm");
  c.val_lambda = float(args.real("val-lambda"));
  c.mirror = args.has("mirror");
  c.bn_momentum = float(args.real("bn-momentum"));
  c.window = args.integer("window");
  c.test_positions = args.integer("test-positions");
  c.eval_every = args.integer("eval-every");
  c.checkpoint = args.has("checkpoint") ? args.str("checkpoint") : c.model_out.empty() ? "" : c.model_out + ".ckpt";
  c.checkpoint_every = args.integer("checkpoint-every");
  c.resume = args.has("resume");
  c.stop_after = args.integer("stop-after");
  const nn::BackendChoice backend = options::backend(args, nn::BackendUse::TRAINING);
  c.backend = backend.kind;
  if (args.has("gpus")) c.gpus = options::gpus(args);
  c.cuda = nn::CudaSettings::from_environment();
  c.replicas = int(args.integer("replicas"));
  c.allreduce = training::parse_allreduce(args.str("allreduce"));
  c.bucket_mb = args.real("bucket-mb");
  c.check_every = args.integer("check-every");
  c.tune_min = int(args.integer("tune-min"));
  c.tune_max = int(args.integer("tune-max"));
  c.tune_every = args.integer("tune-every");
  c.tune_reps = int(args.integer("tune-reps"));
  c.noise_every = args.integer("noise-every");
  c.lr_ramp_steps = args.integer("lr-ramp-steps");
  c.threads = options::threads(args);
  c.loader_threads = int(args.integer("loader-threads"));
  if (c.loader_threads < 0) throw std::invalid_argument("--loader-threads must be 0 (auto) or more");
  c.log = args.has("log") ? args.str("log") : c.model_out.empty() ? "" : c.model_out + ".log.jsonl";
  c.log_every = args.integer("log-every");

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
