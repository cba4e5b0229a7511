// The CUDA backend against the reference evaluator (fp32 loops on the unfolded network) on random
// networks and real positions. The CUDA backend stores weights and activations in bf16 (8-bit
// mantissa, rounding error 2^-9 per value) and accumulates in fp32, so it agrees with the
// reference to about 1e-2 relative, not to fp32 precision: the bounds below are set for that.
// They need a GPU: tagged [gpu], they are not run (and reported skipped) where there is none (see
// tests/gpu.h); built without CUDA, test_nn_cpu.cpp checks that the backend says so.
#if JIRIKI_HAVE_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "nn/backend.h"
#include "nn/cuda/cuda_backend.h"
#include "nn/cuda/fused_conv.h"
#include "nn/cuda/square_conv.h"
#include "tests/gpu.h"
#include "tests/nn_random.h"
#include "tests/temp_dir.h"

using namespace jiriki;
using namespace jiriki::nn;
using jiriki::nn::testing::random_features;
using jiriki::nn::testing::random_model;
using namespace jiriki::nn::testing;
using jiriki::testing::require_gpu;

namespace {

int gpu_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

BackendOptions cuda_options(int max_batch, int gpu = 0) {
  BackendOptions o;
  o.kind = BackendKind::CUDA;
  o.max_batch = max_batch;
  o.gpu = gpu;
  return o;
}

}  // namespace

TEST_CASE("cuda backend equals the reference within bf16 tolerance", "[nn][cuda][gpu]") {
  require_gpu();
  struct Case {
    int blocks, channels;
    Activation act;
  };
  const Case cases[] = {
      {3, 32, Activation::RELU},
      {2, 24, Activation::SWISH},
      {1, 12, Activation::RELU},  // channels padded to 16 inside the backend
      {0, 8, Activation::SWISH},  // stem and heads only
  };
  constexpr int MAX_BATCH = 40;
  uint64_t seed = 300;
  for (const Case& c : cases) {
    Model m = random_model(c.blocks, c.channels, c.act, ++seed);
    auto reference = make_evaluator(m, {BackendKind::REFERENCE, 0, 0, MAX_BATCH});
    auto gpu = make_evaluator(m, cuda_options(MAX_BATCH));
    auto features = random_features(MAX_BATCH, seed);
    const Output want = run(*reference, features, MAX_BATCH);
    INFO(c.blocks << " blocks, " << c.channels << " channels, " << activation_name(c.act) << ", " << gpu->name());
    // 37 and 40 run in the bucket of 40 (max_batch; 37 with padded rows), 5 in that of 8; the order
    // revisits captured graphs.
    for (int n : {1, 37, 5, 40, 1}) {
      INFO("batch " << n);
      Output w{std::vector<float>(want.policy.begin(), want.policy.begin() + size_t(n) * POLICY_SIZE),
               std::vector<float>(want.value.begin(), want.value.begin() + n)};
      require_close_bf16(run(*gpu, features, n), w);
    }
  }
}

TEST_CASE("cuda backend: the unfused fallback (convolution, then our epilogue) equals the reference",
          "[nn][cuda][gpu]") {
  require_gpu();
  BackendOptions unfused = cuda_options(8);
  unfused.cuda.unfused = true;
  for (Activation act : {Activation::RELU, Activation::SWISH}) {
    Model m = random_model(2, 16, act, 51);
    auto reference = make_evaluator(m, {BackendKind::REFERENCE, 0, 0, 8});
    auto gpu = make_evaluator(m, unfused);
    auto features = random_features(8, 52);
    INFO(activation_name(act));
    require_close_bf16(run(*gpu, features, 8), run(*reference, features, 8));
  }
}

TEST_CASE("cuda backend: a bigger swish network, many positions", "[nn][cuda][gpu]") {
  require_gpu();
  Model m = random_model(6, 64, Activation::SWISH, 7);
  auto reference = make_evaluator(m, {BackendKind::REFERENCE, 0, 0, 16});
  auto gpu = make_evaluator(m, cuda_options(16));
  auto features = random_features(16, 8);
  require_close_bf16(run(*gpu, features, 16), run(*reference, features, 16));
}

TEST_CASE("cuda backend: a large batch, run as two half batches on two streams", "[nn][cuda][gpu]") {
  require_gpu();
  // 520 positions run in the bucket of 520 (max_batch); forced to two towers of 260 (nn/cuda/cuda_backend.cpp
  // otherwise keeps whichever of one or two towers is faster), then left to choose.
  Model m = random_model(2, 8, Activation::RELU, 41);
  auto reference = make_evaluator(m, {BackendKind::REFERENCE, 0, 0, 520});
  auto features = random_features(520, 42);
  const Output want = run(*reference, features, 520);
  {
    BackendOptions two = cuda_options(520);
    two.cuda.parts = 2;
    auto halves = make_evaluator(m, two);
    require_close_bf16(run(*halves, features, 520), want);
  }
  auto chosen = make_evaluator(m, cuda_options(520));
  require_close_bf16(run(*chosen, features, 520), want);
}

TEST_CASE("cuda backend: the square-major Hopper convolution equals cuDNN's tower and the reference",
          "[nn][cuda][gpu]") {
  require_gpu();
  if (!cuda::square_conv_supported(0, 128, 128)) {
    WARN("GPU 0 is not an sm_90 (Hopper) GPU: square-major convolution test skipped");
    return;
  }
  struct Case {
    int blocks, channels;
    Activation act;
  };
  const Case cases[] = {{1, 192, Activation::RELU}, {2, 128, Activation::SWISH}};
  constexpr int BATCH = 256, CHECKED = 12;  // the reference's direct loops are slow at 192 channels
  uint64_t seed = 900;
  for (const Case& c : cases) {
    INFO(c.blocks << " blocks, " << c.channels << " channels, " << activation_name(c.act));
    Model m = random_model(c.blocks, c.channels, c.act, ++seed);
    auto features = random_features(BATCH, ++seed);
    Output square, square_part, cudnn;
    {
      BackendOptions on = cuda_options(BATCH);
      on.cuda.tower = CudaSettings::Tower::SQUARE;
      auto e = make_evaluator(m, on);
      REQUIRE(cuda_uses_square_conv(*e, BATCH));
      square = run(*e, features, BATCH);
      square_part = run(*e, features, 200);  // the bucket of 256 with padded rows
    }
    {
      BackendOptions off = cuda_options(BATCH);
      off.cuda.tower = CudaSettings::Tower::CUDNN;
      auto e = make_evaluator(m, off);
      REQUIRE_FALSE(cuda_uses_square_conv(*e, BATCH));
      cudnn = run(*e, features, BATCH);
    }
    require_close_bf16(square, cudnn);
    REQUIRE(std::equal(square_part.policy.begin(), square_part.policy.end(), square.policy.begin()));
    REQUIRE(std::equal(square_part.value.begin(), square_part.value.end(), square.value.begin()));
    auto reference = make_evaluator(m, {BackendKind::REFERENCE, 0, 0, CHECKED});
    Output head{std::vector<float>(square.policy.begin(), square.policy.begin() + size_t(CHECKED) * POLICY_SIZE),
                std::vector<float>(square.value.begin(), square.value.begin() + CHECKED)};
    require_close_bf16(head, run(*reference, features, CHECKED));
  }
}

TEST_CASE("cuda backend: packed planes expanded on the GPU give what evaluate gives", "[nn][cuda][gpu]") {
  require_gpu();
  Model m = random_model(2, 16, Activation::RELU, 93);
  auto gpu = make_evaluator(m, cuda_options(40));
  auto reference = make_evaluator(m, {BackendKind::REFERENCE, 0, 0, 40});
  const auto features = random_features(40, 94);
  const auto packed = jiriki::nn::testing::pack_planes(features, 40);
  for (int n : {40, 37, 1}) {
    INFO("batch " << n);
    const Output want = run(*gpu, features, n);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    Output got{std::vector<float>(size_t(n) * POLICY_SIZE, nan), std::vector<float>(n, nan)};
    gpu->evaluate_packed(packed.data(), n, got.policy.data(), got.value.data());
    // The same bf16 planes reach the same graph: the same outputs, bit for bit.
    CHECK(got.policy == want.policy);
    CHECK(got.value == want.value);
    Output ref = run(*reference, features, n);
    require_close_bf16(got, ref);
  }
}

TEST_CASE("cuda backend: results do not depend on the batch a position is in", "[nn][cuda][gpu]") {
  require_gpu();
  Model m = random_model(2, 32, Activation::RELU, 11);
  auto gpu = make_evaluator(m, cuda_options(64));
  auto features = random_features(64, 12);
  Output all = run(*gpu, features, 64);
  for (int i : {0, 17, 63}) {
    std::vector<float> one(features.begin() + size_t(i) * INPUT_SIZE, features.begin() + size_t(i + 1) * INPUT_SIZE);
    Output single = run(*gpu, one, 1);
    std::vector<float> part(all.policy.begin() + size_t(i) * POLICY_SIZE,
                            all.policy.begin() + size_t(i + 1) * POLICY_SIZE);
    INFO("position " << i);
    // Different batch sizes may run different cuDNN engines: equal up to accumulation order.
    CHECK(relative_error(single.policy, part) < 1e-2);
    CHECK(std::abs(single.value[0] - all.value[i]) < 1e-2);
  }
  // Two different positions give different outputs: the input reaches the output.
  CHECK(all.value[0] != all.value[1]);
}

TEST_CASE("cuda backend: every GPU of the machine gives the same results", "[nn][cuda][gpu]") {
  require_gpu();
  const int gpus = gpu_count();
  if (gpus < 2) WARN("one CUDA device: the several-GPU part of this test is skipped");
  Model m = random_model(1, 16, Activation::SWISH, 21);
  auto features = random_features(8, 22);
  auto first = make_evaluator(m, cuda_options(8, 0));
  Output want = run(*first, features, 8);
  // A second evaluator on the same device, alive at the same time, and one on every other device.
  for (int g = 0; g < gpus; ++g) {
    auto other = make_evaluator(m, cuda_options(8, g));
    INFO("device " << g << ": " << other->name());
    Output got = run(*other, features, 8);
    CHECK(relative_error(got.policy, want.policy) < 1e-2);
    // The first evaluator still works after another one was made and used.
    CHECK(relative_error(run(*first, features, 8).policy, want.policy) < 1e-2);
  }
}

TEST_CASE("cuda backend: evaluators on one GPU tune each shape once and share the choice", "[nn][cuda][gpu]") {
  require_gpu();
  // Four evaluators (a search's threads) meet the same bucket at the same time: one tunes its three
  // convolution shapes (stem, conv1, conv2), the others wait and take its engines. 44 channels: a
  // shape no other test here tunes.
  Model m = random_model(2, 44, Activation::RELU, 61);
  auto features = random_features(16, 62);
  auto reference = make_evaluator(m, {BackendKind::REFERENCE, 0, 0, 16});
  const Output want = run(*reference, features, 16);
  const int tuned_before = cuda::shapes_tuned();
  std::vector<std::unique_ptr<Evaluator>> evals;
  for (int i = 0; i < 4; ++i) evals.push_back(make_evaluator(m, cuda_options(16)));
  std::vector<Output> got(evals.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < evals.size(); ++i) threads.emplace_back([&, i] { got[i] = run(*evals[i], features, 16); });
  for (auto& t : threads) t.join();
  CHECK(cuda::shapes_tuned() - tuned_before == 3);
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("evaluator " << i);
    require_close_bf16(got[i], want);
    CHECK(relative_error(got[i].policy, got[0].policy) < 1e-6);  // the same engines on the same inputs
  }
}

// The lines of a text file.
std::vector<std::string> file_lines(const std::filesystem::path& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST_CASE("cuda backend: tuned engines are kept in the choice file, read back, and a bad file costs only time",
          "[nn][cuda][gpu]") {
  require_gpu();
  const jiriki::testing::TempDir dir("cudnn_choices");
  const auto file = dir.path / "sub" / "choices.txt";  // the directory is created on the first write
  BackendOptions options = cuda_options(8);
  options.cuda.choice_file = file.string();
  // 40 channels, batch 8: shapes no other test here tunes. One block: stem, conv1, conv2 + residual.
  Model m = random_model(1, 40, Activation::RELU, 71);
  auto features = random_features(8, 72);
  auto reference = make_evaluator(m, {BackendKind::REFERENCE, 0, 0, 8});
  const Output want = run(*reference, features, 8);
  auto evaluate_fresh = [&] {
    cuda::forget_tuned_shapes();  // as a new process would: only the file remembers
    auto gpu = make_evaluator(m, options);
    return run(*gpu, features, 8);
  };

  const int tuned0 = cuda::shapes_tuned();
  const Output first = evaluate_fresh();
  require_close_bf16(first, want);
  CHECK(cuda::shapes_tuned() - tuned0 == 3);
  std::vector<std::string> lines = file_lines(file);
  REQUIRE(lines.size() == 3);
  for (const auto& line : lines) CHECK(line.rfind("jiriki-cudnn-2 ", 0) == 0);

  SECTION("read back: nothing is tuned again, and the same engines give the same outputs") {
    // Lines that do not parse are ignored.
    std::ofstream(file, std::ios::app) << "garbage\njiriki-cudnn-2 only-a-key\n"
                                       << "jiriki-cudnn-2 k 2 0 0 -1 1.0\n"
                                       << lines[0] << " trailing\n";
    const Output again = evaluate_fresh();
    CHECK(cuda::shapes_tuned() - tuned0 == 3);
    CHECK(relative_error(again.policy, first.policy) < 1e-6);
    CHECK(relative_error(again.value, first.value) < 1e-6);
  }
  SECTION("a choice that no longer finalizes is tuned afresh and appended") {
    // The same keys, pointing past the end of the heuristics' list.
    std::ofstream out(file, std::ios::trunc);
    for (const auto& line : lines) {
      std::istringstream fields(line);
      std::string magic, key;
      fields >> magic >> key;
      out << magic << ' ' << key << " 1 0 9999 -1 0.5\n";
    }
    out.close();
    const Output retuned = evaluate_fresh();
    require_close_bf16(retuned, want);
    CHECK(cuda::shapes_tuned() - tuned0 == 6);
    CHECK(file_lines(file).size() == 6);
  }
  SECTION("a kernel-configuration sweep: its choices are kept with their knob and give right outputs") {
    std::filesystem::remove(file);
    options.cuda.cudnn_sweep = 3;
    require_close_bf16(evaluate_fresh(), want);
    options.cuda.cudnn_sweep = -1;
    std::vector<std::string> swept = file_lines(file);
    REQUIRE(swept.size() == 3);
    std::ofstream out(file, std::ios::trunc);
    for (const auto& line : swept) {
      std::istringstream fields(line);
      std::string magic, key;
      int fused = 0, mode = 0, index = 0, kernel_cfg = -2;
      double ms = 0;
      REQUIRE(bool(fields >> magic >> key >> fused >> mode >> index >> kernel_cfg >> ms));
      CHECK(kernel_cfg >= -1);
      // The same choice with KERNEL_CFG forced to 0: read back through the knob override (or tuned
      // afresh if that configuration does not finalize); either way the outputs must be right.
      out << magic << ' ' << key << ' ' << fused << ' ' << mode << ' ' << index << " 0 " << ms << '\n';
    }
    out.close();
    require_close_bf16(evaluate_fresh(), want);
  }
  cuda::forget_tuned_shapes();
}

TEST_CASE("cuda backend: bad options and batch sizes are refused with their reason", "[nn][cuda][gpu]") {
  require_gpu();
  Model m = random_model(0, 8, Activation::RELU, 31);
  CHECK_THROWS_WITH(make_evaluator(m, cuda_options(4, gpu_count())), Catch::Matchers::Contains("does not exist"));
  BackendOptions fp32 = cuda_options(4);
  fp32.precision = Precision::FP32;
  CHECK_THROWS_WITH(make_evaluator(m, fp32), Catch::Matchers::Contains("bf16"));
  auto gpu = make_evaluator(m, cuda_options(4));
  auto features = random_features(5, 1);
  CHECK_THROWS_AS(run(*gpu, features, 5), std::invalid_argument);
  CHECK_THROWS_AS(run(*gpu, features, 0), std::invalid_argument);
  CHECK_THROWS_AS(cuda_device_seconds_per_batch(*make_evaluator(m, {BackendKind::REFERENCE, 0, 0, 1}), 1, 1),
                  std::invalid_argument);
  CHECK(cuda_device_seconds_per_batch(*gpu, 4, 3) > 0.0);
}

#endif  // JIRIKI_HAVE_CUDA
