// Options that mean the same thing in every subcommand, declared in one place:
//   --backend auto|cpu|cuda   where the network runs; auto (the default everywhere) is the GPU when
//                             one is usable, else the CPU (nn::resolve_backend decides); inference
//                             also takes simd, onednn (the two CPU evaluators) and reference
//   --gpus LIST               the CUDA devices, e.g. 0 or 0,1 (a command that uses one GPU takes one)
//   --seed S                  the seed of every random choice the command makes
//   --threads T               CPU threads of the command's own loop (0: the command's default)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/args.h"
#include "nn/backend.h"

namespace jiriki::options {

// Where a command's network runs, as --backend and --gpus give it.
struct Device {
  std::string backend = "auto";  // auto, cpu, cuda (or reference, for inference)
  std::vector<int> gpus = {0};   // CUDA devices, each 0..63, at least one
};

// --backend ("auto, cpu or cuda"; inference also takes "simd", "onednn" and "reference", the test oracle) and --gpus.
void bind_device(Args& args, Device& device, nn::BackendUse use, const std::string& gpus_help);
// The backend --backend resolves to, with the reason; the command prints it in its backend line.
nn::BackendChoice backend(const Device& device, nn::BackendUse use);
// The one device of --gpus for commands that use one GPU; refuses a list of several.
int gpu(const Device& device);

// --seed, filling `seed`.
void bind_seed(Args& args, uint64_t& seed, const std::string& help);
// --threads, filling `threads`, checked to be 0..1024.
void bind_threads(Args& args, int& threads, const std::string& help);

}  // namespace jiriki::options
