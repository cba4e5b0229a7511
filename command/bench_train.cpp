// `jiriki bench train`: samples per second of the trainer (CPU or CUDA), of its data loader alone,
// of the GPU's step alone, and of data parallelism over several GPUs; and the gradient dump that
// scripts/torch_train_reference.py checks. Kept out of the trainer's API (training/trainer.h).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <utility>

#include "command/commands.h"
#include "command/options.h"
#include "common/args.h"
#include "nn/model_file.h"
#include "training/comm.h"
#include "training/data.h"
#include "training/loader.h"
#include "training/trainer.h"
#if JIRIKI_HAVE_CUDA
#include "training/cuda/gpu_trainer.h"
#include "training/cuda/nccl_setup.h"
#endif

namespace jiriki {

namespace {

// The loader on its own for `steps` batches of c.batch positions with c.loader_threads workers: its
// samples per second.
double loader_samples_per_second(const training::Dataset& data, const training::TrainConfig& c, int64_t steps) {
  training::Loader loader(data, {.batch_size = c.batch, .seed = c.seed, .threads = c.loader_threads});
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t s = 0; s < steps; ++s) loader.release(loader.acquire());
  return double(steps) * c.batch / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

#if JIRIKI_HAVE_CUDA
namespace {

// For scripts/torch_train_reference.py: `path`.jnn holds the model, `path` one batch and the GPU
// trainer's gradients for it (little-endian):
//   8 bytes "JIRIKIGD", u32 version 1, i32 n, f32 val_lambda,
//   f64 loss sums over the batch (policy, value against the result, value against the eval),
//   f32 features [n][119][81], policy target [n][2187], value result [n], value eval [n],
//   u32 tensor count, per trainable tensor (Model::tensors() order): u32 name length, name,
//   u64 float count, f32 gradient of the mean loss (the Model's layout).
void write_gradient_dump(const std::string& path, const nn::Model& model, training::cuda::GpuTrainer& gpu,
                         const training::Batch& b, float val_lambda) {
  const nn::LossTotals totals = gpu.compute_gradients(b, val_lambda, 0.1f, 1.0f / float(b.size));
  nn::Model grads(model.arch);
  gpu.download_gradients(grads);
  nn::save_model(model, path + ".jnn");
  std::ofstream out(path, std::ios::binary);
  auto put = [&](const void* p, size_t bytes) { out.write(static_cast<const char*>(p), std::streamsize(bytes)); };
  const uint32_t version = 1;
  const int32_t n = b.size;
  const double sums[3] = {totals.policy, totals.value_result, totals.value_eval};
  put("JIRIKIGD", 8), put(&version, 4), put(&n, 4), put(&val_lambda, 4), put(sums, sizeof sums);
  put(b.features, size_t(n) * nn::INPUT_SIZE * 4), put(b.policy_target, size_t(n) * nn::POLICY_SIZE * 4);
  put(b.value_result, size_t(n) * 4), put(b.value_eval, size_t(n) * 4);
  std::vector<std::pair<std::string, const nn::Tensor*>> tensors;
  for (const auto& t : std::as_const(grads).tensors())
    if (t.trainable) tensors.emplace_back(t.name, t.tensor);
  const uint32_t count = uint32_t(tensors.size());
  put(&count, 4);
  for (const auto& [name, t] : tensors) {
    const uint32_t len = uint32_t(name.size());
    const uint64_t floats = t->size();
    put(&len, 4), put(name.data(), len), put(&floats, 8), put(t->ptr(), floats * 4);
  }
  if (!out.flush()) throw std::runtime_error(path + ": cannot write the gradient dump");
}

// Seconds per step of the GPU trainer alone, its inputs already on the device: a fresh network on
// the first batch of the data, three steps to warm up (the first runs eagerly, then the step is
// captured into CUDA graphs), then `reps` replays timed with CUDA events. Writes the gradient dump
// first when `dump` is not empty.
double gpu_step_seconds(const training::TrainConfig& c, int reps, const std::string& dump) {
  nn::Model model(c.arch);
  nn::init_model(model, c.seed);
  training::cuda::GpuTrainer gpu(model, c.optimizer, c.batch, c.gpus[0], c.cuda);
  std::fprintf(stderr, "%s\n", gpu.description().c_str());
  const training::Dataset data = training::load_dataset(c.data, {});
  training::Loader loader(data, {.batch_size = c.batch, .seed = c.seed, .allocator = gpu.host_allocator()});
  const training::Batch* b = loader.acquire();
  if (!dump.empty()) write_gradient_dump(dump, model, gpu, *b, c.val_lambda);
  for (int i = 0; i < 3; ++i) gpu.train_step(*b, c.val_lambda, c.bn_momentum, 0.01, 0.0);
  const double seconds = gpu.device_seconds_per_step(reps);
  loader.release(b);
  return seconds;
}

// The host mean's threads a rank: --threads shared out among the ranks (0: the usable CPUs, as training does).
int host_threads_per_rank(const training::TrainConfig& c, int ranks) {
  return c.threads > 0 ? std::max(1, c.threads / ranks) : training::ThreadGroup(ranks).threads_per_rank();
}

// Data parallelism on the device alone: a fresh network on every GPU of `gpus` (one thread each), each
// on its slice of the first global batch, gradients averaged by NCCL in buckets (comms), on the host
// (host), or not at all (a GPU alone: neither). Seconds per step with the average, without it and of
// the average alone, of the slowest GPU. NCCL and alone: CUDA events around graph replays; host:
// wall-clock steps.
training::cuda::GpuTrainer::Timing data_parallel_timing(const training::TrainConfig& c, const std::vector<int>& gpus,
                                                        const std::vector<ncclComm_t>& comms, bool host,
                                                        const training::Dataset& data, int reps,
                                                        size_t* gradient_floats = nullptr) {
  const int n = int(gpus.size());
  training::cuda::GpuTrainer::Timing slowest;  // written by rank 0
  training::run_on_threads(
      n,
      [&](int r, training::HostComm& comm) {
        nn::Model model(c.arch);
        nn::init_model(model, c.seed);
        training::cuda::GpuTrainer gpu(model, c.optimizer, c.batch, gpus[size_t(r)], c.cuda);
        if (!comms.empty()) gpu.attach_nccl(comms[size_t(r)], size_t(c.bucket_mb * 1e6));
        if (host) gpu.attach_host(comm, size_t(c.bucket_mb * 1e6));
        training::Loader loader(data, {.batch_size = c.batch,
                                       .seed = c.seed,
                                       .stride = uint64_t(c.batch) * uint64_t(n),
                                       .offset = uint64_t(r) * uint64_t(c.batch),
                                       .allocator = gpu.host_allocator()});
        const training::Batch* b = loader.acquire();
        for (int i = 0; i < 3; ++i) gpu.train_step(*b, c.val_lambda, c.bn_momentum, 0.01, 0.0);
        comm.max(0);
        const training::cuda::GpuTrainer::Timing t = gpu.time_step(reps);
        loader.release(b);
        const training::cuda::GpuTrainer::Timing worst{comm.max(t.step),  comm.max(t.compute), comm.max(t.comm),
                                                       comm.max(t.copy),  comm.max(t.mean),    comm.max(t.wait),
                                                       comm.max(t.reduce)};
        if (r == 0) {
          slowest = worst;
          if (gradient_floats) *gradient_floats = gpu.gradient_floats();
          if (!comms.empty() || host) std::fprintf(stderr, "batch %d: %s\n", c.batch, gpu.bucket_summary().c_str());
        }
      },
      host_threads_per_rank(c, n));
  return slowest;
}

// `jiriki bench train --gpus LIST`: per per-GPU batch, one GPU alone against all of them with the
// gradients averaged, on the device alone; then NCCL's bandwidth for one message of the gradient's
// size against what the buckets reach.
int bench_data_parallel(const training::TrainConfig& base, const std::vector<int>& gpus, bool nccl,
                        const std::vector<int64_t>& batches, int reps, const training::Dataset& data) {
  const int n = int(gpus.size());
  std::vector<ncclComm_t> comms;
  if (nccl) comms = training::cuda::nccl_communicators(gpus);
  struct Release {
    std::vector<ncclComm_t>& comms;
    ~Release() {
      for (auto c : comms) training::cuda::nccl_destroy(c);
    }
  } release{comms};
  std::printf(
      "%d GPUs (%s), gradients averaged by %s\n", n,
      [&] {
        std::string s;
        for (int g : gpus) {
          if (!s.empty()) s += ',';
          s += std::to_string(g);
        }
        return s;
      }()
          .c_str(),
      nccl ? "NCCL all-reduce in buckets, overlapped with the backward pass"
           : ("the host (" + std::to_string(host_threads_per_rank(base, n)) + " CPU threads a GPU)").c_str());
  std::printf("%8s %14s %14s %10s %11s %13s %11s %10s\n", "batch/GPU", "1 GPU samp/s", "all samp/s", "step ms",
              "compute ms", "exposed comm", "comm alone", "scaling");
  size_t floats = 0;
  double comm_alone = 0;
  training::cuda::GpuTrainer::Timing last;
  for (int64_t b : batches) {
    training::TrainConfig c = base;
    c.batch = int(b);
    const double one = data_parallel_timing(c, {gpus[0]}, {}, false, data, reps).step;
    const auto t = data_parallel_timing(c, gpus, comms, !nccl, data, reps, &floats);
    const double single = double(b) / one, all = double(b) * n / t.step;
    std::printf("%8lld %14.0f %14.0f %10.3f %11.3f %13.3f %11.3f %9.1f%%\n", (long long)b, single, all, 1e3 * t.step,
                1e3 * t.compute, 1e3 * std::max(0.0, t.step - t.compute), 1e3 * t.comm, 100.0 * all / (single * n));
    std::fflush(stdout);
    comm_alone = t.comm;
    last = t;
  }
  if (!nccl && !batches.empty()) {
    // The floor of host aggregation: what its copies and its mean cost alone, each GPU at once.
    const double mb = double(floats) * sizeof(float) / 1e6;
    std::printf(
        "host all-reduce of the %.1f MB gradient (slowest GPU, last batch): copies down and up alone %.3f ms "
        "(%.1f GB/s each way), the mean alone %.3f ms, floor (their sum) %.3f ms; the buckets through the "
        "host without the backward pass %.3f ms (its thread waiting for buckets to land %.3f ms, in their mean "
        "with the other replicas %.3f ms)\n",
        mb, 1e3 * last.copy, 2 * mb / 1e3 / last.copy, 1e3 * last.mean, 1e3 * (last.copy + last.mean), 1e3 * last.comm,
        1e3 * last.wait, 1e3 * last.reduce);
  }
  if (nccl && !batches.empty()) {
    const double bytes = double(floats) * sizeof(float), factor = n > 1 ? 2.0 * (n - 1) / n : 1.0;
    const double one_message = training::cuda::nccl_allreduce_seconds(comms, gpus, floats, 20);
    std::printf(
        "all-reduce of the %.1f MB gradient: one NCCL call %.3f ms (bus %.1f GB/s); our buckets alone %.3f ms "
        "(bus %.1f GB/s)\n",
        bytes / 1e6, 1e3 * one_message, factor * bytes / one_message / 1e9, 1e3 * comm_alone,
        factor * bytes / comm_alone / 1e9);
  }
  return 0;
}

}  // namespace
#endif

// `jiriki bench train`: samples per second of the trainer and, separately, of the data loader, on
// positions of random legal games written to a temporary hcpe file; with --backend cuda also of the
// GPU's step alone.
int bench_train(int argc, char** argv) {
  Args args("jiriki bench train [--backend cpu|cuda] [--blocks N --channels C] [--batch B1,B2,...] [--steps S]",
            "Trains a fresh network for a few steps at each batch size on random-game positions and prints the\n"
            "trainer's samples/s, then the samples/s of the data loader running alone. With --backend cuda, also\n"
            "the samples/s of the GPU's training step alone (inputs on the device, CUDA graph replays, CUDA\n"
            "events) and its TFLOP/s (6 x multiply-adds per sample: forward, backward data, backward weights).");
  // The benchmark's network and run: small, so that it answers in seconds on a CPU.
  training::TrainConfig c;
  c.arch.blocks = 1;
  c.arch.channels = 16;
  c.steps = 20;
  c.loader_threads = 1;
  options::Device device;
  int device_steps = 50;
  int64_t loader_steps = 500, positions = 4096;
  std::vector<int64_t> batches = {32, 128};
  std::string dump, mode = "nccl";
  args.bind("device-steps", device_steps, "cuda: timed steps of the GPU alone per batch size", 1)
      .bind("dump", dump, "cuda: write the first batch's gradients to FILE and the model to FILE.jnn")
      .bind("optimizer", c.optimizer.kind, "sgd or adamw", training::parse_optimizer, training::optimizer_name)
      .bind("blocks", c.arch.blocks, "residual blocks", 0, 1024)
      .bind("channels", c.arch.channels, "channels", 1, 4096)
      .bind("activation", c.arch.activation, "relu or swish", nn::parse_activation, nn::activation_name)
      .bind("batch", batches, "batch sizes, comma-separated", int64_t(1), int64_t(1) << 20)
      .bind("steps", c.steps, "training steps per batch size")
      .bind("loader-steps", loader_steps, "batches the loader alone builds per batch size")
      .bind("positions", positions, "random-game positions to train on", 1)
      .bind("loader-threads", c.loader_threads, "data loader threads", 0)
      .bind("allreduce", mode, "with several --gpus: nccl or host")
      .bind("bucket-mb", c.bucket_mb, "with several --gpus: gradient bucket size in MB (NCCL and host)");
  options::bind_device(args, device, nn::BackendUse::TRAINING,
                       "cuda: the GPU; several: data parallelism (device-only timing against one GPU)");
  options::bind_threads(args, c.threads,
                        "compute threads (0: all); with several --gpus and --allreduce host, the host mean's threads, "
                        "shared out among the GPUs");
  if (int rc = args.parse(argc, argv); rc >= 0) return rc;
  // Removed on every way out, errors (no GPU, say) included.
  struct TempDir {
    std::filesystem::path path;
    ~TempDir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  } temp{std::filesystem::temp_directory_path() / ("jiriki_bench_train_" + std::to_string(::getpid()))};
  const std::filesystem::path& dir = temp.path;
  std::filesystem::create_directories(dir);
  const std::string data = (dir / "random.hcpe").string();
  const auto records = training::random_game_records(int((positions + 63) / 64), 64, 1);
  if (auto err = write_hcpe_file(
          data, std::vector<HcpeRecord>(records.begin(),
                                        records.begin() + std::min<size_t>(records.size(), size_t(positions)))))
    throw std::runtime_error(*err);

  c.data = {data};
  c.model_out = (dir / "model.bin").string();
  c.log_every = c.steps;
  const nn::BackendChoice backend = options::backend(device, nn::BackendUse::TRAINING);
  c.backend = backend.kind;
  c.gpus = device.gpus;
  c.cuda = nn::CudaSettings::from_environment();
  c.schedule.lr = c.optimizer.kind == training::OptimizerKind::SGD ? 0.1 : 0.001;
  c.quiet = true;
  const bool gpu = c.backend == nn::BackendKind::CUDA;
#if !JIRIKI_HAVE_CUDA
  if (gpu) throw std::invalid_argument("--backend cuda: this jiriki was built without CUDA");
#endif
  if (!dump.empty() && !gpu) throw std::invalid_argument("--dump needs the cuda backend");
  if (c.gpus.size() > 1 && !gpu) throw std::invalid_argument("several --gpus need the cuda backend");
  if (!gpu) c.gpus.clear();  // the default GPU 0 means nothing to the CPU trainer, which refuses GPUs
  std::printf("network %dx%d %s, %lld random-game positions, %lld steps per batch size\n%s\n", c.arch.blocks,
              c.arch.channels, nn::activation_name(c.arch.activation), (long long)positions, (long long)c.steps,
              backend.line().c_str());
  std::printf("%8s %18s %18s", "batch", "trainer samples/s", "loader samples/s");
  if (gpu) std::printf(" %16s %12s %12s", "GPU samples/s", "GPU ms/step", "GPU TFLOP/s");
  std::printf("\n");
  if (c.gpus.size() > 1) {
#if JIRIKI_HAVE_CUDA
    if (mode != "nccl" && mode != "host") throw std::invalid_argument("--allreduce must be nccl or host");
    const training::Dataset loaded = training::load_dataset(c.data, {});
    return bench_data_parallel(c, c.gpus, mode == "nccl", batches, device_steps, loaded);
#endif
  }
  const training::Dataset loaded = training::load_dataset(c.data, {});
  for (int64_t batch : batches) {
    c.batch = int(batch);
    const double trainer = training::train(c).samples_per_second;
    const double loader = loader_samples_per_second(loaded, c, loader_steps);
    // The row is printed whole once measured: the GPU's set-up prints to stderr meanwhile.
    char gpu_columns[64] = "";
#if JIRIKI_HAVE_CUDA
    if (gpu) {
      const double s = gpu_step_seconds(c, device_steps, dump);
      dump.clear();  // the first batch size only
      const double flop = 6.0 * double(nn::macs_per_position(c.arch)) * double(batch);
      std::snprintf(gpu_columns, sizeof gpu_columns, " %16.0f %12.3f %12.1f", double(batch) / s, 1e3 * s,
                    flop / s * 1e-12);
    }
#endif
    std::printf("%8lld %18.0f %18.0f%s\n", (long long)batch, trainer, loader, gpu_columns);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace jiriki

namespace jiriki {

// `jiriki bench allreduce`: the host all-reduce of --allreduce host between replicas on threads
// (training/comm.h), alone: each rank's mean of a gradient-sized buffer, against one memcpy of the
// same bytes on one thread in the same run (the memory traffic a rank cannot avoid).
int bench_allreduce(int argc, char** argv) {
  Args args("jiriki bench allreduce [--ranks N,...] [--mb MB] [--reps R]",
            "Times the host all-reduce of `train --allreduce host` between replicas on threads (each rank's\n"
            "buffer becomes the mean over the ranks), against a memcpy of the same bytes on one thread.");
  std::vector<int64_t> rank_counts = {2, 4};
  double mb = 29.8;
  int reps = 20, threads = 0;
  args.bind("ranks", rank_counts, "replicas (threads), comma-separated", int64_t(1), int64_t(4096))
      .bind("mb", mb, "megabytes per rank (29.8: the gradient of a 10x192 network)")
      .bind("reps", reps, "timed all-reduces per rank count (after 3 untimed)", 1)
      .bind("threads", threads, "threads per rank (0: the usable CPUs shared out, as training does)", 0);
  if (int rc = args.parse(argc, argv); rc >= 0) return rc;
  if (!(mb > 0)) throw std::invalid_argument("--mb must be positive");
  const size_t n = size_t(mb * 1e6 / sizeof(float));
  using clock = std::chrono::steady_clock;
  std::vector<float> from(n, 1.0f), to(n);
  std::memcpy(to.data(), from.data(), n * sizeof(float));  // (first touch)
  const auto c0 = clock::now();
  for (int k = 0; k < reps; ++k)
    std::memcpy(k % 2 ? from.data() : to.data(), k % 2 ? to.data() : from.data(), n * sizeof(float));
  const double copy_ms = std::chrono::duration<double, std::milli>(clock::now() - c0).count() / reps;
  std::printf("%.1f MB a rank; memcpy of it on one thread: %.3f ms\n", double(n) * sizeof(float) / 1e6, copy_ms);
  std::printf("%6s %8s %14s %12s\n", "ranks", "threads", "all-reduce ms", "x memcpy");
  for (int64_t ranks : rank_counts) {
    std::vector<std::vector<float>> buffers(static_cast<size_t>(ranks), std::vector<float>(n));
    double ms = 0;
    const int per_rank = training::ThreadGroup(int(ranks), threads).threads_per_rank();
    training::run_on_threads(
        int(ranks),
        [&](int r, training::HostComm& comm) {
          std::vector<float>& b = buffers[size_t(r)];
          for (size_t i = 0; i < n; ++i) b[i] = float(i % 1024) * 1e-3f + float(r);
          for (int k = 0; k < 3; ++k) training::average_on_host(comm, b.data(), n, false);
          comm.max(0);  // (a barrier)
          const auto t0 = clock::now();
          for (int k = 0; k < reps; ++k) training::average_on_host(comm, b.data(), n, false);
          const double mine = std::chrono::duration<double, std::milli>(clock::now() - t0).count() / reps;
          const double slowest = comm.max(mine);
          if (r == 0) ms = slowest;
        },
        per_rank);
    std::printf("%6lld %8d %14.3f %12.2f\n", (long long)ranks, per_rank, ms, ms / copy_ms);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace jiriki
