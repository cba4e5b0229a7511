// Random networks and real encoded positions for the tests that hold one backend against another.
#pragma once
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "nn/backend.h"
#include "nn/features.h"
#include "nn/model.h"
#include "nn/model_file.h"
#include "shogi/movegen.h"

namespace jiriki::nn::testing {

// The shipped networks the source tree holds (networks/cpu.jnn, networks/gpu.jnn), by file name.
inline std::vector<std::pair<std::string, Model>> shipped_models() {
  std::vector<std::pair<std::string, Model>> out;
  for (const char* name : {"networks/cpu.jnn", "networks/gpu.jnn"}) {
    const std::filesystem::path file = std::filesystem::path(JIRIKI_SOURCE_DIR) / name;
    if (std::filesystem::exists(file)) out.emplace_back(name, load_model(file.string()));
  }
  return out;
}

// Every tensor random: weights He-scaled, batch-norm statistics away from the identity (so that a
// backend's folding is exercised), biases nonzero.
inline Model random_model(int blocks, int channels, Activation act, uint64_t seed) {
  Architecture a;
  a.blocks = blocks;
  a.channels = channels;
  a.activation = act;
  Model m(a);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> positive(0.5f, 1.5f);
  for (auto& [name, t, trainable] : m.tensors()) {
    int64_t fan_in = 1;
    for (size_t i = 1; i < t->shape.size(); ++i) fan_in *= t->shape[i];
    for (float& x : t->data) {
      if (name.ends_with(".gamma") || name.ends_with(".var")) x = positive(rng);
      else if (t->shape.size() >= 2) x = normal(rng) * std::sqrt(2.0f / float(fan_in));
      else x = 0.1f * normal(rng);
    }
  }
  return m;
}

// n encoded positions, a few random moves apart, from random games.
inline std::vector<float> random_features(int n, uint64_t seed) {
  std::vector<float> out(size_t(n) * INPUT_SIZE);
  std::mt19937_64 rng(seed);
  Position pos;
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < 5; ++k) {
      MoveList moves = legal_moves(pos);
      if (moves.size() == 0) pos.set_startpos(), moves = legal_moves(pos);
      pos.do_move(moves.moves[rng() % moves.size()]);
    }
    encode_features(pos, out.data() + size_t(i) * INPUT_SIZE);
  }
  return out;
}

// n positions of 0/1 planes packed as evaluate_packed takes them (bit i of a position = plane
// element i), written here independently of nn::encode_packed_features.
inline std::vector<uint8_t> pack_planes(const std::vector<float>& planes, int n) {
  std::vector<uint8_t> bits(size_t(n) * PACKED_INPUT_BYTES, 0);
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < INPUT_SIZE; ++i)
      if (planes[size_t(p) * INPUT_SIZE + i] != 0.0f)
        bits[size_t(p) * PACKED_INPUT_BYTES + i / 8] |= uint8_t(1 << (i % 8));
  return bits;
}

// A batch's outputs.
struct Output {
  std::vector<float> policy, value;
};

// Outputs poisoned with NaN first, so that an element the backend fails to write cannot pass.
inline Output run(Evaluator& e, const std::vector<float>& features, int n) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Output o{std::vector<float>(size_t(n) * POLICY_SIZE, nan), std::vector<float>(n, nan)};
  e.evaluate(features.data(), n, o.policy.data(), o.value.data());
  return o;
}

// ||got - want|| / ||want|| in the L2 norm.
inline double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm += double(want[i]) * want[i];
  }
  return std::sqrt(diff / norm);  // NaN anywhere in got makes this NaN, which fails every bound
}

// A backend computing in bf16 (8-bit mantissa, rounding error 2^-9 a value, fp32 accumulation)
// against fp32: policy logits within 2e-2 in relative L2 norm over the batch and 0.1 + 5e-2 |want|
// each; win probabilities within 0.02.
inline void require_close_bf16(const Output& got, const Output& want) {
  REQUIRE(got.policy.size() == want.policy.size());
  double err = relative_error(got.policy, want.policy);
  INFO("policy relative L2 error " << err);
  REQUIRE(err < 2e-2);
  for (size_t i = 0; i < want.policy.size(); ++i) {
    INFO("policy logit " << i << ": " << got.policy[i] << " vs " << want.policy[i]);
    REQUIRE(std::abs(got.policy[i] - want.policy[i]) <= 0.1f + 5e-2f * std::abs(want.policy[i]));
  }
  for (size_t i = 0; i < want.value.size(); ++i) {
    INFO("value " << i << ": " << got.value[i] << " vs " << want.value[i]);
    REQUIRE(std::abs(got.value[i] - want.value[i]) <= 0.02f);
  }
}

}  // namespace jiriki::nn::testing
