// Targets from a teacher network (see training/teacher.h).
#include "training/teacher.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "nn/features.h"
#include "shogi/movegen.h"

namespace jiriki::training {

Teacher::Teacher(const nn::Model& model, const nn::BackendOptions& backend, float weight)
    : evaluator_(nn::make_evaluator(model, backend)), weight_(weight) {
  if (!(weight >= 0.0f && weight <= 1.0f)) throw std::invalid_argument("the teacher's weight must be in [0, 1]");
}

void teacher_policy(const Position& pos, const float* logits, bool mirror, float* out) {
  std::fill(out, out + nn::POLICY_SIZE, 0.0f);
  const MoveList moves = legal_moves(pos);
  if (moves.size() == 0) return;
  const Color us = pos.side_to_move();
  std::vector<int> index(moves.size());
  float top = -INFINITY;
  for (int i = 0; i < moves.size(); ++i) {
    const int label = nn::move_to_label(moves.moves[i], us);
    index[i] = mirror ? nn::mirror_policy_index(label) : label;
    top = std::max(top, logits[index[i]]);
  }
  double sum = 0;
  for (int i : index) sum += out[i] = std::exp(logits[i] - top);
  for (int i : index) out[i] = float(out[i] / sum);
}

void Teacher::apply(const Dataset& data, const std::vector<uint32_t>& positions, const std::vector<uint8_t>& mirrored,
                    Batch& batch, Position& scratch) {
  const int max = evaluator_->max_batch();
  logits_.resize(size_t(max) * nn::POLICY_SIZE);
  values_.resize(size_t(max));
  std::vector<float> policy(nn::POLICY_SIZE);
  for (int first = 0; first < batch.size; first += max) {
    const int n = std::min(max, batch.size - first);
    evaluator_->evaluate(batch.features + int64_t(first) * nn::INPUT_SIZE, n, logits_.data(), values_.data());
    for (int i = 0; i < n; ++i) {
      const int row = first + i;
      const TrainingPosition& tp = data.positions[positions[size_t(row)]];
      if (auto err = decode_hcp(tp.record.hcp, scratch))
        throw std::logic_error("a checked position fails to decode: " + *err);
      teacher_policy(scratch, logits_.data() + int64_t(i) * nn::POLICY_SIZE, mirrored[size_t(row)], policy.data());
      const float w = has_own_target(tp) ? weight_ : 1.0f;
      float* target = batch.policy_target + int64_t(row) * nn::POLICY_SIZE;
      for (int k = 0; k < nn::POLICY_SIZE; ++k) target[k] = (1.0f - w) * target[k] + w * policy[size_t(k)];
      batch.value_eval[row] = (1.0f - w) * batch.value_eval[row] + w * values_[size_t(i)];
    }
  }
}

}  // namespace jiriki::training
