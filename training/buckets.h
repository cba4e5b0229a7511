// Gradient buckets: which gradients are all-reduced together, and when in the backward pass each
// group may start, so that communication overlaps the rest of the backward pass (as PyTorch DDP
// does). Pure bookkeeping over offsets in one flat gradient buffer; the GPU trainer launches the
// all-reduces (training/cuda/gpu_trainer.cpp).
#pragma once
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace jiriki::training {

// One trainable tensor's place in the flat gradient buffer, and the backward stage after which its
// gradient is final (0 = the first stage the backward pass finishes).
struct GradientSlot {
  std::string name;
  size_t offset = 0, count = 0;  // floats
  int stage = 0;
};

// A group of tensors all-reduced by one launch (one NCCL group of calls, one per range).
struct Bucket {
  int ready_stage = 0;                            // may start once this stage is done
  std::vector<std::pair<size_t, size_t>> ranges;  // (offset, count) in the flat buffer, ascending
  std::vector<std::string> tensors;               // the tensors it holds
  size_t floats = 0;                              // the floats its ranges span
};

// The backward stage of a tensor of the residual network: the heads first (0), then blocks
// blocks - 1 down to 0 (stages 1 .. blocks), the stem last (blocks + 1).
int backward_stage(const std::string& tensor_name, int blocks);

// Buckets in the order the backward pass finishes them: stages are taken in order and a bucket is
// closed at the end of the stage that brings it to `bucket_floats` or more (so a bucket never waits
// for a stage beyond the one that fills it). Within a bucket, tensors that are neighbours in the
// flat buffer, apart by at most `merge_gap` floats of padding, share one range; the padding is
// all-reduced with them (it holds zeros). Every tensor lands in exactly one bucket.
std::vector<Bucket> plan_buckets(std::vector<GradientSlot> slots, size_t bucket_floats, size_t merge_gap);

}  // namespace jiriki::training
