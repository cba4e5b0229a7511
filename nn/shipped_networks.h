// The trained networks that ship with jiriki: networks/cpu.jnn (small, for the CPU backend) and
// networks/gpu.jnn (larger, for a GPU), embedded in the binary when it is built, so that
// `ModelFile <default>` needs no file and works from whatever directory a GUI starts the engine in.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace jiriki::nn {

struct ShippedNetwork {
  const uint8_t* data;  // a model file's bytes (nn/model_file.h)
  size_t size;
  std::string name;  // "networks/cpu.jnn (sha256 1a2b3c4d...)": what was embedded
};

// The embedded network for a GPU (`for_gpu`) or the CPU backend; nullopt when the build had none.
std::optional<ShippedNetwork> shipped_network(bool for_gpu);

}  // namespace jiriki::nn
