// The training run, top to bottom: data, model, optimizer, the step loop with its log, held-out
// metrics, checkpoints and the exported model. `jiriki train` fills a TrainConfig from its options
// and calls train(); tests call it directly.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "nn/backend.h"
#include "nn/layers_backward.h"
#include "nn/model.h"
#include "training/optimizer.h"

namespace jiriki::training {

// How data-parallel replicas average their gradients: NCCL in buckets overlapped with the backward
// pass (GPUs), on the host by CPU threads, or AUTO: NCCL on GPUs, the host on the CPU.
enum class AllReduce { AUTO, NCCL, HOST };
AllReduce parse_allreduce(const std::string& name);  // "auto" | "nccl" | "host"; throws
const char* allreduce_name(AllReduce a);

struct TrainConfig {
  std::vector<std::string> data;  // files, directories, globs (hcpe, hcpe3)
  std::vector<std::string> test;  // held-out data (empty: no held-out metrics)
  std::string model_out;          // the exported model file, written at the end
  std::string init;               // start from this model file, or else a fresh network of `arch`
  nn::Architecture arch;
  bool arch_given = false;  // --blocks/--channels/--activation were given: a resumed checkpoint must match
  uint64_t seed = 1;        // the fresh network's weights and the data shuffle

  int batch = 256;    // positions per step on each replica (the global batch is replicas x batch)
  int64_t steps = 0;  // the run's length in steps, or (when 0) in epochs:
  double epochs = 1.0;
  OptimizerConfig optimizer;
  Schedule schedule;            // total_steps is set by train()
  double clip_grad_norm = 0.0;  // 0: no clipping
  float val_lambda = 0.333f;    // weight of the eval target in the value loss (dlshogi's)
  float bn_momentum = 0.1f;     // batch-norm running statistics (PyTorch's default)
  bool mirror = false;          // left-right mirror images of half the positions (training/loader.h)

  // ---- distillation (training/teacher.h) ------------------------------------------------------
  std::string teacher;             // a teacher network's model file: its outputs become targets ("": none)
  float teacher_weight = 0.5f;     // its share in the targets of positions that have their own
  bool teacher_every_move = true;  // with a teacher, also every hcpe3 move self-play did not record for training

  int64_t window = 0;          // train on the newest N positions only (0: all)
  int64_t test_positions = 0;  // evaluate on the first N held-out positions (0: all)
  int64_t eval_every = 0;      // held-out metrics every K steps of the starting batch, in samples (0: only at the end)

  std::string checkpoint;                   // checkpoint file ("" : none)
  int64_t checkpoint_every = 0;             // steps between checkpoints (0: only when stopping)
  bool resume = false;                      // continue from `checkpoint`
  int64_t stop_after = 0;                   // stop this invocation after N steps, as on Ctrl-C (0: never)
  const std::atomic<bool>* stop = nullptr;  // set (by a SIGINT handler) to stop after the current step

  // Where the steps run: CPU (training/network.h) or CUDA (training/cuda/), through training/device.h.
  // `jiriki train --backend auto` resolves it with nn::resolve_backend.
  nn::BackendKind backend = nn::BackendKind::CPU;
  nn::CudaSettings cuda;  // the GPU trainer's convolutions, logging, profiling (`jiriki train`: from the environment)

  // ---- data parallelism (training/comm.h, training/buckets.h) --------------------------------
  // One replica per GPU of `gpus` (threads of this process), or `replicas` CPU replicas on threads;
  // under mpirun one replica per process instead, on GPU local_rank. Each replica takes its slice
  // of every global batch; gradients are averaged, by NCCL in buckets overlapped with the backward
  // pass ("nccl", GPUs only) or on the host by CPU threads ("host"; on GPUs in the same buckets,
  // copied to the host and back while the backward pass goes on).
  std::vector<int> gpus;  // the CUDA devices, one replica each; empty: {0}
  int replicas = 1;       // cpu backend
  AllReduce allreduce = AllReduce::AUTO;
  double bucket_mb = 4.0;      // gradient bucket size (GPUs, NCCL and host)
  int64_t check_every = 1000;  // steps between checks that every replica holds the same weights

  // ---- the per-replica batch tuner (training/batch_tuner.h) -----------------------------------
  bool batch_auto = false;            // choose `batch` by goodput, starting at the value above
  int tune_min = 8, tune_max = 1024;  // the candidate batches: tune_min, 2 tune_min, ... <= tune_max
  int64_t tune_every = 200;           // steps between decisions
  int64_t noise_every = 50;           // steps between gradient-noise samples (one replica: each costs a pass)
  bool noise_halves = false;          // several replicas: also the noise scale from batch halves, logged beside
  int64_t lr_ramp_steps = 50;         // steps over which the learning rate moves to a new batch's
  int tune_reps = 10;                 // timed steps per candidate batch
  std::string tuner_file;             // step-time models kept from run to run (training/tuner_file.h; "": none)
  int threads = 0;                    // compute threads (0: every hardware thread)
  int loader_threads = 0;  // data loader threads per replica (0: up to 4 on a GPU, whose host cores idle; 1 on the CPU)
  std::string log;         // JSON-lines log file ("" : none); appended to
  int64_t log_every = 100;  // steps between progress lines and log records
  bool quiet = false;       // no progress lines on stderr
};

// Held-out or training metrics, averaged over the samples seen.
struct Metrics {
  double policy_loss = 0, value_loss = 0, value_eval_loss = 0, loss = 0;
  double policy_accuracy = 0, value_accuracy = 0;
  int64_t samples = 0;
};
Metrics summarize(const nn::LossTotals& totals, float val_lambda);

struct TrainResult {
  int64_t step = 0;                      // steps done in total (including those before a resume)
  int batch = 0;                         // the per-replica batch at the end (the tuner's last choice)
  double noise_scale = 0;                // the last gradient noise scale estimate (NaN when none)
  bool interrupted = false;              // stopped early by `stop` or `stop_after`; the checkpoint holds the state
  Metrics last_train;                    // over the last log interval
  Metrics test;                          // at the end (samples == 0 without --test)
  double samples_per_second = 0;         // training, this invocation
  double loader_samples_per_second = 0;  // the loader alone: its positions per second of worker time, times its threads
};

// Runs the training the config describes: on one replica, on several (threads), or as this
// process's rank of an mpirun job. Throws std::runtime_error (or invalid_argument) with a
// message for the user on bad input: unreadable data, a checkpoint of another run, bad options.
TrainResult train(const TrainConfig& config);

}  // namespace jiriki::training
