// Network loading and backend choice for the engine and `jiriki bench search`.
#include "usi/network.h"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <thread>

#include "common/cpus.h"
#include "nn/model_file.h"
#include "usi/shipped_networks.h"

namespace jiriki::usi {

namespace {

bool is_default(const std::string& model_file) { return model_file.empty() || model_file == DEFAULT_MODEL; }

// The shipped network for the backend `backend` resolves to: the GPU's, else the CPU's (a GPU
// build without a GPU network plays the CPU one).
std::optional<ShippedNetwork> shipped_for(const std::string& backend) {
  const bool gpu = nn::resolve_backend(backend).kind == nn::BackendKind::CUDA;
  if (auto net = shipped_network(gpu)) return net;
  return gpu ? shipped_network(false) : std::nullopt;
}

}  // namespace

nn::Model load_network(const std::string& model_file, const std::string& backend) {
  if (!is_default(model_file)) return nn::load_model(model_file);
  if (auto net = shipped_for(backend)) return nn::deserialize_model(net->data, net->size, net->name);
  nn::Architecture arch;
  arch.blocks = DEFAULT_MODEL_BLOCKS;
  arch.channels = DEFAULT_MODEL_CHANNELS;
  nn::Model model(arch);
  nn::init_model(model, DEFAULT_MODEL_SEED);
  return model;
}

std::string describe_network(const std::string& model_file, const std::string& backend, const nn::Model& model) {
  std::string shape = std::to_string(model.arch.blocks) + " blocks x " + std::to_string(model.arch.channels) +
                      " channels, " + nn::activation_name(model.arch.activation);
  if (!is_default(model_file)) return "network: " + model_file + " (" + shape + ")";
  if (auto net = shipped_for(backend)) return "network: the shipped " + net->name + " (" + shape + ")";
  return "network: the default UNTRAINED network (" + shape + ", seed " + std::to_string(DEFAULT_MODEL_SEED) +
         "): this build ships no trained network, so play is weak; set ModelFile to a trained model";
}

std::unique_ptr<search::EvalQueue> make_backend_queue(const nn::Model& model, const std::string& backend, int gpu,
                                                      int max_batch, int search_threads, int* threads_used,
                                                      std::string* description, nn::Precision precision) {
  nn::BackendOptions o;
  o.gpu = gpu;
  o.precision = precision;
  o.cuda = nn::CudaSettings::from_environment();  // the JIRIKI_* overrides of the README
  int evaluators = 1;
  // One evaluator per search thread; on a CPU each gets an equal share of the CPUs the process may
  // use (not the machine's: pinned to 2 cores of 64, 32 threads each would fight over 2).
  const int cpus = usable_cpus().count;
  auto make = [&](nn::BackendKind kind) {
    const bool gpu_kind = kind == nn::BackendKind::CUDA;
    o.kind = kind;
    o.max_batch = max_batch > 0 ? max_batch : gpu_kind ? DEFAULT_GPU_BATCH : DEFAULT_CPU_BATCH;
    evaluators = search_threads > 0 ? search_threads
                 : gpu_kind         ? DEFAULT_GPU_THREADS
                                    : std::min(DEFAULT_CPU_THREADS, cpus);
    o.threads = std::max(1, cpus / evaluators);
    return search::make_eval_queue(model, o, evaluators);
  };
  const nn::BackendChoice choice = nn::resolve_backend(backend);
  std::unique_ptr<search::EvalQueue> queue = make(choice.kind);
  if (threads_used) *threads_used = evaluators;
  if (description)
    *description = "backend: " + queue->name() + " (" + choice.reason + "), batch " +
                   std::to_string(queue->max_batch()) + ", " + std::to_string(evaluators) + " search threads";
  return queue;
}

}  // namespace jiriki::usi
