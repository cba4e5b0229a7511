// The model file: one versioned binary format of our own. All integers and floats little-endian.
//
//   offset 0   8 bytes   magic "JIRIKINN"
//          8   u32       format version (MODEL_FORMAT_VERSION; version 1 is read too)
//         12   u64       payload size P in bytes
//         20   P bytes   payload:
//                          u32 feature set, u32 blocks, u32 channels, u32 activation, f32 bn eps,
//                          u32 tensor count, then per tensor (in Model::tensors() order):
//                          u32 name length, name bytes, u32 rank, u32 dims[rank],
//                          u32 storage (0: f32, 1: bf16; absent in version 1, all f32),
//                          data[prod dims] (f32 or bf16)
//     20 + P   u64       FNV-1a 64-bit hash of the payload
//
// bf16 storage (WeightStorage::BF16) halves a network's file: the convolution and fully connected
// weights are rounded to bf16, which the GPU backend computes in anyway; biases and batch-norm
// parameters and statistics stay f32. Loading widens everything to f32.
//
// Loading checks, in this order, and names the first problem found: size of the header, magic,
// version, truncation (or trailing bytes), checksum, architecture, then each tensor's name and shape
// against what the architecture requires.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "nn/model.h"

namespace jiriki::nn {

constexpr uint32_t MODEL_FORMAT_VERSION = 2;
constexpr char MODEL_MAGIC[8] = {'J', 'I', 'R', 'I', 'K', 'I', 'N', 'N'};

// Every problem with a model file; what() names the file and the problem.
struct ModelFileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// How a file stores the weights of convolutions and fully connected layers.
enum class WeightStorage { F32, BF16 };

// What a file held beyond the model: its format version and how many tensors it stored in bf16.
struct ModelFileSummary {
  uint32_t version = 0;
  int bf16_tensors = 0;
};

std::vector<uint8_t> serialize_model(const Model& model, WeightStorage storage = WeightStorage::F32);
// `source` names the data in error messages (a path). Throws ModelFileError.
Model deserialize_model(const uint8_t* data, size_t size, const std::string& source = "model",
                        ModelFileSummary* summary = nullptr);

// Throws ModelFileError on I/O errors.
void save_model(const Model& model, const std::string& path, WeightStorage storage = WeightStorage::F32);
Model load_model(const std::string& path, ModelFileSummary* summary = nullptr);  // throws ModelFileError

}  // namespace jiriki::nn
