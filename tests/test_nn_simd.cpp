// The simd backend (the project's own kernels) against the reference evaluator, on every kernel
// set this processor runs (plain C++, AVX2, AVX-512 fp32 and bf16, forced by BackendOptions::cpu_isa
// and the precision), on random networks of several shapes and on the shipped networks, at batch
// sizes 1, 7 and 64 with one and two threads.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <string>

#include "nn/backend.h"
#include "nn/cpu_kernels.h"
#include "tests/nn_random.h"

using namespace jiriki;
using namespace jiriki::nn;
using namespace jiriki::nn::testing;

namespace {

// fp32 against the reference's double accumulation: |got - want| <= 1e-4 * max(|want|, 1) for every
// logit and 1e-4 * max(want, 0.01) for every win probability.
void require_close_fp32(const Output& got, const Output& want) {
  REQUIRE(got.policy.size() == want.policy.size());
  for (size_t i = 0; i < want.policy.size(); ++i) {
    INFO("policy logit " << i << ": " << got.policy[i] << " vs " << want.policy[i]);
    REQUIRE(std::abs(got.policy[i] - want.policy[i]) <= 1e-4f * std::max(std::abs(want.policy[i]), 1.0f));
  }
  for (size_t i = 0; i < want.value.size(); ++i) {
    INFO("value " << i << ": " << got.value[i] << " vs " << want.value[i]);
    REQUIRE(std::abs(got.value[i] - want.value[i]) <= 1e-4f * std::max(want.value[i], 1e-2f));
  }
}

BackendOptions simd_options(int max_batch, int threads, Precision precision, CpuIsa isa) {
  BackendOptions o;
  o.kind = BackendKind::SIMD;
  o.max_batch = max_batch;
  o.threads = threads;
  o.precision = precision;
  o.cpu_isa = isa;
  return o;
}

// One way of running the simd backend on this processor.
struct Path {
  CpuIsa isa;
  Precision precision;
  const char* expect;  // the kernel set its name must give
};

// Every path this processor runs: plain C++, AVX2, AVX-512 fp32, AVX-512 bf16 (bf16 last).
std::vector<Path> paths() {
  std::vector<Path> out{{CpuIsa::SCALAR, Precision::FP32, "scalar"}};
  if (kernels::cpu_supports(kernels::Isa::AVX2)) out.push_back({CpuIsa::AVX2, Precision::FP32, "avx2"});
  const kernels::Isa best = kernels::best_isa();
  if (best == kernels::Isa::AVX512 || best == kernels::Isa::AVX512_BF16)
    out.push_back({CpuIsa::BEST, Precision::FP32, kernels::isa_name(best)});
  if (best == kernels::Isa::AVX512_BF16) out.push_back({CpuIsa::BEST, Precision::BF16, "avx512-bf16"});
  return out;
}

constexpr int DISTINCT = 7;  // positions the reference evaluates; larger batches repeat them

// The reference's outputs for DISTINCT positions held against the simd backend's on every path, at
// batch sizes 1, 7 and 64 (position i of the batch is position i % 7), with 1 and 2 threads.
void check_against_reference(const Model& m, uint64_t seed) {
  const std::vector<float> distinct = random_features(DISTINCT, seed);
  auto reference = make_evaluator(m, [] {
    BackendOptions o;
    o.kind = BackendKind::REFERENCE;
    o.max_batch = DISTINCT;
    return o;
  }());
  const Output want7 = run(*reference, distinct, DISTINCT);
  REQUIRE(want7.value[0] != want7.value[1]);  // the outputs depend on the position
  std::vector<float> features(size_t(64) * INPUT_SIZE);
  for (int i = 0; i < 64; ++i)
    std::copy_n(distinct.begin() + int64_t(i % DISTINCT) * INPUT_SIZE, INPUT_SIZE,
                features.begin() + int64_t(i) * INPUT_SIZE);
  for (const Path& path : paths())
    for (int threads : {1, 2}) {
      auto simd = make_evaluator(m, simd_options(64, threads, path.precision, path.isa));
      INFO(simd->name());
      CHECK_THAT(simd->name(), Catch::Matchers::Contains(std::string("own ") + path.expect + " kernels"));
      for (int n : {1, 7, 64, 1}) {
        INFO("batch " << n);
        Output want{std::vector<float>(size_t(n) * POLICY_SIZE), std::vector<float>(n)};
        for (int i = 0; i < n; ++i) {
          std::copy_n(want7.policy.begin() + int64_t(i % DISTINCT) * POLICY_SIZE, POLICY_SIZE,
                      want.policy.begin() + int64_t(i) * POLICY_SIZE);
          want.value[i] = want7.value[i % DISTINCT];
        }
        const Output got = run(*simd, features, n);
        if (path.precision == Precision::BF16) require_close_bf16(got, want);
        else require_close_fp32(got, want);
      }
    }
}

}  // namespace

TEST_CASE("simd backend equals the reference on random networks, every kernel set", "[nn][simd]") {
  struct Case {
    int blocks, channels;
    Activation act;
  };
  const Case cases[] = {
      {2, 16, Activation::RELU},  {1, 16, Activation::SWISH},
      {1, 12, Activation::SWISH},  // channels not a multiple of a vector
      {0, 8, Activation::RELU},   {2, 64, Activation::RELU},
      {1, 40, Activation::SWISH},  // blocks of 64 channels and a narrower last one
      {1, 96, Activation::RELU},
  };
  uint64_t seed = 700;
  for (const Case& c : cases) {
    INFO(c.blocks << " blocks, " << c.channels << " channels, " << activation_name(c.act));
    check_against_reference(random_model(c.blocks, c.channels, c.act, ++seed), seed);
  }
}

TEST_CASE("simd backend equals the reference on the shipped networks", "[nn][simd]") {
  const auto shipped = shipped_models();
  for (const auto& [name, model] : shipped) {
    INFO(name);
    check_against_reference(model, 11);
  }
  CHECK(!shipped.empty());
}

TEST_CASE("simd int8 kernels: each one this processor runs sums u8 times s8 as integers do", "[nn][simd]") {
  // Two positions, 20 input channels, 48 output channels (a block of the 512-bit kernel and part of
  // another of the 256-bit ones), 3x3 and 1x1. Inputs at most 127 and weights of magnitude at most
  // 127 (each output channel's largest exactly 127, so that its scale is 1 and the s8 weights are the
  // integers given): no sum of two products passes 16 bits, and every kernel, the AVX2 one included,
  // must give the exact sums.
  constexpr int n = 2, cin = 20, in_stride = 32, cout = 48;
  std::mt19937 rng(9);
  std::vector<uint8_t> in(size_t(n) * kernels::PADDED_SQUARES * in_stride, 0);
  for (int p = 0; p < n; ++p)
    for (int sq = 0; sq < 81; ++sq)
      for (int ci = 0; ci < cin; ++ci)
        in[(size_t(p) * kernels::PADDED_SQUARES + kernels::padded_square(sq)) * in_stride + ci] = uint8_t(rng() % 128);
  const std::vector<float> bias(cout, 0.0f), scale(cout, 1.0f);
  int tested = 0;
  for (int k : {3, 1}) {
    std::vector<float> w(size_t(cout) * cin * k * k);
    for (float& x : w) x = float(int(rng() % 255) - 127);
    for (int co = 0; co < cout; ++co) w[size_t(co) * cin * k * k + co % (cin * k * k)] = co % 2 ? 127.0f : -127.0f;
    // The sums as integers, from the padded board (its border is zero).
    std::vector<float> want(size_t(n) * kernels::PADDED_SQUARES * cout, 0.0f);
    for (int p = 0; p < n; ++p)
      for (int sq = 0; sq < 81; ++sq)
        for (int co = 0; co < cout; ++co) {
          int64_t sum = 0;
          for (int ci = 0; ci < cin; ++ci)
            for (int t = 0; t < k * k; ++t) {
              const int h = sq / 9 + (k == 3 ? t / 3 - 1 : 0), x = sq % 9 + (k == 3 ? t % 3 - 1 : 0);
              if (h < 0 || h > 8 || x < 0 || x > 8) continue;
              sum += int64_t(w[((size_t(co) * cin + ci) * k * k) + t]) *
                     in[(size_t(p) * kernels::PADDED_SQUARES + kernels::padded_square(h * 9 + x)) * in_stride + ci];
            }
          want[(size_t(p) * kernels::PADDED_SQUARES + kernels::padded_square(sq)) * cout + co] = float(sum);
        }
    for (const kernels::Int8Kernels* set : kernels::int8_kernels_here()) {
      INFO(set->name << ", " << k << "x" << k);
      std::vector<float> scales;
      const std::vector<int8_t> packed =
          kernels::pack_conv_weights_s8(w.data(), cout, cin, k, cout, cin, set->block, scales);
      CHECK(std::all_of(scales.begin(), scales.end(), [](float x) { return x == 1.0f; }));
      std::vector<float> out(want.size(), 0.0f);
      kernels::ConvArgs a;
      a.in = in.data();
      a.in_stride = in_stride;
      a.cin = cin;
      a.taps = k * k;
      a.weight = packed.data();
      a.bias = bias.data();
      a.cout = cout;
      a.out_stride = cout;
      a.out = out.data();
      a.scale = scale.data();
      set->conv(a, n, 0, set->conv_items(n, cout));
      CHECK(out == want);
      ++tested;
    }
  }
  // Any AVX2 processor runs at least the AVX2 one, for both kernel sizes.
  if (kernels::cpu_supports(kernels::Isa::AVX2)) CHECK(tested >= 2);
}

TEST_CASE("simd backend in int8 stays close to fp32 on the shipped networks, with each int8 kernel", "[nn][simd]") {
  const auto shipped = shipped_models();
  for (CpuIsa cap : {CpuIsa::BEST, CpuIsa::AVX2}) {
    const kernels::Isa isa = cap == CpuIsa::AVX2 ? kernels::Isa::AVX2 : kernels::best_isa();
    if (!kernels::cpu_supports(isa) || !kernels::int8_kernels(isa)) continue;  // no AVX2 here
    for (const auto& [name, m] : shipped) {
      INFO(name);
      auto fp32 = make_evaluator(m, simd_options(64, 2, Precision::FP32, cap));
      auto int8 = make_evaluator(m, simd_options(64, 2, Precision::INT8, cap));
      CHECK_THAT(int8->name(), Catch::Matchers::Contains(kernels::int8_kernels(isa)->name));
      check_int8_against_fp32(*fp32, *int8);
    }
  }
  CHECK(!shipped.empty());
  // int8 is for ReLU networks, and needs AVX2 (none under the scalar cap).
  CHECK_THROWS_WITH(
      make_evaluator(random_model(1, 8, Activation::SWISH, 5), simd_options(1, 1, Precision::INT8, CpuIsa::BEST)),
      Catch::Matchers::Contains("only for ReLU networks"));
  CHECK_THROWS_WITH(
      make_evaluator(random_model(1, 8, Activation::RELU, 5), simd_options(1, 1, Precision::INT8, CpuIsa::SCALAR)),
      Catch::Matchers::Contains("no int8 convolution"));
}

TEST_CASE("simd backend in int8 evaluates a position that saturates its activations again in fp32", "[nn][simd]") {
  if (!kernels::int8_kernels(kernels::best_isa())) return;  // no AVX2 here
  const Model m = random_model(2, 16, Activation::RELU, 11);
  auto fp32 = make_evaluator(m, simd_options(2, 1, Precision::FP32, CpuIsa::BEST));
  auto int8 = make_evaluator(m, simd_options(2, 1, Precision::INT8, CpuIsa::BEST));
  check_int8_saturation_falls_back_to_fp32(*fp32, *int8);
}

TEST_CASE("simd backend: precision and batch sizes", "[nn][simd]") {
  Model m = random_model(1, 8, Activation::RELU, 3);
  // AUTO is int8 on a ReLU network where the kernel set has an int8 kernel (AVX2 and wider), else bf16
  // exactly where the processor has AVX-512 BF16 (a swish network too), else fp32; fp16 is refused,
  // and so is bf16 on a kernel set without it.
  const bool int8 = kernels::int8_kernels(kernels::best_isa()) != nullptr;
  const std::string bf16_or_fp32 = cpu_has_native_bf16() ? "bf16" : "fp32";
  CHECK_THAT(make_evaluator(m, simd_options(1, 1, Precision::AUTO, CpuIsa::BEST))->name(),
             Catch::Matchers::Contains(int8 ? "int8" : bf16_or_fp32));
  CHECK_THAT(make_evaluator(random_model(1, 8, Activation::SWISH, 3), simd_options(1, 1, Precision::AUTO, CpuIsa::BEST))
                 ->name(),
             Catch::Matchers::Contains(bf16_or_fp32));
  CHECK(cpu_has_native_bf16() == kernels::cpu_supports(kernels::Isa::AVX512_BF16));
  CHECK(kernels::int8_kernels(kernels::Isa::SCALAR) == nullptr);
  const bool avx2 = kernels::cpu_supports(kernels::Isa::AVX2);
  CHECK((kernels::int8_kernels(kernels::Isa::AVX2) != nullptr) == avx2);
  CHECK_THAT(make_evaluator(m, simd_options(1, 1, Precision::AUTO, CpuIsa::AVX2))->name(),
             Catch::Matchers::Contains(avx2 ? "int8" : "fp32"));
  CHECK_THROWS_WITH(make_evaluator(m, simd_options(1, 1, Precision::FP16, CpuIsa::BEST)),
                    Catch::Matchers::Contains("not fp16"));
  CHECK_THROWS_WITH(make_evaluator(m, simd_options(1, 1, Precision::BF16, CpuIsa::AVX2)),
                    Catch::Matchers::Contains("no bf16 convolution on this CPU"));

  auto simd = make_evaluator(m, simd_options(4, 2, Precision::AUTO, CpuIsa::BEST));
  const auto features = random_features(5, 1);
  CHECK_THROWS_AS(run(*simd, features, 5), std::invalid_argument);
  CHECK_THROWS_AS(run(*simd, features, 0), std::invalid_argument);
  CHECK(simd->max_batch() == 4);
  // `cpu` is an evaluator of this build, and says which.
  BackendOptions o = simd_options(1, 1, Precision::FP32, CpuIsa::BEST);
  o.kind = BackendKind::CPU;
  CHECK_THAT(make_evaluator(m, o)->name(),
             Catch::Matchers::StartsWith(backend_kind_name(default_cpu_backend()) + std::string(" (")));
}
