// Distillation: a larger network's outputs as targets for the network being trained. The loader
// (training/loader.h) builds a batch from the records, then a Teacher evaluates the batch's inputs
// and moves its targets toward the teacher's: the policy toward the teacher's distribution over the
// legal moves, the eval target toward its win probability. Positions without a target of their own
// (NO_OWN_TARGET: moves self-play played with a small search and did not record for training) take
// the teacher's outright, so a teacher also turns those positions into training data.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "nn/backend.h"
#include "shogi/position.h"
#include "training/batch.h"
#include "training/data.h"

namespace jiriki::training {

class Teacher {
 public:
  // `weight`: the teacher's share in the targets of positions that have their own, in [0, 1].
  Teacher(const nn::Model& model, const nn::BackendOptions& backend, float weight);
  // Rows [0, batch.size) of `batch`, built by build_sample from dataset positions `positions`
  // (mirrored where `mirrored` says): their policy and eval targets blended with the teacher's.
  void apply(const Dataset& data, const std::vector<uint32_t>& positions, const std::vector<uint8_t>& mirrored,
             Batch& batch, Position& scratch);

 private:
  std::unique_ptr<nn::Evaluator> evaluator_;
  float weight_;
  std::vector<float> logits_, values_;
};

// The teacher's policy over the legal moves of `pos` (a softmax of their logits; every other index
// zero) into `out` [nn::POLICY_SIZE], mirrored when the logits are of the mirror image.
void teacher_policy(const Position& pos, const float* logits, bool mirror, float* out);

}  // namespace jiriki::training
