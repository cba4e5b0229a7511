// Data-parallel training (training/comm.h, training/buckets.h, the replica loop of
// training/trainer.cpp) on CPU replicas: the host collectives, the loader's slices, gradient buckets,
// the update of N replicas against a second implementation written here from the single-replica
// primitives, mpirun against threads, and the tuner end to end.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "nn/model_file.h"
#include "shogi/hcpe.h"
#include "tests/temp_dir.h"
#include "tests/train_configs.h"
#include "training/batch_tuner.h"
#include "training/buckets.h"
#include "training/comm.h"
#include "training/data.h"
#include "training/loader.h"
#include "training/network.h"
#include "training/optimizer.h"
#include "training/trainer.h"

using namespace jiriki;
using namespace jiriki::training;
using jiriki::training::testing::small_train_config;
namespace fs = std::filesystem;
using jiriki::testing::TempDir;

namespace {

// Runs fn(rank, comm) on `ranks` threads of one ThreadGroup.
template <class Fn>
void on_threads(int ranks, Fn fn) {
  ThreadGroup group(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) threads.emplace_back([&, r] { fn(r, group.comm(r)); });
  for (auto& t : threads) t.join();
}

TrainConfig dp_config(const std::string& data, const std::string& out) {
  TrainConfig c = small_train_config(data, out, 1, 8, 8, OptimizerKind::SGD, 0.05);
  c.threads = 1;
  c.optimizer.weight_decay = 1e-4;
  c.clip_grad_norm = 2.0;
  c.check_every = 1;  // every step: the replicas must stay bit-identical
  return c;
}

}  // namespace

TEST_CASE("host collectives: sums in rank order, means, broadcast, equality", "[dp][comm]") {
  for (int ranks : {1, 2, 3, 8}) {
    const size_t n = static_cast<size_t>(ranks);
    std::vector<std::vector<float>> results(n);
    std::vector<int> equal_same(n), equal_diff(n);
    std::vector<double> maxes(n);
    std::vector<std::vector<float>> means(n);
    // Several chunks of the threads' slices, in values whose float sums round: the mean is the
    // rank-order double sum, rounded to float, times 1/ranks in float, the same on every rank.
    // (Computed once: the compiler may contract the same expression differently in two places.)
    std::vector<std::vector<float>> inputs(n, std::vector<float>(10001));
    for (int r = 0; r < ranks; ++r)
      for (size_t i = 0; i < inputs[0].size(); ++i)
        inputs[size_t(r)][i] = float(i) * 0.1f + float(r) * 1e-3f + 1.0f / float(i + 3);
    on_threads(ranks, [&](int r, HostComm& comm) {
      std::vector<float> m = inputs[size_t(r)];
      comm.average(m.data(), m.size());
      means[size_t(r)] = m;
      CHECK(comm.rank() == r);
      CHECK(comm.size() == ranks);
      std::vector<float> v(1001);
      for (size_t i = 0; i < v.size(); ++i) v[i] = float(i) * 0.5f + float(r);  // rank r adds r
      comm.sum(v.data(), v.size());
      results[size_t(r)] = v;
      int64_t token = r == 1 % ranks ? 4242 : -1;
      comm.broadcast(&token, sizeof token, 1 % ranks);
      CHECK(token == 4242);
      equal_same[size_t(r)] = comm.all_equal(77);
      equal_diff[size_t(r)] = comm.all_equal(r == ranks - 1 ? 78 : 77);
      maxes[size_t(r)] = comm.max(double(r * r));
    });
    for (size_t i = 0; i < means[0].size(); ++i) {
      double total = 0;
      for (int r = 0; r < ranks; ++r) total += double(inputs[size_t(r)][i]);
      const float want = float(total) * (1.0f / float(ranks));
      for (int r = 0; r < ranks; ++r)
        if (means[size_t(r)][i] != want)
          FAIL("rank " << r << ", element " << i << ": " << means[size_t(r)][i] << " != " << want);
    }
    const float rank_sum = float(ranks * (ranks - 1) / 2);
    for (int r = 0; r < ranks; ++r) {
      CHECK(results[size_t(r)] == results[0]);  // bit-identical on every rank
      CHECK(results[size_t(r)][10] == float(ranks) * 5.0f + rank_sum);
      CHECK(equal_same[size_t(r)] == 1);
      CHECK(equal_diff[size_t(r)] == (ranks == 1 ? 1 : 0));
      CHECK(maxes[size_t(r)] == double((ranks - 1) * (ranks - 1)));
    }
  }
  // A failed replica does not leave the others waiting forever.
  ThreadGroup group(2);
  std::thread waiter([&] {
    double x = 1;
    CHECK_THROWS_WITH(group.comm(0).sum(&x, 1), Catch::Contains("another replica failed"));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  group.abort();
  waiter.join();
}

TEST_CASE("host collectives: a rank's slice split over its threads gives the same bits", "[dp][comm]") {
  // Large enough that each rank's slice is split over its helpers (from 65536 elements), odd so that
  // no slice or chunk boundary is round. Means against the rank-order double sum computed here;
  // ranges leave the elements between them alone. (9 ranks: the rank count known at run time only.)
  const size_t n = 300007;
  for (int ranks : {2, 3, 4, 9})
    for (int threads : {1, 3}) {
      CAPTURE(ranks, threads);
      const size_t rs = size_t(ranks);
      std::vector<std::vector<float>> in(rs, std::vector<float>(n));
      std::vector<std::vector<double>> din(rs, std::vector<double>(n));
      for (size_t r = 0; r < rs; ++r)
        for (size_t i = 0; i < n; ++i) {
          in[r][i] = std::sin(float(i) * 0.37f + float(r)) * float(1 + i % 7) + 1.0f / float(r + 2);
          din[r][i] = double(in[r][i]) * 1e-3 + double(r);
        }
      const HostComm::Ranges ranges = {{3, 1000}, {2000, 70001}, {80000, n - 80000}};
      std::vector<std::vector<float>> whole(in), parts(in);
      std::vector<std::vector<double>> sums(din);
      ThreadGroup group(ranks, threads);
      REQUIRE(group.threads_per_rank() == threads);
      std::vector<std::thread> workers;
      for (int r = 0; r < ranks; ++r)
        workers.emplace_back([&, r] {
          HostComm& comm = group.comm(r);
          comm.average(whole[size_t(r)].data(), n);
          comm.average_ranges(parts[size_t(r)].data(), ranges);
          comm.sum(sums[size_t(r)].data(), n);
        });
      for (auto& t : workers) t.join();
      auto in_ranges = [&](size_t i) {
        for (const auto& [offset, count] : ranges)
          if (i >= offset && i < offset + count) return true;
        return false;
      };
      size_t wrong = 0;
      for (size_t i = 0; i < n; ++i) {
        double total = 0, dtotal = 0;
        for (size_t r = 0; r < rs; ++r) total += double(in[r][i]), dtotal += din[r][i];
        const float mean = float(total) * (1.0f / float(ranks));
        for (size_t r = 0; r < rs; ++r) {
          wrong += whole[r][i] != mean;
          wrong += parts[r][i] != (in_ranges(i) ? mean : in[r][i]);
          wrong += sums[r][i] != dtotal;
        }
      }
      CHECK(wrong == 0);
    }
  CHECK(ThreadGroup(2).threads_per_rank() >= 1);
  CHECK_THROWS_AS(ThreadGroup(2, -1), std::invalid_argument);
}

TEST_CASE("loader: replica slices partition every global batch", "[dp][data]") {
  TempDir dir("slices");
  REQUIRE(!write_hcpe_file(dir.file("d.hcpe"), random_game_records(4, 25, 3)));  // 100 positions
  const Dataset data = load_dataset({dir.file("d.hcpe")}, {});
  const int b = 6, ranks = 3;
  Loader whole(data, {.batch_size = b * ranks, .seed = 5, .start = 40});
  std::vector<std::unique_ptr<Loader>> parts;
  for (int r = 0; r < ranks; ++r)
    parts.push_back(std::make_unique<Loader>(
        data, LoaderOptions{
                  .batch_size = b, .seed = 5, .start = 40, .stride = uint64_t(b * ranks), .offset = uint64_t(r * b)}));
  for (int j = 0; j < 12; ++j) {  // crosses epoch boundaries (100 positions, 18 a step)
    const Batch* w = whole.acquire();
    for (int r = 0; r < ranks; ++r) {
      const Batch* p = parts[size_t(r)]->acquire();
      REQUIRE(p->size == b);
      for (int i = 0; i < b; ++i) {
        const size_t row = size_t(r * b + i);
        CHECK(std::equal(p->features + size_t(i) * nn::INPUT_SIZE, p->features + size_t(i + 1) * nn::INPUT_SIZE,
                         w->features + row * nn::INPUT_SIZE));
        CHECK(p->value_eval[i] == w->value_eval[row]);
      }
      parts[size_t(r)]->release(p);
    }
    whole.release(w);
  }
  CHECK_THROWS_WITH(Loader(data, {.batch_size = 8, .stride = 16, .offset = 9}),
                    Catch::Contains("past its global batch"));
}

TEST_CASE("buckets: every gradient in exactly one bucket, ready when its stage is done", "[dp][buckets]") {
  nn::Architecture arch;
  arch.blocks = 5;
  arch.channels = 16;
  const nn::Model model(arch);
  // A flat layout like the GPU trainer's: tensors in model order, each start rounded up to 64 floats.
  std::vector<GradientSlot> slots;
  size_t offset = 0;
  for (const auto& t : model.tensors()) {
    if (!t.trainable) continue;
    offset = (offset + 63) / 64 * 64;
    slots.push_back({t.name, offset, t.tensor->size(), backward_stage(t.name, arch.blocks)});
    offset += t.tensor->size();
  }
  CHECK(backward_stage("value.fc1.weight", 5) == 0);
  CHECK(backward_stage("blocks.4.conv1.weight", 5) == 1);
  CHECK(backward_stage("blocks.0.conv2.bn.beta", 5) == 5);
  CHECK(backward_stage("stem.conv.weight", 5) == 6);
  CHECK_THROWS(backward_stage("blocks.5.conv1.weight", 5));

  size_t previous_count = SIZE_MAX;
  for (size_t bucket_floats : {size_t(1), size_t(3000), size_t(20000), size_t(1) << 30}) {
    const std::vector<Bucket> buckets = plan_buckets(slots, bucket_floats, 63);
    CAPTURE(bucket_floats);
    std::map<std::string, int> seen;
    std::vector<int> covered(offset, 0);
    int last_ready = -1;
    for (const Bucket& b : buckets) {
      CHECK(b.ready_stage >= last_ready);  // in the order the backward pass finishes them
      last_ready = b.ready_stage;
      size_t floats = 0;
      for (const auto& [at, count] : b.ranges) {
        for (size_t i = at; i < at + count; ++i) covered[i]++;
        floats += count;
      }
      CHECK(floats == b.floats);
      for (const std::string& name : b.tensors) seen[name]++;
      // Each tensor's floats lie in this bucket's ranges, and its stage is done when the bucket starts.
      for (const GradientSlot& s : slots) {
        if (std::find(b.tensors.begin(), b.tensors.end(), s.name) == b.tensors.end()) continue;
        CHECK(s.stage <= b.ready_stage);
        bool inside = false;
        for (const auto& [at, count] : b.ranges) inside |= s.offset >= at && s.offset + s.count <= at + count;
        CHECK(inside);
      }
    }
    CHECK(seen.size() == slots.size());
    for (const auto& [name, n] : seen) CHECK(n == 1);
    // No float is all-reduced twice, and every gradient float at least once.
    for (const GradientSlot& s : slots)
      for (size_t i = s.offset; i < s.offset + s.count; ++i) REQUIRE(covered[i] == 1);
    for (int c : covered) REQUIRE(c <= 1);
    CHECK(buckets.size() <= previous_count);
    previous_count = buckets.size();
  }
  CHECK(plan_buckets(slots, 1, 63).size() == 7);  // one bucket per stage: heads, 5 blocks, stem
  CHECK(plan_buckets(slots, size_t(1) << 30, 63).size() == 1);
}

// The update of N replicas against a second implementation: N model copies, each computing its
// slice's gradients with the single-replica primitives (its own batch-norm statistics), the
// gradients averaged here by hand, the same optimizer step on every copy; at the end the running
// statistics averaged. This is "one replica on the combined batch" with batch norm per slice, which
// is what per-replica batch norm means.
TEST_CASE("data parallel: N replicas (threads, host all-reduce) make the update of one on the combined batch",
          "[dp][run]") {
  TempDir dir("update");
  REQUIRE(!write_hcpe_file(dir.file("d.hcpe"), random_game_records(6, 30, 21)));  // 180 positions
  const Dataset data = load_dataset({dir.file("d.hcpe")}, {});
  for (int ranks : {2, 4, 8}) {
    CAPTURE(ranks);
    TrainConfig c = dp_config(dir.file("d.hcpe"), dir.file("dp.bin"));
    c.replicas = ranks;
    c.steps = 5;
    const TrainResult r = train(c);
    CHECK(r.step == c.steps);
    const nn::Model trained = nn::load_model(c.model_out);

    nn::Model start(c.arch);
    nn::init_model(start, c.seed);
    std::vector<nn::Model> copies(static_cast<size_t>(ranks), start);
    std::vector<Optimizer> optimizers;
    for (auto& m : copies) optimizers.emplace_back(c.optimizer, m);
    ThreadPool pool(1);
    Loader slices(data, {.batch_size = c.batch, .seed = c.seed});  // consecutive slices = replica 0, 1, ...
    for (int step = 0; step < c.steps; ++step) {
      nn::Model mean(c.arch);
      zero_tensors(mean);  // (a fresh Model has gamma and var 1)
      for (int k = 0; k < ranks; ++k) {
        const Batch* b = slices.acquire();
        Workspace ws(c.arch, c.batch);
        compute_gradients(copies[size_t(k)], ws, *b, c.val_lambda, c.bn_momentum, 1.0f / float(c.batch), pool);
        slices.release(b);
        auto to = mean.tensors();
        auto from = ws.grads.tensors();
        for (size_t t = 0; t < to.size(); ++t)
          for (size_t i = 0; i < to[t].tensor->size(); ++i)
            to[t].tensor->data[i] += from[t].tensor->data[i] / float(ranks);
      }
      const double norm = gradient_norm(mean);
      if (norm > c.clip_grad_norm) scale_gradients(mean, float(c.clip_grad_norm / norm));
      for (int k = 0; k < ranks; ++k) optimizers[size_t(k)].step(copies[size_t(k)], mean, c.schedule.lr);
    }
    nn::Model expected = copies[0];
    auto e = expected.tensors();
    for (size_t t = 0; t < e.size(); ++t) {
      if (e[t].trainable) continue;
      for (size_t i = 0; i < e[t].tensor->size(); ++i) {
        double s = 0;
        for (auto& m : copies) s += m.tensors()[t].tensor->data[i];
        e[t].tensor->data[i] = float(s / ranks);
      }
    }
    // Equal up to the order of float additions in the average (the all-reduce sums in double).
    auto got = trained.tensors();
    double worst = 0;
    std::string worst_tensor;
    for (size_t t = 0; t < e.size(); ++t)
      for (size_t i = 0; i < e[t].tensor->size(); ++i) {
        const double d = std::abs(double(got[t].tensor->data[i]) - e[t].tensor->data[i]) /
                         (1e-3 + std::abs(double(e[t].tensor->data[i])));
        if (d > worst) worst = d, worst_tensor = e[t].name;
      }
    CAPTURE(worst_tensor);
    CHECK(worst < 1e-4);
    // And the weights really moved: the comparison is not between two untouched copies of `start`.
    double moved = 0;
    for (size_t t = 0; t < e.size(); ++t)
      if (e[t].trainable)
        for (size_t i = 0; i < e[t].tensor->size(); ++i)
          moved = std::max(moved, double(std::abs(got[t].tensor->data[i] - start.tensors()[t].tensor->data[i])));
    CHECK(moved > 1e-3);
  }
}

TEST_CASE("data parallel: mpirun -np 2 gives the threaded launch's weights", "[dp][mpi]") {
  const std::string mpirun = JIRIKI_MPIRUN;
  if (mpirun.empty()) {
    WARN("skipped: this build has no MPI (install libopenmpi-dev and openmpi-bin)");
    return;
  }
  TempDir dir("mpi");
  REQUIRE(!write_hcpe_file(dir.file("d.hcpe"), random_game_records(4, 30, 5)));
  const std::string common = " train --data " + dir.file("d.hcpe") +
                             " --blocks 1 --channels 8 --batch 8 --steps 6 --lr 0.05 --schedule constant"
                             " --threads 1 --check-every 1 --log-every 3 --backend cpu";
  const std::string threaded =
      std::string(JIRIKI_BINARY) + common + " --replicas 2 --model-out " + dir.file("t.bin") + " > /dev/null 2>&1";
  REQUIRE(WEXITSTATUS(std::system(threaded.c_str())) == 0);
  // As root (CI), OpenMPI wants both variables; --oversubscribe lets 2 ranks share fewer cores.
  // Under AddressSanitizer (the asan preset) the ranks' leak check is off: OpenMPI's own plugins
  // leak at exit from code dlclose has unloaded, which no suppression can name. The threaded run
  // above keeps the check on the same training code.
  const std::string launched =
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
      "ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0\" " +
      mpirun + " --oversubscribe -np 2 " + JIRIKI_BINARY + common + " --model-out " + dir.file("m.bin") + " > " +
      dir.file("mpi.txt") + " 2>&1";
  const int rc = WEXITSTATUS(std::system(launched.c_str()));
  std::ifstream out(dir.file("mpi.txt"));
  const std::string text((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
  INFO(text);
  REQUIRE(rc == 0);
  const nn::Model a = nn::load_model(dir.file("t.bin")), b = nn::load_model(dir.file("m.bin"));
  auto ta = a.tensors(), tb = b.tensors();
  for (size_t t = 0; t < ta.size(); ++t) {
    CAPTURE(ta[t].name);
    CHECK(ta[t].tensor->data == tb[t].tensor->data);  // bit for bit: two ranks sum in the same order
  }
  CHECK_THAT(text, Catch::Contains("2 replicas"));
}

TEST_CASE("data parallel: --batch auto measures, decides by goodput and logs its table", "[dp][tuner]") {
  TempDir dir("auto");
  REQUIRE(!write_hcpe_file(dir.file("d.hcpe"), random_game_records(6, 30, 8)));
  TrainConfig c = dp_config(dir.file("d.hcpe"), dir.file("auto.bin"));
  c.log = dir.file("log.jsonl");
  c.replicas = 2;
  c.batch_auto = true;
  c.batch = 4;
  c.tune_min = 2;
  c.tune_max = 16;
  c.tune_reps = 2;
  c.tune_every = 10;
  c.noise_every = 1;  // the estimator is ready after 20 samples
  c.steps = 60;       // 60 steps of the starting global batch (8): 480 samples, whatever the tuner picks
  const TrainResult r = train(c);
  std::ifstream log(c.log);
  std::set<int> timed;
  int decisions = 0;
  int64_t last_samples = 0;
  double seconds = 0;  // the set-ups, timings and decisions happen in the order they are logged
  for (std::string line; std::getline(log, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("seconds") && j["type"] != "done") {
      CHECK(j["seconds"].get<double>() >= seconds);
      seconds = j["seconds"].get<double>();
    }
    if (j["type"] == "device") CHECK(j["setup_seconds"].get<double>() <= j["seconds"].get<double>());
    if (j["type"] == "tuner_cost") timed.insert(j["batch"].get<int>());
    if (j["type"] == "train") last_samples = j["samples"].get<int64_t>();
    if (j["type"] != "tuner") continue;
    ++decisions;
    // The best is the row of highest goodput, each row's goodput its rate times efficiency; the run
    // moves to it unless the batch it has is within 5% of its goodput.
    double best = -1, current = -1;
    int best_batch = 0;
    for (const auto& row : j["table"]) {
      CHECK(row["goodput"].get<double>() ==
            Approx(row["samples_per_second"].get<double>() * row["efficiency"].get<double>()));
      CHECK(row["efficiency"].get<double>() <= 1.0 + 1e-9);
      if (row["goodput"].get<double>() > best) best = row["goodput"], best_batch = row["batch"];
      if (row["batch"] == j["previous_batch"]) current = row["goodput"];
    }
    CHECK(j["best"].get<int>() == best_batch);
    CHECK(j["batch"].get<int>() == (best < 1.05 * current ? j["previous_batch"].get<int>() : best_batch));
    CHECK(std::isfinite(j["noise_scale"].get<double>()));
  }
  CHECK(timed == std::set<int>{4, 16});  // timed_batches of 2, 4, 8, 16 starting at 4
  CHECK(decisions >= 1);
  CHECK(last_samples >= 480);
  CHECK(std::isfinite(r.noise_scale));
  CHECK(nn::load_model(c.model_out).arch.blocks == 1);
}

TEST_CASE("one replica waits for its noise scale before the tuner's first decision", "[dp][tuner]") {
  // --noise-every 5 with the estimator's 20 samples: they are taken by step 100, so the decisions due
  // at steps 20-80 are skipped and the batch stays at its start until then, rather than going to the
  // largest candidate on throughput alone. At 16 (halves of 8) |G|^2 comes out positive and every
  // decision has a noise scale; at 4 (halves of 2) it stays lost in the noise, and from step 100 the
  // tuner decides on throughput alone (an unresolvable noise scale: large batches lose nothing).
  TempDir dir("wait_noise");
  REQUIRE(!write_hcpe_file(dir.file("d.hcpe"), random_game_records(12, 40, 11)));
  for (const int start : {16, 4}) {
    INFO("starting batch " << start);
    TrainConfig c = dp_config(dir.file("d.hcpe"), dir.file("m.bin"));
    c.log = dir.file("m" + std::to_string(start) + ".jsonl");
    c.replicas = 1;
    c.batch_auto = true;
    c.batch = start;
    c.tune_min = start;
    c.tune_max = 32;
    c.tune_reps = 1;
    c.tune_every = 20;
    c.noise_every = 5;
    c.log_every = 10;
    c.steps = 150;
    const TrainResult r = train(c);
    CHECK(std::isfinite(r.noise_scale) == (start == 16));
    std::ifstream log(c.log);
    int decisions = 0;
    for (std::string line; std::getline(log, line);) {
      const auto j = nlohmann::json::parse(line);
      if (j["type"] == "train" && j["step"].get<int64_t>() < 100) CHECK(j["batch"].get<int>() == start);
      if (j["type"] != "tuner") continue;
      ++decisions;
      INFO("decision at step " << j["step"]);
      CHECK(j["step"].get<int64_t>() >= 100);
      CHECK(j["noise_scale"].is_number() == (start == 16));
      if (start == 4)  // throughput alone: every candidate at full efficiency
        for (const auto& row : j["table"]) CHECK(row["efficiency"].get<double>() == 1.0);
    }
    CHECK(decisions >= 1);
  }
}

TEST_CASE("data parallel: --noise-halves logs the halves' noise scale beside the replicas' and trains the same weights",
          "[dp][tuner]") {
  TempDir dir("noise_halves");
  REQUIRE(!write_hcpe_file(dir.file("d.hcpe"), random_game_records(12, 40, 13)));
  std::vector<nn::Model> trained;
  for (const bool halves : {false, true}) {
    INFO("noise_halves " << halves);
    TrainConfig c = dp_config(dir.file("d.hcpe"), dir.file(halves ? "h.bin" : "p.bin"));
    c.log = dir.file(halves ? "h.jsonl" : "p.jsonl");
    c.replicas = 2;
    c.batch = 16;
    c.noise_every = 2;
    c.noise_halves = halves;
    c.log_every = 10;
    c.steps = 120;
    train(c);
    trained.push_back(nn::load_model(c.model_out));
    std::ifstream log(c.log);
    int both = 0, halves_logged = 0;
    for (std::string line; std::getline(log, line);) {
      const auto j = nlohmann::json::parse(line);
      if (j["type"] != "train") continue;
      halves_logged += j.contains("noise_scale_halves");
      both +=
          j.contains("noise_scale_halves") && j.contains("noise_scale") && j["noise_scale_halves"].get<double>() > 0;
    }
    if (halves) CHECK(both >= 3);  // ready after 20 samples (step 40), logged every 10 steps
    else CHECK(halves_logged == 0);
  }
  // The halves' pass changes nothing: no update, batch-norm momentum 0.
  auto ta = trained[0].tensors(), tb = trained[1].tensors();
  for (size_t t = 0; t < ta.size(); ++t) {
    CAPTURE(ta[t].name);
    CHECK(ta[t].tensor->data == tb[t].tensor->data);
  }
}

TEST_CASE("data parallel: bad options are refused with a message", "[dp][run]") {
  TempDir dir("options");
  REQUIRE(!write_hcpe_file(dir.file("d.hcpe"), random_game_records(1, 20, 2)));
  TrainConfig c = dp_config(dir.file("d.hcpe"), dir.file("x.bin"));
  c.replicas = 0;
  CHECK_THROWS_WITH(train(c), Catch::Contains("--replicas"));
  c.replicas = 2;
  c.allreduce = AllReduce::NCCL;
  CHECK_THROWS_WITH(train(c), Catch::Contains("--allreduce nccl needs --backend cuda"));
  CHECK_THROWS_WITH(parse_allreduce("smoke"), Catch::Contains("unknown --allreduce 'smoke'"));
  CHECK(parse_allreduce("host") == AllReduce::HOST);
  c.allreduce = AllReduce::HOST;
  c.gpus = {0, 1};
  CHECK_THROWS_WITH(train(c), Catch::Contains("--gpus needs --backend cuda"));
}

TEST_CASE("noise scale with one replica: batch halves give the estimate that two replicas give", "[dp][tuner]") {
  // The same data, network, learning rate and global batch 16: one replica measuring the first 8 of
  // each batch against all 16, and two replicas of 8 each measuring their own gradients against the
  // average. Both are McCandlish's two-batch estimate at 8 and 16, so they must agree within their
  // noise; the one-replica tuner then decides on it rather than on throughput alone.
  TempDir dir("half_noise");
  REQUIRE(!write_hcpe_file(dir.file("d.hcpe"), random_game_records(12, 40, 9)));
  auto run = [&](int replicas, const std::string& name) {
    TrainConfig c = dp_config(dir.file("d.hcpe"), dir.file(name + ".bin"));
    c.log = dir.file(name + ".jsonl");
    c.replicas = replicas;
    c.batch_auto = true;
    c.batch = 16 / replicas;
    c.tune_min = 16 / replicas;
    c.tune_max = 32 / replicas;
    c.tune_reps = 1;
    c.tune_every = 140;  // one decision, near the end: the batch is 16 until then
    c.noise_every = 1;
    c.steps = 150;
    return train(c);
  };
  const TrainResult one = run(1, "one"), two = run(2, "two");
  INFO("one replica " << one.noise_scale << ", two replicas " << two.noise_scale);
  REQUIRE(std::isfinite(one.noise_scale));
  REQUIRE(std::isfinite(two.noise_scale));
  CHECK(one.noise_scale > 0);
  CHECK(one.noise_scale / two.noise_scale == Approx(1.0).margin(0.5));
  // The one-replica tuner's decision (at step 140) used the estimate.
  std::ifstream log(dir.file("one.jsonl"));
  int decisions = 0;
  for (std::string line; std::getline(log, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["type"] != "tuner") continue;
    ++decisions;
    CHECK(std::isfinite(j["noise_scale"].get<double>()));
  }
  CHECK(decisions >= 1);
}
