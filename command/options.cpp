#include "command/options.h"

#include <stdexcept>

namespace jiriki::options {

void bind_device(Args& args, Device& device, nn::BackendUse use, const std::string& gpus_help) {
  args.bind("backend", device.backend,
            use == nn::BackendUse::INFERENCE
                ? "auto, cpu, cuda, simd, onednn or reference (auto: the GPU when one is usable, else the CPU)"
                : "auto, cpu or cuda (auto: the GPU when one is usable, else the CPU)");
  args.bind("gpus", device.gpus, gpus_help, 0, 63);
}

nn::BackendChoice backend(const Device& device, nn::BackendUse use) { return nn::resolve_backend(device.backend, use); }

int gpu(const Device& device) {
  if (device.gpus.size() != 1) throw std::invalid_argument("--gpus: this command uses one GPU; give one device");
  return device.gpus[0];
}

void bind_seed(Args& args, uint64_t& seed, const std::string& help) { args.bind("seed", seed, help); }

void bind_threads(Args& args, int& threads, const std::string& help) { args.bind("threads", threads, help, 0, 1024); }

}  // namespace jiriki::options
