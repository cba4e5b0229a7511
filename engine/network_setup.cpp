// Network loading and backend set-up, once for every command.
#include "engine/network_setup.h"

#include <algorithm>
#include <optional>

#include "common/cpus.h"
#include "nn/model_file.h"
#include "nn/shipped_networks.h"

namespace jiriki::engine {

namespace {

bool is_default(const std::string& model) { return model.empty() || model == DEFAULT_MODEL; }

// The shipped network for the resolved backend: the GPU's, else the CPU's (a GPU build without a
// GPU network plays the CPU one).
std::optional<nn::ShippedNetwork> shipped_for(bool gpu) {
  if (auto net = nn::shipped_network(gpu)) return net;
  return gpu ? nn::shipped_network(false) : std::nullopt;
}

}  // namespace

NetworkSetup NetworkSetup::resolve(NetworkSettings settings) {
  NetworkSetup setup;
  setup.backend = nn::resolve_backend(settings.backend);
  setup.settings = std::move(settings);
  return setup;
}

int NetworkSetup::batch() const {
  return settings.batch > 0 ? settings.batch : on_gpu() ? DEFAULT_GPU_BATCH : DEFAULT_CPU_BATCH;
}

int NetworkSetup::evaluators() const {
  if (settings.evaluators > 0) return settings.evaluators;
  // Not more evaluators than the CPUs the process may use (pinned to 1 core, 2 would fight over it).
  return on_gpu() ? DEFAULT_GPU_EVALUATORS : std::min(DEFAULT_CPU_EVALUATORS, usable_cpus().count);
}

nn::Model NetworkSetup::load_model() const {
  if (!is_default(settings.model)) return nn::load_model(settings.model);
  if (auto net = shipped_for(on_gpu())) return nn::deserialize_model(net->data, net->size, net->name);
  nn::Architecture arch;
  arch.blocks = DEFAULT_MODEL_BLOCKS;
  arch.channels = DEFAULT_MODEL_CHANNELS;
  nn::Model model(arch);
  nn::init_model(model, DEFAULT_MODEL_SEED);
  return model;
}

std::string NetworkSetup::network_line(const nn::Model& model) const {
  std::string shape = std::to_string(model.arch.blocks) + " blocks x " + std::to_string(model.arch.channels) +
                      " channels, " + nn::activation_name(model.arch.activation);
  if (!is_default(settings.model)) return "network: " + settings.model + " (" + shape + ")";
  if (auto net = shipped_for(on_gpu())) return "network: the shipped " + net->name + " (" + shape + ")";
  return "network: the default UNTRAINED network (" + shape + ", seed " + std::to_string(DEFAULT_MODEL_SEED) +
         "): this build ships no trained network, so play is weak; set ModelFile to a trained model";
}

nn::BackendOptions NetworkSetup::evaluator_options(int max_batch) const {
  nn::BackendOptions o;
  o.kind = backend.kind;
  o.gpu = settings.gpu;
  o.max_batch = max_batch > 0 ? max_batch : batch();
  o.precision = settings.precision;
  o.cuda = settings.cuda;
  // The CPUs the process may use, not the machine's: pinned to 2 cores of 64, 32 threads per
  // evaluator would fight over 2.
  const int cores = settings.cpu_cores > 0 ? settings.cpu_cores : usable_cpus().count;
  o.threads = settings.cpu_threads > 0 ? settings.cpu_threads : std::max(1, cores / evaluators());
  return o;
}

std::unique_ptr<nn::Evaluator> NetworkSetup::make_evaluator(const nn::Model& model, int max_batch) const {
  return nn::make_evaluator(model, evaluator_options(max_batch));
}

std::unique_ptr<search::EvalQueue> NetworkSetup::make_queue(const nn::Model& model, int clients) const {
  const int n = evaluators();
  const bool own_evaluator = !on_gpu() && (clients > 0 ? clients : n) <= n;
  return search::make_eval_queue(model, evaluator_options(), n,
                                 own_evaluator ? search::Dispatch::CALLER : search::Dispatch::WORKERS);
}

std::string NetworkSetup::queue_line(const search::EvalQueue& queue) const {
  return "backend: " + queue.name() + " (" + backend.reason + "), batch " + std::to_string(queue.max_batch()) + ", " +
         std::to_string(evaluators()) + " search threads";
}

}  // namespace jiriki::engine
