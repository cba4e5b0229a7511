// One batch of training inputs and targets, laid out as the network and the loss read them.
#pragma once
#include <cstdint>
#include <vector>

#include "nn/model.h"

namespace jiriki::training {

struct Batch {
  int capacity = 0;                // positions the arrays hold
  int size = 0;                    // positions filled (the last batch of a finite stream may be short)
  float* features = nullptr;       // [capacity][119][81], as nn::encode_features writes them
  float* policy_target = nullptr;  // [capacity][2187], each row a distribution summing to 1
  float* value_result = nullptr;   // [capacity] 1 / 0 / 0.5: the side to move won / lost / drew
  float* value_eval = nullptr;     // [capacity] sigmoid(eval / nn::EVAL_SCALE), the side to move's view

  // Points the four arrays into one block of host memory. (The GPU trainer will want page-locked
  // memory here, so that its copies to the device run asynchronously.)
  void allocate(int positions) {
    capacity = positions;
    storage.assign(size_t(positions) * (nn::INPUT_SIZE + nn::POLICY_SIZE + 2), 0.0f);
    features = storage.data();
    policy_target = features + size_t(positions) * nn::INPUT_SIZE;
    value_result = policy_target + size_t(positions) * nn::POLICY_SIZE;
    value_eval = value_result + positions;
  }

 private:
  std::vector<float> storage;
};

}  // namespace jiriki::training
