// Random networks and real encoded positions for the tests that hold one backend against another.
#pragma once
#include <algorithm>
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

// A backend in int8 against fp32 on positions the network plays itself, drawn with a seed other than
// the calibration's: its win probability and its most likely move. Measured on both shipped networks
// with the onednn backend (bench/results/cpu_int8_2026-11-29.txt): mean error 0.003, worst 0.026,
// the same move 0.935-0.944; the bounds leave room for other processors' kernels. Then the packed
// bits, written straight into the u8 input, must give exactly what the planes as floats give.
inline void check_int8_against_fp32(Evaluator& fp32, Evaluator& int8) {
  CHECK_THAT(int8.name(), Catch::Matchers::Contains("int8"));
  const std::vector<uint8_t> packed = self_play_positions(fp32, 8, 96, 7);
  const int count = int(packed.size() / PACKED_INPUT_BYTES);
  REQUIRE(count > 8 * 48);
  double value_error = 0, worst_value_error = 0;
  int same_top = 0;
  std::vector<float> p32(size_t(64) * POLICY_SIZE), p8(p32.size()), v32(64), v8(64);
  for (int start = 0; start < count; start += 64) {
    const int n = std::min(64, count - start);
    fp32.evaluate_packed(packed.data() + size_t(start) * PACKED_INPUT_BYTES, n, p32.data(), v32.data());
    int8.evaluate_packed(packed.data() + size_t(start) * PACKED_INPUT_BYTES, n, p8.data(), v8.data());
    for (int b = 0; b < n; ++b) {
      const double e = std::abs(double(v8[b]) - v32[b]);
      value_error += e;
      worst_value_error = std::max(worst_value_error, e);
      const float* a = p32.data() + size_t(b) * POLICY_SIZE;
      const float* c = p8.data() + size_t(b) * POLICY_SIZE;
      same_top += std::max_element(a, a + POLICY_SIZE) - a == std::max_element(c, c + POLICY_SIZE) - c;
    }
  }
  INFO(int8.name() << ": " << count << " positions, mean |value error| " << value_error / count << ", worst "
                   << worst_value_error << ", same most likely move " << double(same_top) / count);
  CHECK(value_error / count < 0.01);
  CHECK(worst_value_error < 0.1);
  CHECK(double(same_top) / count > 0.85);
  for (int n : {64, 5}) {
    std::vector<float> planes(size_t(n) * INPUT_SIZE), pf(size_t(n) * POLICY_SIZE), vf(n);
    unpack_features(packed.data() + size_t(100) * PACKED_INPUT_BYTES, n, planes.data());
    int8.evaluate(planes.data(), n, pf.data(), vf.data());
    int8.evaluate_packed(packed.data() + size_t(100) * PACKED_INPUT_BYTES, n, p8.data(), v8.data());
    CHECK(std::equal(pf.begin(), pf.end(), p8.begin()));
    CHECK(std::equal(vf.begin(), vf.end(), v8.begin()));
  }
}

// An int8 evaluator on a position far outside the positions it was calibrated on (every input plane
// set, which no game reaches: its activations run far past the calibrated maxima) gives the fp32
// evaluator's answer, having evaluated it again in fp32 (SATURATION_LIMIT); beside it in the same
// batch an ordinary position keeps its int8 answer, close to fp32's but not equal.
inline void check_int8_saturation_falls_back_to_fp32(Evaluator& fp32, Evaluator& int8) {
  const std::vector<uint8_t> packed = self_play_positions(fp32, 2, 4, 5);
  REQUIRE(packed.size() >= 2 * PACKED_INPUT_BYTES);
  std::vector<float> planes(2 * size_t(INPUT_SIZE), 1.0f);
  unpack_features(packed.data() + PACKED_INPUT_BYTES, 1, planes.data() + INPUT_SIZE);
  std::vector<float> p32(2 * size_t(POLICY_SIZE)), p8(p32.size()), v32(2), v8(2);
  fp32.evaluate(planes.data(), 2, p32.data(), v32.data());
  int8.evaluate(planes.data(), 2, p8.data(), v8.data());
  CHECK(v8[0] == Approx(v32[0]).margin(1e-5));
  double worst = 0, ordinary = 0;
  for (int i = 0; i < POLICY_SIZE; ++i) {
    worst = std::max(worst, double(std::abs(p8[i] - p32[i])));
    ordinary = std::max(ordinary, double(std::abs(p8[POLICY_SIZE + i] - p32[POLICY_SIZE + i])));
  }
  CHECK(worst < 1e-4);
  CHECK(ordinary > 0);
  CHECK(std::abs(v8[1] - v32[1]) < 0.1);
}

}  // namespace jiriki::nn::testing
