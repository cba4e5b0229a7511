// The backends against each other and against hand-worked figures: the reference evaluator on a
// network whose outputs can be worked out by hand (the simd and oneDNN backends too), then the oneDNN
// backend against the reference on random networks (random batch-norm statistics, so the folding is checked too) and
// real positions.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "nn/backend.h"
#include "nn/features.h"
#include "shogi/movegen.h"
#include "tests/nn_random.h"

using namespace jiriki;
using namespace jiriki::nn;
using jiriki::nn::testing::random_features;
using jiriki::nn::testing::random_model;
using namespace jiriki::nn::testing;

namespace {

// |got - want| <= 1e-4 * max(|want|, 1): relative for large values, absolute near zero.
void require_close(const Output& got, const Output& want) {
  REQUIRE(got.policy.size() == want.policy.size());
  for (size_t i = 0; i < want.policy.size(); ++i) {
    INFO("policy logit " << i);
    REQUIRE(std::abs(got.policy[i] - want.policy[i]) <= 1e-4f * std::max(std::abs(want.policy[i]), 1.0f));
  }
  for (size_t i = 0; i < want.value.size(); ++i) {
    INFO("value " << i);
    REQUIRE(std::abs(got.value[i] - want.value[i]) <= 1e-4f * std::max(want.value[i], 1e-2f));
  }
}

// fp32 unless asked: AUTO is bf16 on a CPU with AVX-512 bf16 instructions.
BackendOptions options(BackendKind kind, int max_batch, int threads = 0, Precision precision = Precision::FP32) {
  BackendOptions o;
  o.kind = kind;
  o.max_batch = max_batch;
  o.threads = threads;
  o.precision = precision;
  return o;
}

}  // namespace

TEST_CASE("reference evaluator: a network worked out by hand", "[nn][reference]") {
  // 0 blocks, 1 channel. Stem weights 0 and BN beta 1: h = relu(1) = 1 on every square.
  // Policy conv weight for label l is 0.1*l and the bias of logit i is i/10000:
  //   logit[81*l + sq] = 0.1*l + (81*l + sq)/10000.
  // Value conv weight 1, BN identity: v = 1/sqrt(1 + eps) on every square; fc1 row 0 = 1/2187,
  // other rows 0: hidden = (1/sqrt(1 + 1e-5), 0, ...); fc2 weight 2, bias -0.5:
  //   logit = 2/sqrt(1.00001) - 0.5 = 1.49999, value = sigmoid(1.49999) = 0.8175730.
  Architecture a;
  a.blocks = 0;
  a.channels = 1;
  Model m(a);
  m.stem.bn.beta.data[0] = 1.0f;
  for (int l = 0; l < POLICY_LABELS; ++l) m.policy_conv.data[l] = 0.1f * l;
  for (int i = 0; i < POLICY_SIZE; ++i) m.policy_bias.data[i] = float(i) / 10000.0f;
  for (int c = 0; c < VALUE_CHANNELS; ++c) m.value_conv.weight.data[c] = 1.0f;
  for (int i = 0; i < POLICY_SIZE; ++i) m.value_fc1_weight.data[i] = 1.0f / POLICY_SIZE;
  m.value_fc2_weight.data[0] = 2.0f;
  m.value_fc2_bias.data[0] = -0.5f;

  std::vector<BackendKind> kinds{BackendKind::REFERENCE, BackendKind::SIMD};
#if JIRIKI_HAVE_DNNL
  kinds.push_back(BackendKind::ONEDNN);
#endif
  auto features = random_features(2, 3);
  for (BackendKind k : kinds) {
    auto e = make_evaluator(m, options(k, 2));
    INFO(e->name());
    Output o = run(*e, features, 2);
    for (int b = 0; b < 2; ++b) {
      CHECK(o.value[b] == Approx(0.8175730).epsilon(1e-5));
      for (int l : {0, 5, 26})
        for (int sq : {0, 40, 80})
          CHECK(o.policy[b * POLICY_SIZE + 81 * l + sq] == Approx(0.1 * l + (81 * l + sq) / 10000.0).margin(1e-5));
    }
  }
}

#if JIRIKI_HAVE_DNNL
TEST_CASE("onednn backend equals the reference on random networks and positions", "[nn][cpu]") {
  struct Case {
    int blocks, channels;
    Activation act;
    int threads;
  };
  const Case cases[] = {
      {2, 16, Activation::RELU, 0},
      {2, 16, Activation::SWISH, 1},
      {1, 12, Activation::SWISH, 2},  // channels not a multiple of the SIMD block
      {0, 8, Activation::RELU, 0},
  };
  uint64_t seed = 100;
  for (const Case& c : cases) {
    Model m = random_model(c.blocks, c.channels, c.act, ++seed);
    auto reference = make_evaluator(m, options(BackendKind::REFERENCE, 8));
    auto cpu = make_evaluator(m, options(BackendKind::ONEDNN, 8, c.threads));
    auto features = random_features(8, seed);
    INFO(c.blocks << " blocks, " << c.channels << " channels, " << activation_name(c.act) << ", " << cpu->name());
    // Sizes in an order that reuses cached plans and shared buffers between different sizes.
    for (int n : {1, 8, 3, 1, 8}) {
      INFO("batch " << n);
      require_close(run(*cpu, features, n), run(*reference, features, n));
    }
    // The outputs actually depend on the input: two different positions differ.
    Output o = run(*cpu, features, 2);
    CHECK(o.value[0] != o.value[1]);
  }
}

TEST_CASE("onednn backend in bf16 equals the reference within bf16 tolerance", "[nn][cpu]") {
  // A 6x64 network as shipped for the CPU and a small odd one, on real positions: where oneDNN has
  // no bf16 convolution, asking for bf16 says so.
  struct Case {
    int blocks, channels;
    Activation act;
  };
  const Case cases[] = {{6, 64, Activation::RELU}, {1, 12, Activation::SWISH}};
  uint64_t seed = 300;
  for (const Case& c : cases) {
    Model m = random_model(c.blocks, c.channels, c.act, ++seed);
    auto reference = make_evaluator(m, options(BackendKind::REFERENCE, 8));
    std::unique_ptr<Evaluator> cpu;
    try {
      cpu = make_evaluator(m, options(BackendKind::ONEDNN, 8, 0, Precision::BF16));
      run(*cpu, random_features(1, seed), 1);
    } catch (const std::runtime_error& e) {
      INFO(e.what());
      CHECK_THAT(e.what(), Catch::Matchers::Contains("no bf16 convolution on this CPU"));
      return;
    }
    INFO(c.blocks << " blocks, " << c.channels << " channels, " << cpu->name());
    CHECK_THAT(cpu->name(), Catch::Matchers::Contains("bf16"));
    const auto features = random_features(8, seed);
    for (int n : {8, 3}) {
      INFO("batch " << n);
      require_close_bf16(run(*cpu, features, n), run(*reference, features, n));
    }
  }
  // AUTO is int8 where oneDNN has AVX2 or wider (ReLU networks), else bf16 exactly where the CPU
  // computes it natively; fp16 is refused.
  Model m = random_model(0, 8, Activation::RELU, 1);
  const std::string name = make_evaluator(m, options(BackendKind::ONEDNN, 1, 0, Precision::AUTO))->name();
  const char* float_arith = cpu_has_native_bf16() ? "bf16" : "fp32";
  CHECK_THAT(name, Catch::Matchers::Contains(cpu_has_native_int8() ? "int8" : float_arith));
  const Model swish = random_model(0, 8, Activation::SWISH, 1);
  CHECK_THAT(make_evaluator(swish, options(BackendKind::ONEDNN, 1, 0, Precision::AUTO))->name(),
             Catch::Matchers::Contains(float_arith));
  CHECK_THROWS_WITH(make_evaluator(m, options(BackendKind::ONEDNN, 1, 0, Precision::FP16)),
                    Catch::Matchers::Contains("not fp16"));
}

TEST_CASE("evaluate_packed expands the bits and gives what evaluate gives", "[nn][reference]") {
  Model m = random_model(1, 8, Activation::RELU, 91);
  auto reference = make_evaluator(m, options(BackendKind::REFERENCE, 6));
  const auto features = random_features(6, 92);
  const auto packed = jiriki::nn::testing::pack_planes(features, 6);
  for (int n : {6, 1}) {
    INFO("batch " << n);
    const Output want = run(*reference, features, n);
    Output got{std::vector<float>(size_t(n) * POLICY_SIZE), std::vector<float>(n)};
    reference->evaluate_packed(packed.data(), n, got.policy.data(), got.value.data());
    CHECK(got.policy == want.policy);
    CHECK(got.value == want.value);
  }
  std::vector<float> policy(size_t(7) * POLICY_SIZE), value(7);
  CHECK_THROWS_AS(reference->evaluate_packed(packed.data(), 7, policy.data(), value.data()), std::invalid_argument);
}

TEST_CASE("onednn backend in int8 stays close to fp32 on the shipped networks", "[nn][cpu]") {
  const auto shipped = shipped_models();
  for (const auto& [name, m] : shipped) {
    INFO(name);
    auto fp32 = make_evaluator(m, options(BackendKind::ONEDNN, 64, 0, Precision::FP32));
    auto int8 = make_evaluator(m, options(BackendKind::ONEDNN, 64, 0, Precision::INT8));
    check_int8_against_fp32(*fp32, *int8);
  }
  CHECK(!shipped.empty());
  // int8 is for ReLU networks.
  CHECK_THROWS_WITH(
      make_evaluator(random_model(1, 8, Activation::SWISH, 5), options(BackendKind::ONEDNN, 1, 0, Precision::INT8)),
      Catch::Matchers::Contains("only for ReLU networks"));
}

TEST_CASE("onednn backend in int8 evaluates a position that saturates its activations again in fp32", "[nn][cpu]") {
  const Model m = random_model(2, 16, Activation::RELU, 11);
  auto fp32 = make_evaluator(m, options(BackendKind::ONEDNN, 2, 1, Precision::FP32));
  auto int8 = make_evaluator(m, options(BackendKind::ONEDNN, 2, 1, Precision::INT8));
  check_int8_saturation_falls_back_to_fp32(*fp32, *int8);
}

TEST_CASE("onednn backend: batch sizes outside 1..max_batch are refused", "[nn][cpu]") {
  Model m = random_model(1, 8, Activation::RELU, 1);
  auto cpu = make_evaluator(m, options(BackendKind::ONEDNN, 4));
  auto features = random_features(5, 1);
  CHECK_THROWS_AS(run(*cpu, features, 5), std::invalid_argument);
  CHECK_THROWS_AS(run(*cpu, features, 0), std::invalid_argument);
  CHECK(cpu->max_batch() == 4);
}
#endif

#if !JIRIKI_HAVE_CUDA
TEST_CASE("the cuda backend says it was not built", "[nn]") {
  Model m = random_model(0, 4, Activation::RELU, 1);
  CHECK_THROWS_WITH(make_evaluator(m, options(BackendKind::CUDA, 1)), Catch::Matchers::Contains("built without CUDA"));
}
#endif
