// The one place where "which network, which backend, which GPU, what batch, how many threads"
// becomes a network and the evaluators that run it: the USI engine, self-play, `jiriki play`,
// `book build --think`, `nn eval` and the benchmarks all describe what they want as NetworkSettings,
// resolve the backend name once (NetworkSetup::resolve: nn::resolve_backend, which on a CUDA build
// asks the driver for devices), and build their evaluator or evaluation queue from the result.
//
// The default network ("<default>") is the shipped one that fits the resolved backend
// (nn/shipped_networks.h: networks/gpu.jnn on a GPU, else networks/cpu.jnn), or, in a build that
// ships none, a small untrained network made in memory from a fixed seed (legal but weak shogi).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "engine/search/eval_queue.h"
#include "nn/backend.h"
#include "nn/model.h"

namespace jiriki::engine {

constexpr const char* DEFAULT_MODEL = "<default>";
constexpr int DEFAULT_MODEL_BLOCKS = 6;
constexpr int DEFAULT_MODEL_CHANNELS = 64;
constexpr uint64_t DEFAULT_MODEL_SEED = 1;
constexpr int DEFAULT_GPU_BATCH = 128;
constexpr int DEFAULT_CPU_BATCH = 16;
// Evaluators (one per search thread) when `evaluators` is 0: a GPU needs several threads' batches in
// flight to stay busy (on an H100, 8 x 128 gave 245,000 playouts/s against 139,000 for 4 x 128); a
// CPU backend shares the cores between the search threads and oneDNN.
constexpr int DEFAULT_GPU_EVALUATORS = 8;
constexpr int DEFAULT_CPU_EVALUATORS = 2;

// What a command asks of its network, as given (nothing resolved yet).
struct NetworkSettings {
  std::string model = DEFAULT_MODEL;  // a model file; "" or "<default>": the default network (above)
  std::string backend = "auto";       // "auto" | "cpu" | "cuda" | "reference" (nn::resolve_backend)
  int gpu = 0;                        // the CUDA device
  int batch = 0;                      // positions per network call; 0: 128 on the GPU, 16 on a CPU
  int evaluators = 0;   // evaluators of a queue (the engine's search threads); 0: 8 on the GPU, 2 on a CPU
  int cpu_threads = 0;  // CPU backend: threads per evaluator; 0: an equal share of `cpu_cores`
  int cpu_cores = 0;    // CPU backend: the cores the evaluators share; 0: all the process may use (common/cpus.h)
  nn::Precision precision = nn::Precision::AUTO;
  nn::CudaSettings cuda = nn::CudaSettings::from_environment();  // the JIRIKI_* overrides of the README
};

// NetworkSettings with their backend resolved: everything needed to load the network and build its
// evaluators, the same way for every command.
struct NetworkSetup {
  NetworkSettings settings;
  nn::BackendChoice backend;  // settings.backend resolved, with the reason

  // Resolves settings.backend: the set-up's one call of nn::resolve_backend. Throws
  // std::invalid_argument for an unknown backend name.
  static NetworkSetup resolve(NetworkSettings settings);

  bool on_gpu() const { return backend.kind == nn::BackendKind::CUDA; }
  int batch() const;       // settings.batch, or the backend's default
  int evaluators() const;  // settings.evaluators, or the backend's default

  // The network settings.model names (see the top of this file). Throws nn::ModelFileError for a bad file.
  nn::Model load_model() const;
  // One line saying which network load_model() gives, e.g. "network: the shipped networks/cpu.jnn
  // (sha256 ...) (6 blocks x 64 channels, relu)"; the engine sends it as an `info string`.
  std::string network_line(const nn::Model& model) const;

  // The options of one evaluator with room for `max_batch` positions (0: batch()). On a CPU each of
  // evaluators() evaluators gets an equal share of the cores (unless cpu_threads says), so that no
  // OpenMP team spins against another's search thread on the same core.
  nn::BackendOptions evaluator_options(int max_batch = 0) const;
  // One evaluator (`nn eval`, `bench nn`). Throws std::runtime_error when the backend is not available.
  std::unique_ptr<nn::Evaluator> make_evaluator(const nn::Model& model, int max_batch = 0) const;
  // An evaluation queue over evaluators() evaluators of batch() positions for `clients` threads
  // calling it at once (0: evaluators(), the engine's search threads). On a CPU with no more clients
  // than evaluators each client runs an evaluator itself; else each evaluator has its own thread (on
  // the GPU its own stream). Throws std::runtime_error when the backend is not available.
  std::unique_ptr<search::EvalQueue> make_queue(const nn::Model& model, int clients = 0) const;
  // The backend line every searching command prints: "backend: cpu (oneDNN ...) (auto: ...), batch 16,
  // 2 search threads".
  std::string queue_line(const search::EvalQueue& queue) const;
};

}  // namespace jiriki::engine
