// One batch of training inputs and targets, laid out as the network and the loss read them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "nn/model.h"

namespace jiriki::training {

// Where batches live: the heap by default. The GPU trainer passes one that returns page-locked
// memory, so that its copies to the device are asynchronous DMA straight from the loader's buffers.
struct HostAllocator {
  virtual ~HostAllocator() = default;
  virtual void* allocate(size_t bytes) = 0;  // throws on failure
  virtual void deallocate(void* p) noexcept = 0;
};

struct Batch {
  int capacity = 0;                // positions the arrays hold
  int size = 0;                    // positions filled (the last batch of a finite stream may be short)
  float* features = nullptr;       // [capacity][119][81], as nn::encode_features writes them
  float* policy_target = nullptr;  // [capacity][2187], each row a distribution summing to 1
  float* value_result = nullptr;   // [capacity] 1 / 0 / 0.5: the side to move won / lost / drew
  float* value_eval = nullptr;     // [capacity] sigmoid(eval / nn::EVAL_SCALE), the side to move's view

  // Points the four arrays, zeroed, into one block of memory from `allocator` (the heap if null),
  // in the order above.
  void allocate(int positions, HostAllocator* allocator = nullptr) {
    const size_t floats = size_t(positions) * (nn::INPUT_SIZE + nn::POLICY_SIZE + 2);
    float* p = allocator ? static_cast<float*>(allocator->allocate(floats * sizeof(float))) : new float[floats];
    std::memset(p, 0, floats * sizeof(float));
    storage = std::unique_ptr<float[], Free>(p, Free{allocator});
    capacity = positions;
    features = p;
    policy_target = features + size_t(positions) * nn::INPUT_SIZE;
    value_result = policy_target + size_t(positions) * nn::POLICY_SIZE;
    value_eval = value_result + positions;
  }

 private:
  struct Free {
    HostAllocator*
        allocator;  // null: the heap (no default member initializer: unique_ptr could not default-construct Free)
    void operator()(float* p) const noexcept {
      if (allocator) allocator->deallocate(p);
      else delete[] p;
    }
  };
  std::unique_ptr<float[], Free> storage;
};

}  // namespace jiriki::training
