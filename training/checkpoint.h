// Checkpoints: everything a run needs to continue exactly where it stopped. The model (weights and
// batch-norm running statistics), the optimizer's state, and a JSON document with the step, the
// data stream position, the seed of the shuffle, the data's fingerprint and the configuration.
// Written to a temporary file and renamed (common/atomic_file.h), so a crash or Ctrl-C while
// writing leaves the previous checkpoint intact.
//
// Layout (little-endian):
//   8 bytes "JIRIKICK", u32 version
//   u64 n, n bytes   the JSON metadata
//   u64 n, n bytes   the model, exactly as a model file (nn/model_file.h)
//   u32 count, then per optimizer tensor: u32 name length, name, u64 float count, the floats
//   u64              FNV-1a hash of every byte before it
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nn/model.h"
#include "training/optimizer.h"

namespace jiriki::training {

constexpr uint32_t CHECKPOINT_VERSION = 1;

struct Checkpoint {
  nlohmann::json meta;
  nn::Model model;
  std::map<std::string, std::vector<float>> optimizer_state;
};

// Throws std::runtime_error naming the path when the file cannot be written.
void save_checkpoint(const std::string& path, const nlohmann::json& meta, const nn::Model& model, Optimizer& optimizer);

// Throws std::runtime_error naming the path and the problem (missing, truncated, corrupt).
Checkpoint load_checkpoint(const std::string& path);

// Copies the checkpoint's optimizer state into `optimizer`; throws std::runtime_error when a
// tensor is missing or has another size (a checkpoint of another optimizer or architecture).
void restore_optimizer_state(const Checkpoint& checkpoint, Optimizer& optimizer);

}  // namespace jiriki::training
