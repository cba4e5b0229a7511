// Options that mean the same thing in every subcommand, declared and read in one place:
//   --backend auto|cpu|cuda   where the network runs; auto (the default everywhere) is the GPU when
//                             one is usable, else the CPU (nn::resolve_backend decides); inference
//                             also takes simd, onednn (the two CPU evaluators) and reference
//   --gpus LIST               the CUDA devices, e.g. 0 or 0,1 (a command that uses one GPU takes one)
//   --seed S                  the seed of every random choice the command makes
//   --model FILE              the network a command reads
//   --threads T               CPU threads of the command's own loop (0: the command's default)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/args.h"
#include "nn/backend.h"

namespace jiriki::options {

// --backend: "auto, cpu or cuda" (inference also takes "simd", "onednn" and "reference", the test oracle).
void add_backend(Args& args, nn::BackendUse use);
// The backend --backend resolves to, with the reason; the command prints it in its backend line.
nn::BackendChoice backend(const Args& args, nn::BackendUse use);

// --gpus with its default "0".
void add_gpus(Args& args, const std::string& help);
// The devices of --gpus, each checked to be 0..63; at least one.
std::vector<int> gpus(const Args& args);
// The one device of --gpus for commands that use one GPU; refuses a list of several.
int gpu(const Args& args);

void add_seed(Args& args, const std::string& help, const std::string& def = "1");
uint64_t seed(const Args& args);

void add_threads(Args& args, const std::string& help, const std::string& def = "0");
int threads(const Args& args);  // checked: 0..1024

}  // namespace jiriki::options
