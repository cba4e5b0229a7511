#include "command/options.h"

#include <stdexcept>

namespace jiriki::options {

void add_backend(Args& args, nn::BackendUse use) {
  args.option("backend", "auto",
              use == nn::BackendUse::INFERENCE
                  ? "auto, cpu, cuda, simd, onednn or reference (auto: the GPU when one is usable, else the CPU)"
                  : "auto, cpu or cuda (auto: the GPU when one is usable, else the CPU)");
}

nn::BackendChoice backend(const Args& args, nn::BackendUse use) {
  return nn::resolve_backend(args.str("backend"), use);
}

void add_gpus(Args& args, const std::string& help) { args.option("gpus", "0", help); }

std::vector<int> gpus(const Args& args) {
  std::vector<int> out;
  for (int64_t g : args.int_list("gpus")) {
    if (g < 0 || g > 63) throw std::invalid_argument("--gpus: device numbers from 0 to 63");
    out.push_back(int(g));
  }
  if (out.empty()) throw std::invalid_argument("--gpus: at least one device");
  return out;
}

int gpu(const Args& args) {
  const std::vector<int> list = gpus(args);
  if (list.size() != 1) throw std::invalid_argument("--gpus: this command uses one GPU; give one device");
  return list[0];
}

void add_seed(Args& args, const std::string& help, const std::string& def) { args.option("seed", def, help); }

uint64_t seed(const Args& args) { return uint64_t(args.integer("seed")); }

void add_threads(Args& args, const std::string& help, const std::string& def) { args.option("threads", def, help); }

int threads(const Args& args) {
  const int64_t t = args.integer("threads");
  if (t < 0 || t > 1024) throw std::invalid_argument("--threads must be between 0 and 1024");
  return int(t);
}

}  // namespace jiriki::options
