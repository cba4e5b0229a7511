// engine/network_setup.h: the backend name is resolved once per set-up (nn::backend_resolutions
// counts the calls), the defaults follow the resolved backend, the cores are shared between the
// evaluators, and the lines the commands print say what was set up.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "common/cpus.h"
#include "engine/network_setup.h"
#include "nn/shipped_networks.h"
#include "tests/usi_session.h"
#include "usi/engine.h"

using namespace jiriki;
using Catch::Matchers::Contains;

namespace {

// The lines up to readyok after `isready`.
std::vector<std::string> ready(usi::Engine& engine, testing::UsiLines& lines) {
  engine.command("isready");
  std::vector<std::string> out;
  for (;;) {
    auto l = lines.next(30000);
    REQUIRE(l);
    if (*l == "readyok") return out;
    out.push_back(*l);
  }
}

int count_prefix(const std::vector<std::string>& lines, const std::string& prefix) {
  return int(std::count_if(lines.begin(), lines.end(), [&](const std::string& l) { return l.rfind(prefix, 0) == 0; }));
}

}  // namespace

TEST_CASE("network set-up: the USI engine resolves its backend once per set-up and prints one backend line",
          "[network][usi]") {
  testing::UsiLines lines;
  usi::Engine engine{lines.stream};
  engine.command("setoption name ModelFile value " + testing::tiny_model_path());
  int64_t before = nn::backend_resolutions();
  std::vector<std::string> out = ready(engine, lines);
  CHECK(nn::backend_resolutions() - before == 1);
  CHECK(count_prefix(out, "info string backend: ") == 1);
  CHECK(count_prefix(out, "info string network: " + testing::tiny_model_path() + " (1 blocks x 16 channels") == 1);

  // Nothing changed: the network stays, nothing is resolved.
  before = nn::backend_resolutions();
  out = ready(engine, lines);
  CHECK(nn::backend_resolutions() == before);
  CHECK(count_prefix(out, "info string backend: ") == 0);

  // A changed Threads is a new set-up: one more resolution, and the line says the new count.
  engine.command("setoption name Threads value 1");
  out = ready(engine, lines);
  CHECK(nn::backend_resolutions() - before == 1);
  REQUIRE(count_prefix(out, "info string backend: ") == 1);
  for (const auto& l : out)
    if (l.rfind("info string backend: ", 0) == 0) CHECK_THAT(l, Contains(", 1 search threads"));
  engine.command("quit");
}

TEST_CASE("network set-up: defaults follow the resolved backend, and the evaluators share the cores", "[network]") {
  engine::NetworkSettings s;
  s.model = testing::tiny_model_path();
  s.backend = "reference";
  s.cpu_cores = 6;
  s.cuda = {};
  const int64_t before = nn::backend_resolutions();
  const engine::NetworkSetup n = engine::NetworkSetup::resolve(s);
  CHECK(nn::backend_resolutions() - before == 1);
  CHECK(n.backend.kind == nn::BackendKind::REFERENCE);
  CHECK(n.backend.reason == "asked for");
  CHECK_FALSE(n.on_gpu());
  CHECK(n.batch() == 16);
  const int evaluators = std::min(2, usable_cpus().count);
  CHECK(n.evaluators() == evaluators);
  const nn::BackendOptions o = n.evaluator_options();
  CHECK(o.kind == nn::BackendKind::REFERENCE);
  CHECK(o.max_batch == 16);
  CHECK(o.threads == 6 / evaluators);
  CHECK(n.evaluator_options(5).max_batch == 5);

  const nn::Model model = n.load_model();
  CHECK(model.arch.blocks == 1);
  CHECK(model.arch.channels == 16);
  CHECK(n.network_line(model) == "network: " + testing::tiny_model_path() + " (1 blocks x 16 channels, relu)");
  auto queue = n.make_queue(model);
  CHECK(queue->max_batch() == 16);
  // The search threads each run an evaluator of their own; more clients than evaluators share workers.
  CHECK(queue->dispatch() == search::Dispatch::CALLER);
  CHECK(n.make_queue(model, evaluators)->dispatch() == search::Dispatch::CALLER);
  CHECK(n.make_queue(model, evaluators + 1)->dispatch() == search::Dispatch::WORKERS);
  CHECK(n.queue_line(*queue) ==
        "backend: " + queue->name() + " (asked for), batch 16, " + std::to_string(evaluators) + " search threads");
  CHECK(n.make_evaluator(model, 3)->max_batch() == 3);
  // Loading, building and describing resolve nothing more.
  CHECK(nn::backend_resolutions() - before == 1);

  // A set-up resolved to the GPU (given here: no GPU needed) takes the GPU's defaults.
  const engine::NetworkSetup gpu{s, {nn::BackendKind::CUDA, "given"}};
  CHECK(gpu.on_gpu());
  CHECK(gpu.batch() == 128);
  CHECK(gpu.evaluators() == 8);
  CHECK(gpu.evaluator_options().threads == 1);  // 6 cores among 8 evaluators: one each at least

  // What the settings say wins over the defaults.
  s.batch = 7;
  s.evaluators = 3;
  s.cpu_threads = 5;
  const engine::NetworkSetup given{s, n.backend};
  CHECK(given.batch() == 7);
  CHECK(given.evaluators() == 3);
  CHECK(given.evaluator_options().threads == 5);

  s.backend = "tpu";
  CHECK_THROWS_WITH(engine::NetworkSetup::resolve(s), Contains("unknown backend 'tpu'"));
}

TEST_CASE("network set-up: the default network is the shipped one for the backend, or the untrained stand-in",
          "[network]") {
  engine::NetworkSettings s;
  s.backend = "reference";
  const engine::NetworkSetup n = engine::NetworkSetup::resolve(s);
  const nn::Model model = n.load_model();
  const std::string line = n.network_line(model);
  if (nn::shipped_network(false)) {
    CHECK_THAT(line, Contains("network: the shipped networks/cpu.jnn"));
  } else {
    CHECK_THAT(line, Contains("UNTRAINED"));
    CHECK(model.arch.blocks == engine::DEFAULT_MODEL_BLOCKS);
    CHECK(model.arch.channels == engine::DEFAULT_MODEL_CHANNELS);
  }
}
