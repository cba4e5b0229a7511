// --backend auto, the default of every command that evaluates or trains a network: the GPU when one
// is usable (a CUDA build and a device), else the CPU, decided in one place (nn::resolve_backend) and
// said in one line. The commands are run as a new user would, with no --backend, so that on a
// machine with the CUDA toolkit and no GPU they must work on the CPU, and on the GPU machine on it.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nn/backend.h"
#include "nn/model_file.h"
#include "shogi/hcpe.h"
#include "tests/temp_dir.h"
#include "training/data.h"

using namespace jiriki;
using Catch::Matchers::Contains;

namespace {

// Runs `jiriki ARGS` and returns its exit status and its output (stdout and stderr).
std::pair<int, std::string> run_jiriki(const std::string& args) {
  FILE* f = popen((std::string(JIRIKI_BINARY) + " " + args + " 2>&1").c_str(), "r");
  REQUIRE(f);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  const int status = pclose(f);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// What auto must give on this machine, worked out from the device count alone.
// (every build has a fast CPU evaluator, the simd kernels).
nn::BackendKind expected_auto(nn::BackendUse) {
  return nn::cuda_device_count() > 0 ? nn::BackendKind::CUDA : nn::BackendKind::CPU;
}

}  // namespace

TEST_CASE("backend: auto is the GPU when one is usable, else the CPU, with the reason", "[backend]") {
  for (nn::BackendUse use : {nn::BackendUse::INFERENCE, nn::BackendUse::TRAINING}) {
    const nn::BackendChoice c = nn::resolve_backend("auto", use);
    CHECK(c.kind == expected_auto(use));
    CHECK_THAT(c.reason, Catch::StartsWith("auto: "));
    std::string why;
    if (nn::cuda_device_count(&why) == 0) {
      CHECK_THAT(c.reason, Contains(why));
#if !JIRIKI_HAVE_CUDA
      CHECK(why == "this jiriki was built without CUDA");
#endif
    } else {
      CHECK_THAT(c.reason, Contains("CUDA device"));
    }
    // A named backend is taken as asked, whether or not it can run here (making it says why not).
    CHECK(nn::resolve_backend("cpu", use).kind == nn::BackendKind::CPU);
    CHECK(nn::resolve_backend("cuda", use).kind == nn::BackendKind::CUDA);
    CHECK(nn::resolve_backend("cuda", use).reason == "asked for");
    for (const char* cpu_only : {"simd", "onednn"})
      if (use == nn::BackendUse::INFERENCE)
        CHECK(nn::resolve_backend(cpu_only, use).kind == nn::parse_backend_kind(cpu_only));
      else CHECK_THROWS_WITH(nn::resolve_backend(cpu_only, use), Contains("auto, cpu or cuda"));
    CHECK_THROWS_WITH(nn::resolve_backend("tpu", use), Contains("unknown backend 'tpu'"));
  }
  CHECK(nn::resolve_backend("reference").kind == nn::BackendKind::REFERENCE);
  CHECK_THROWS_WITH(nn::resolve_backend("reference", nn::BackendUse::TRAINING), Contains("auto, cpu or cuda"));
}

TEST_CASE("backend: nn eval, selfplay and train work with no --backend and say where they run", "[backend][cli]") {
  testing::TempDir dir("backend_auto");
  const std::string model = dir.file("m.jnn");
  nn::Architecture a;
  a.blocks = 1;
  a.channels = 8;  // a multiple of 8: the GPU trainer takes it too
  nn::Model m(a);
  nn::init_model(m, 5);
  nn::save_model(m, model);
  const std::string inference = nn::backend_kind_name(expected_auto(nn::BackendUse::INFERENCE));
  const std::string training = nn::backend_kind_name(expected_auto(nn::BackendUse::TRAINING));
  INFO("inference: " << inference << ", training: " << training);

  auto [rc, out] = run_jiriki("nn eval " + model + " --top 1");
  INFO(out);
  CHECK(rc == 0);
  // nn eval names the evaluator itself: on the CPU the one `cpu` stands for in this build.
  const std::string evaluator = expected_auto(nn::BackendUse::INFERENCE) == nn::BackendKind::CPU
                                    ? nn::backend_kind_name(nn::default_cpu_backend())
                                    : inference;
  CHECK_THAT(out, Contains("backend: " + evaluator + " (") && Contains("[auto: "));

  std::tie(rc, out) = run_jiriki("selfplay --model " + model + " --out " + dir.file("games") +
                                 " --games 2 --playouts 4 --max-plies 12 --report-seconds 60");
  CHECK(rc == 0);
  CHECK_THAT(out, Contains("backend: " + inference + " (auto: ") && Contains("wrote 2 games"));

  REQUIRE(!write_hcpe_file(dir.file("d.hcpe"), training::random_game_records(2, 16, 3)));
  std::tie(rc, out) = run_jiriki("train --data " + dir.file("d.hcpe") + " --model-out " + dir.file("t.jnn") +
                                 " --blocks 1 --channels 8 --batch 8 --steps 2 --log-every 1");
  CHECK(rc == 0);
  CHECK_THAT(out, Contains("backend: " + training + " (auto: ") && Contains("wrote " + dir.file("t.jnn")));

  // bench train measured nothing on a machine without a GPU: the default --gpus 0 reached the CPU
  // trainer, which refuses GPUs.
  std::tie(rc, out) = run_jiriki("bench train --blocks 1 --channels 8 --batch 8 --steps 2 --loader-steps 2");
  INFO(out);
  CHECK(rc == 0);
  CHECK_THAT(out, Contains("backend: " + training + " (auto: ") && Contains("trainer samples/s"));
  CHECK(out.find("error") == std::string::npos);

  // bench allreduce: a row per rank count, and bad sizes refused with a message.
  std::tie(rc, out) = run_jiriki("bench allreduce --ranks 1,3 --mb 0.5 --reps 2");
  INFO(out);
  CHECK(rc == 0);
  CHECK_THAT(out, Contains("0.5 MB a rank") && Contains("\n     1 ") && Contains("\n     3 "));
  std::tie(rc, out) = run_jiriki("bench allreduce --mb 0");
  CHECK(rc != 0);
  CHECK_THAT(out, Contains("--mb must be positive"));
}

TEST_CASE("backend: the JIRIKI_* variables become the CUDA settings", "[backend]") {
  // Set here, and given back their values at the end (a run's own JIRIKI_CUDNN_CACHE, say).
  const char* names[] = {"JIRIKI_CUDA_SPIN", "JIRIKI_CUDA_PARTS", "JIRIKI_CUDA_SQUARE", "JIRIKI_CUDNN_CACHE"};
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  for (const char* n : names) {
    const char* v = std::getenv(n);
    saved.emplace_back(n, v ? std::optional<std::string>(v) : std::nullopt);
    unsetenv(n);
  }
  nn::CudaSettings d = nn::CudaSettings::from_environment();
  CHECK(d.spin);  // waiting threads spin unless told otherwise
  CHECK(d.parts == 0);
  CHECK(d.tower == nn::CudaSettings::Tower::TIMED);
  setenv("JIRIKI_CUDA_SPIN", "0", 1);
  setenv("JIRIKI_CUDA_PARTS", "7", 1);  // clamped to 2
  setenv("JIRIKI_CUDA_SQUARE", "0", 1);
  setenv("JIRIKI_CUDNN_CACHE", "off", 1);
  nn::CudaSettings s = nn::CudaSettings::from_environment();
  CHECK_FALSE(s.spin);
  CHECK(s.parts == 2);
  CHECK(s.tower == nn::CudaSettings::Tower::CUDNN);
  CHECK(s.choice_file.empty());
  setenv("JIRIKI_CUDA_SPIN", "1", 1);
  CHECK(nn::CudaSettings::from_environment().spin);
  for (const auto& [n, v] : saved) v ? setenv(n.c_str(), v->c_str(), 1) : unsetenv(n.c_str());
}
