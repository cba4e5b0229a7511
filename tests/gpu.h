// Tests that need a CUDA device are tagged [gpu]. Where no usable device is, tests/main.cpp leaves
// them out and says so (ctest reports them as skipped, never as passed); each starts with
// require_gpu(), so that one forced to run there fails instead of passing.
#pragma once
#include <catch2/catch.hpp>
#include <string>

#include "nn/backend.h"

namespace jiriki::testing {

inline void require_gpu() {
  std::string why;
  const int devices = nn::cuda_device_count(&why);
  INFO("this test needs a CUDA device: " << why);
  REQUIRE(devices > 0);
}

}  // namespace jiriki::testing
