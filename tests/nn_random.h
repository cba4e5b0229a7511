// Random networks and real encoded positions for the tests that hold one backend against another.
#pragma once
#include <cmath>
#include <random>
#include <vector>

#include "shogi/movegen.h"
#include "nn/features.h"
#include "nn/model.h"

namespace jiriki::nn::testing {

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
      if (planes[size_t(p) * INPUT_SIZE + i] != 0.0f) bits[size_t(p) * PACKED_INPUT_BYTES + i / 8] |= uint8_t(1 << (i % 8));
  return bits;
}

}  // namespace jiriki::nn::testing
