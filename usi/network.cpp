// Network loading and backend choice for the engine and `jiriki bench search`.
#include "usi/network.h"

#include <algorithm>
#include <stdexcept>
#include <thread>

#include "nn/model_file.h"

namespace jiriki::usi {

nn::Model load_network(const std::string& model_file) {
  if (model_file.empty() || model_file == DEFAULT_MODEL) {
    nn::Architecture arch;
    arch.blocks = DEFAULT_MODEL_BLOCKS;
    arch.channels = DEFAULT_MODEL_CHANNELS;
    nn::Model model(arch);
    nn::init_model(model, DEFAULT_MODEL_SEED);
    return model;
  }
  return nn::load_model(model_file);
}

std::string describe_network(const std::string& model_file, const nn::Model& model) {
  std::string shape = std::to_string(model.arch.blocks) + " blocks x " + std::to_string(model.arch.channels) +
                      " channels, " + nn::activation_name(model.arch.activation);
  if (model_file.empty() || model_file == DEFAULT_MODEL)
    return "network: the default UNTRAINED network (" + shape + ", seed " + std::to_string(DEFAULT_MODEL_SEED) +
           "): no trained network ships yet, so play is weak; set ModelFile to a trained model";
  return "network: " + model_file + " (" + shape + ")";
}

std::unique_ptr<search::EvalQueue> make_backend_queue(const nn::Model& model, const std::string& backend, int gpu,
                                                      int max_batch, int search_threads, int* threads_used,
                                                      std::string* description) {
  nn::BackendOptions o;
  o.gpu = gpu;
  o.cuda = nn::CudaSettings::from_environment();  // the JIRIKI_* overrides of the README
  int evaluators = 1;
  // One evaluator per search thread; on a CPU each gets an equal share of the cores.
  auto make = [&](nn::BackendKind kind) {
    const bool gpu_kind = kind == nn::BackendKind::CUDA;
    o.kind = kind;
    o.max_batch = max_batch > 0 ? max_batch : gpu_kind ? DEFAULT_GPU_BATCH : DEFAULT_CPU_BATCH;
    evaluators = search_threads > 0 ? search_threads : gpu_kind ? DEFAULT_GPU_THREADS : DEFAULT_CPU_THREADS;
    o.threads = std::max(1, int(std::thread::hardware_concurrency()) / evaluators);
    return search::make_eval_queue(model, o, evaluators);
  };
  const nn::BackendChoice choice = nn::resolve_backend(backend);
  std::unique_ptr<search::EvalQueue> queue = make(choice.kind);
  if (threads_used) *threads_used = evaluators;
  if (description)
    *description = "backend: " + queue->name() + " (" + choice.reason + "), batch " + std::to_string(queue->max_batch()) +
                   ", " + std::to_string(evaluators) + " search threads";
  return queue;
}

}  // namespace jiriki::usi
