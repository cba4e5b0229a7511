// The network the engine plays with: the model file named by ModelFile, or the trained network
// shipped in the binary for the backend in use (usi/shipped_networks.h); a build that ships none
// makes a small untrained one in memory from a fixed seed (legal but weak shogi).
#pragma once
#include <memory>
#include <string>

#include "engine/search/eval_queue.h"
#include "nn/backend.h"
#include "nn/model.h"

namespace jiriki::usi {

constexpr const char* DEFAULT_MODEL = "<default>";
constexpr int DEFAULT_MODEL_BLOCKS = 6;
constexpr int DEFAULT_MODEL_CHANNELS = 64;
constexpr uint64_t DEFAULT_MODEL_SEED = 1;
constexpr int DEFAULT_GPU_BATCH = 128;
constexpr int DEFAULT_CPU_BATCH = 16;
// Search threads when Threads is 0: a GPU needs several threads' batches in flight to stay busy (on
// an H100, 8 x 128 gave 245,000 playouts/s against 139,000 for 4 x 128); a CPU backend shares the
// cores between the search threads and oneDNN.
constexpr int DEFAULT_GPU_THREADS = 8;
constexpr int DEFAULT_CPU_THREADS = 2;

// The model ModelFile names. "" or "<default>" is the shipped network that fits `backend` (resolved
// as make_backend_queue does: networks/gpu.jnn on a GPU, else networks/cpu.jnn; usi/shipped_networks.h),
// or, in a build that ships none, a small untrained network. Throws nn::ModelFileError for a bad file.
nn::Model load_network(const std::string& model_file, const std::string& backend);
// One line describing what load_network(model_file, backend) gives, for `info string`.
std::string describe_network(const std::string& model_file, const std::string& backend, const nn::Model& model);

// An evaluation queue on backend "auto" | "cpu" | "cuda" | "reference", resolved by
// nn::resolve_backend (auto: the GPU when one is usable, else the CPU). There is one
// evaluator per search thread: on the GPU each has its own stream; on the CPU each gets an equal
// share of the cores, so that no OpenMP team spins against the search threads for the same core.
// `max_batch` 0 picks the batch for the backend: 128 on the GPU, 16 on a CPU; `search_threads` 0
// the threads: 8 on the GPU, 2 on a CPU. `threads_used` receives the search threads the queue
// serves, `description` the backend actually used; `precision` AUTO is the backend's best (see
// nn::Precision). Throws std::runtime_error when the backend asked for is not available.
std::unique_ptr<search::EvalQueue> make_backend_queue(const nn::Model& model, const std::string& backend, int gpu,
                                                      int max_batch, int search_threads, int* threads_used,
                                                      std::string* description,
                                                      nn::Precision precision = nn::Precision::AUTO);

}  // namespace jiriki::usi
