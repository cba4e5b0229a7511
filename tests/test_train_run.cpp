// The trainer end to end (training/): data files to batches, corrupt data, the optimizers and the
// schedule by hand, checkpoints, overfitting a few hundred positions, exact resume, and the
// `jiriki train` command. Data comes from random legal games played with the rules core.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>

#include "common/fnv1a.h"
#include "nn/features.h"
#include "nn/model_file.h"
#include "shogi/hcpe.h"
#include "shogi/hcpe3.h"
#include "shogi/movegen.h"
#include "tests/nn_random.h"
#include "tests/temp_dir.h"
#include "tests/train_configs.h"
#include "training/checkpoint.h"
#include "training/conv_choices.h"
#include "training/data.h"
#include "training/loader.h"
#include "training/network.h"
#include "training/teacher.h"
#include "training/trainer.h"
#include "training/tuner_file.h"

using namespace jiriki;
using namespace jiriki::training;
using jiriki::training::testing::small_train_config;
namespace fs = std::filesystem;
using jiriki::testing::TempDir;

namespace {

// A random hcpe3 game: two moves in three carry candidates (the played move and up to three
// other legal moves, with visit counts), the third none (not for training).
Hcpe3Game random_hcpe3_game(std::mt19937_64& rng, int plies, uint8_t result) {
  Hcpe3Game g;
  Position pos;
  g.start = encode_hcp(pos);
  g.result = result;
  for (int p = 0; p < plies; ++p) {
    MoveList moves = legal_moves(pos);
    if (moves.size() == 0) break;
    Hcpe3Move hm;
    hm.move = moves.moves[rng() % moves.size()];
    hm.eval = int16_t(int(rng() % 1001) - 500);
    if (p % 3 != 2) {
      std::set<Move> used = {hm.move};
      hm.candidates.push_back({hm.move, uint16_t(10 + rng() % 20)});
      for (int k = 0; k < 3; ++k) {
        Move o = moves.moves[rng() % moves.size()];
        if (used.insert(o).second) hm.candidates.push_back({o, uint16_t(1 + rng() % 9)});
      }
    }
    g.moves.push_back(hm);
    pos.do_move(hm.move);
  }
  return g;
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

std::vector<uint8_t> hcpe_bytes(const std::vector<HcpeRecord>& records) {
  const auto* p = reinterpret_cast<const uint8_t*>(records.data());
  return std::vector<uint8_t>(p, p + records.size() * sizeof(HcpeRecord));
}

// A hash of one built sample (features, targets): identifies positions in a batch.
uint64_t sample_hash(const Batch& b, int row) {
  uint64_t h = fnv1a64(reinterpret_cast<const uint8_t*>(b.features + int64_t(row) * nn::INPUT_SIZE),
                       nn::INPUT_SIZE * sizeof(float));
  h ^= fnv1a64(reinterpret_cast<const uint8_t*>(b.policy_target + int64_t(row) * nn::POLICY_SIZE),
               nn::POLICY_SIZE * sizeof(float)) *
       31;
  return h ^ uint64_t(b.value_eval[row] * 1e6f) * 1000003;
}

std::vector<uint64_t> stream_hashes(const Dataset& d, LoaderOptions o, int batches) {
  Loader loader(d, o);
  std::vector<uint64_t> out;
  for (int i = 0; i < batches; ++i) {
    const Batch* b = loader.acquire();
    for (int r = 0; r < b->size; ++r) out.push_back(sample_hash(*b, r));
    loader.release(b);
  }
  return out;
}

bool same_weights(const nn::Model& a, const nn::Model& b) {
  auto ta = a.tensors(), tb = b.tensors();
  for (size_t i = 0; i < ta.size(); ++i)
    if (ta[i].tensor->data != tb[i].tensor->data) return false;
  return true;
}

// The records of one type in a training log (one JSON object a line).
std::vector<nlohmann::json> log_records(const std::string& path, const std::string& type) {
  std::vector<nlohmann::json> out;
  std::ifstream log(path);
  for (std::string line; std::getline(log, line);)
    if (auto j = nlohmann::json::parse(line); j["type"] == type) out.push_back(j);
  return out;
}

// A small, quick configuration shared by the run tests.
TrainConfig tiny_config(const std::string& data, const std::string& out) {
  TrainConfig c = small_train_config(data, out, 1, 8, 32, OptimizerKind::ADAMW, 3e-3);
  c.threads = 2;
  return c;
}

}  // namespace

TEST_CASE("data: records become the inputs and targets they describe", "[train][data]") {
  TempDir dir("targets");
  std::mt19937_64 rng(1);
  // Game 1: Black won; game 2: a draw by the maximum length (read as a draw whatever bits 0-1 say).
  std::vector<Hcpe3Game> games = {random_hcpe3_game(rng, 12, BLACK_WIN),
                                  random_hcpe3_game(rng, 9, uint8_t(WHITE_WIN | hcpe3::MAX_MOVES))};
  REQUIRE(!write_hcpe3_file(dir.file("a.hcpe3"), games));
  auto records = random_game_records(2, 10, 2);
  REQUIRE(!write_hcpe_file(dir.file("b.hcpe"), records));

  Dataset d = load_dataset({dir.path.string()}, {});
  CHECK(d.issues.empty());
  CHECK(d.files.size() == 2);
  CHECK(d.positions.size() == 8 + 6 + records.size());  // hcpe3: moves with candidates only

  Batch b;
  b.allocate(1);
  Position scratch;
  size_t k = 0;
  auto check_common = [&](const Position& pos, int16_t eval) {
    std::vector<float> planes(nn::INPUT_SIZE);
    nn::encode_features(pos, planes.data());
    CHECK(std::equal(planes.begin(), planes.end(), b.features));
    double sum = 0;
    for (int i = 0; i < nn::POLICY_SIZE; ++i) sum += b.policy_target[i];
    CHECK(sum == Approx(1.0).epsilon(1e-6));
    CHECK(b.value_eval[0] == Approx(1.0 / (1.0 + std::exp(-eval / 756.0864962951762))).epsilon(1e-6));
  };
  // The hcpe3 file is read first or second depending on modification times; find it by count.
  for (const std::string& f : d.files) {
    if (f.ends_with(".hcpe3")) {
      for (size_t g = 0; g < games.size(); ++g) {
        Position pos;
        for (size_t p = 0; p < games[g].moves.size(); ++p) {
          const Hcpe3Move& m = games[g].moves[p];
          if (!m.candidates.empty()) {
            build_sample(d, uint32_t(k++), b, 0, scratch);
            check_common(pos, m.eval);
            double total = 0;
            for (auto& c : m.candidates) total += c.visits;
            for (auto& c : m.candidates)
              CHECK(b.policy_target[nn::move_to_label(Move(c.move16), pos.side_to_move())] == Approx(c.visits / total));
            // Game 1 was won by Black, who moves at even plies; game 2 is a draw.
            CHECK(b.value_result[0] == (g == 1 ? 0.5f : p % 2 == 0 ? 1.0f : 0.0f));
          }
          pos.do_move(m.move);
        }
      }
    } else {
      for (const HcpeRecord& r : records) {
        Position pos;
        REQUIRE(!decode_hcp(r.hcp, pos));
        build_sample(d, uint32_t(k++), b, 0, scratch);
        check_common(pos, r.eval);
        CHECK(b.policy_target[nn::move_to_label(Move(r.move16), pos.side_to_move())] == 1.0f);
        const float expected = r.result == DRAW                                           ? 0.5f
                               : (r.result == BLACK_WIN) == (pos.side_to_move() == BLACK) ? 1.0f
                                                                                          : 0.0f;
        CHECK(b.value_result[0] == expected);
      }
    }
  }
  CHECK(k == d.positions.size());
}

TEST_CASE("loader: every epoch is a permutation, the same for any thread count and start", "[train][data]") {
  TempDir dir("loader");
  REQUIRE(!write_hcpe_file(dir.file("a.hcpe"), random_game_records(5, 10, 3)));
  Dataset d = load_dataset({dir.file("a.hcpe")}, {});
  const size_t n = d.positions.size();
  REQUIRE(n == 50);

  // Each dataset position's hash, to recognise it in batches.
  std::multiset<uint64_t> all;
  Batch one;
  one.allocate(1);
  Position scratch;
  for (uint32_t i = 0; i < n; ++i) {
    build_sample(d, i, one, 0, scratch);
    all.insert(sample_hash(one, 0));
  }

  LoaderOptions o{.batch_size = 8, .seed = 3, .threads = 1};
  const auto s1 = stream_hashes(d, o, 20);  // 160 positions: three epochs and a bit
  for (int e = 0; e < 3; ++e) CHECK(std::multiset<uint64_t>(s1.begin() + e * n, s1.begin() + (e + 1) * n) == all);
  CHECK(!std::equal(s1.begin(), s1.begin() + n, s1.begin() + n));  // each epoch its own order

  o.threads = 3;
  CHECK(stream_hashes(d, o, 20) == s1);
  o.start = 13;  // a resumed stream continues exactly, batch-aligned or not
  const auto later = stream_hashes(d, o, 10);
  CHECK(std::equal(later.begin(), later.end(), s1.begin() + 13));

  // Unshuffled with an end: file order, a short last batch, then the end of the stream.
  Loader ordered(d, {.batch_size = 16, .shuffle = false, .end = n, .threads = 2});
  int batches = 0, positions = 0;
  while (const Batch* b = ordered.acquire()) {
    ++batches, positions += b->size;
    ordered.release(b);
  }
  CHECK(batches == 4);
  CHECK(positions == 50);

  // Mirror images: each sample is its position or that position's image, about half of them
  // images, the same for any thread count.
  std::set<uint64_t> images;
  for (uint32_t i = 0; i < n; ++i) {
    build_sample(d, i, one, 0, scratch, true);
    images.insert(sample_hash(one, 0));
  }
  o = {.batch_size = 8, .seed = 3, .threads = 1, .mirror = true};
  const auto m1 = stream_hashes(d, o, 20);
  int imaged = 0;
  for (uint64_t h : m1) {
    const bool plain = all.count(h) > 0, image = images.count(h) > 0;
    CHECK((plain || image));
    imaged += image && !plain;
  }
  CHECK(imaged > 50);
  CHECK(imaged < 110);
  o.threads = 3;
  CHECK(stream_hashes(d, o, 20) == m1);
}

TEST_CASE("data: a window keeps the newest positions", "[train][data]") {
  TempDir dir("window");
  auto old_records = random_game_records(2, 10, 4), new_records = random_game_records(3, 10, 5);
  REQUIRE(!write_hcpe_file(dir.file("z_old.hcpe"), old_records));
  REQUIRE(!write_hcpe_file(dir.file("a_new.hcpe"), new_records));
  // Newest by modification time, not by name.
  fs::last_write_time(dir.file("z_old.hcpe"), fs::last_write_time(dir.file("a_new.hcpe")) - std::chrono::hours(1));

  Dataset d = load_dataset({dir.path.string()}, {.window = int64_t(new_records.size()) + 5});
  REQUIRE(d.positions.size() == new_records.size() + 5);
  for (int i = 0; i < 5; ++i) CHECK(d.positions[i].record == old_records[old_records.size() - 5 + i]);
  for (size_t i = 0; i < new_records.size(); ++i) CHECK(d.positions[5 + i].record == new_records[i]);
  CHECK(load_dataset({dir.path.string()}, {}).positions.size() == old_records.size() + new_records.size());
}

TEST_CASE("data: corrupt and truncated files are reported with file and offset and skipped", "[train][data]") {
  TempDir dir("corrupt");
  // hcpe: record 3 is not a position, record 5's move is illegal, record 7's result byte is 3,
  // and 17 stray bytes end the file.
  auto records = random_game_records(1, 10, 6);
  records[3].hcp.data.fill(0xff);
  records[5].move16 = records[4].move16;  // the other side's move: its origin is empty now
  records[7].result = 3;
  auto bytes = hcpe_bytes(records);
  bytes.insert(bytes.end(), 17, 0);
  const std::string hcpe = dir.file("bad.hcpe");
  write_bytes(hcpe, bytes);

  // hcpe3: three games; in one file the second has an illegal move, another file ends inside the
  // second game, a third has a training move whose candidates have no visits.
  std::mt19937_64 rng(7);
  std::vector<Hcpe3Game> games = {random_hcpe3_game(rng, 8, BLACK_WIN), random_hcpe3_game(rng, 8, WHITE_WIN),
                                  random_hcpe3_game(rng, 8, DRAW)};
  std::vector<uint8_t> first;
  append_hcpe3(games[0], first);
  Hcpe3Game illegal = games[1];
  illegal.moves[4].move = illegal.moves[3].move;  // a move of the other side
  std::vector<uint8_t> with_illegal = first, truncated = first, all3;
  append_hcpe3(illegal, with_illegal);
  append_hcpe3(games[2], with_illegal);
  for (auto& g : games) append_hcpe3(g, all3);
  truncated.insert(truncated.end(), all3.begin() + first.size(), all3.begin() + first.size() + 50);
  write_bytes(dir.file("illegal.hcpe3"), with_illegal);
  write_bytes(dir.file("truncated.hcpe3"), truncated);
  Hcpe3Game no_visits = games[0];
  for (auto& c : no_visits.moves[1].candidates) c.visits = 0;
  std::vector<uint8_t> zero;
  append_hcpe3(no_visits, zero);
  write_bytes(dir.file("zero.hcpe3"), zero);

  auto issues_of = [](const Dataset& d) {
    std::map<uint64_t, std::string> m;
    for (auto& i : d.issues) m[i.offset] = i.to_string();
    return m;
  };

  Dataset h = load_dataset({hcpe}, {});
  CHECK(h.positions.size() == 7);
  auto hi = issues_of(h);
  REQUIRE(hi.size() == 4);
  CHECK_THAT(hi[3 * 38],
             Catch::Contains(hcpe) && Catch::Contains("byte offset 114") && Catch::Contains("bad position"));
  CHECK_THAT(hi[5 * 38], Catch::Contains("not legal"));
  CHECK_THAT(hi[7 * 38], Catch::Contains("result"));
  CHECK_THAT(hi[10 * 38], Catch::Contains("truncated"));

  const size_t trained_per_game = 6;  // 8 moves, those at plies 2 and 5 carry no candidates
  Dataset i = load_dataset({dir.file("illegal.hcpe3")}, {});
  CHECK(i.positions.size() == trained_per_game);  // the first game only
  REQUIRE(i.issues.size() == 1);
  CHECK(i.issues[0].offset == first.size());
  CHECK_THAT(i.issues[0].to_string(), Catch::Contains("illegal.hcpe3") && Catch::Contains("illegal move"));

  Dataset t = load_dataset({dir.file("truncated.hcpe3")}, {});
  CHECK(t.positions.size() == trained_per_game);
  REQUIRE(t.issues.size() == 1);
  CHECK(t.issues[0].offset == first.size());
  CHECK_THAT(t.issues[0].message, Catch::Contains("truncated"));

  Dataset z = load_dataset({dir.file("zero.hcpe3")}, {});
  CHECK(z.positions.size() == trained_per_game - 1);
  REQUIRE(z.issues.size() == 1);
  CHECK(z.issues[0].offset == 36 + 6 + 4 * games[0].moves[0].candidates.size());  // the second move

  // A file with nothing usable in it is an error, not an empty run.
  write_bytes(dir.file("empty.hcpe"), std::vector<uint8_t>(20, 0));
  CHECK_THROWS_WITH(load_dataset({dir.file("empty.hcpe")}, {}), Catch::Contains("no training positions"));
}

TEST_CASE("data: paths, directories and glob patterns", "[train][data]") {
  TempDir dir("paths");
  fs::create_directories(dir.path / "sub");
  REQUIRE(!write_hcpe_file(dir.file("a.hcpe"), random_game_records(1, 3, 8)));
  std::mt19937_64 rng(9);
  REQUIRE(!write_hcpe3_file(dir.file("sub/b.hcpe3"), {random_hcpe3_game(rng, 4, DRAW)}));
  std::ofstream(dir.file("notes.txt")) << "not data";

  CHECK(expand_data_paths({dir.path.string()}).size() == 2);  // recursive, other files ignored
  CHECK(expand_data_paths({dir.file("*.hcpe")}) == std::vector<std::string>{dir.file("a.hcpe")});
  CHECK(expand_data_paths({dir.file("a.hcpe"), dir.file("*.hcpe")}).size() == 1);  // named twice, read once
  CHECK_THROWS_WITH(expand_data_paths({dir.file("missing.hcpe")}), Catch::Contains("no such file"));
  CHECK_THROWS_WITH(expand_data_paths({dir.file("notes.txt")}), Catch::Contains("unknown training data format"));
  CHECK_THROWS_WITH(expand_data_paths({dir.file("*.nothing")}), Catch::Contains("no file matches"));
}

TEST_CASE("optimizer: SGD with Nesterov momentum, AdamW, schedule and clipping by hand", "[train][optimizer]") {
  nn::Architecture arch;
  arch.blocks = 0;
  arch.channels = 1;
  nn::Model model(arch), grads(arch);
  model.value_fc2_weight.data[0] = 1.0f;  // rank 2: decayed
  model.value_fc2_bias.data[0] = 1.0f;    // rank 1: not decayed
  grads.value_fc2_weight.data[0] = 0.5f;
  grads.value_fc2_bias.data[0] = 0.5f;

  // SGD, lr 0.1, momentum 0.9, weight decay 0.01, two steps with the same gradient:
  //   weight: g = 0.51, buf = 0.51, w = 1 - 0.1 (0.51 + 0.9 * 0.51) = 0.9031;
  //           g = 0.509031, buf = 0.968031, w = 0.9031 - 0.1 (0.509031 + 0.9 * 0.968031) = 0.76507411
  //   bias:   buf = 0.5, b = 1 - 0.1 (0.5 + 0.45) = 0.905
  {
    nn::Model m = model;
    Optimizer opt({.kind = OptimizerKind::SGD, .weight_decay = 0.01, .momentum = 0.9, .nesterov = true}, m);
    opt.step(m, grads, 0.1);
    CHECK(m.value_fc2_weight.data[0] == Approx(0.9031).epsilon(1e-6));
    CHECK(m.value_fc2_bias.data[0] == Approx(0.905).epsilon(1e-6));
    opt.step(m, grads, 0.1);
    CHECK(m.value_fc2_weight.data[0] == Approx(0.76507411).epsilon(1e-6));
    CHECK(m.stem.weight.data == model.stem.weight.data);  // zero gradient, zero weight: unchanged
  }
  // AdamW, lr 0.1, decay 0.01, gradients +0.5 then -0.5: the first step moves by lr (m / sqrt(v)
  // = 1 after bias correction) after the decoupled decay: 1 * 0.999 - 0.1 = 0.899; the second
  // (worked in double) gives 0.90336416.
  {
    nn::Model m = model;
    Optimizer opt({.kind = OptimizerKind::ADAMW, .weight_decay = 0.01}, m);
    opt.step(m, grads, 0.1);
    CHECK(m.value_fc2_weight.data[0] == Approx(0.899).epsilon(1e-6));
    grads.value_fc2_weight.data[0] = -0.5f;
    opt.step(m, grads, 0.1);
    CHECK(m.value_fc2_weight.data[0] == Approx(0.90336416).epsilon(1e-6));
    auto tensors = m.tensors();
    CHECK(opt.state().size() ==
          2 * size_t(std::count_if(tensors.begin(), tensors.end(), [](auto& t) { return t.trainable; })));
  }

  Schedule s{.kind = Schedule::COSINE, .lr = 1.0, .warmup_steps = 10, .total_steps = 110, .final_ratio = 0.1};
  CHECK(s.at(0) == Approx(0.1));
  CHECK(s.at(9) == Approx(1.0));
  CHECK(s.at(10) == Approx(1.0));
  CHECK(s.at(60) == Approx(0.55));  // half way down the cosine: 0.1 + 0.9 / 2
  CHECK(s.at(110) == Approx(0.1));
  s.kind = Schedule::STEP;
  s.step_every = 20;
  s.gamma = 0.5;
  CHECK(s.at(29) == Approx(1.0));
  CHECK(s.at(30) == Approx(0.5));
  CHECK(s.at(50) == Approx(0.25));

  nn::Model g(arch);
  zero_tensors(g);
  g.value_fc2_weight.data[0] = 3.0f;
  g.value_fc2_bias.data[0] = 4.0f;
  CHECK(gradient_norm(g) == Approx(5.0));
  scale_gradients(g, 0.5f);
  CHECK(g.value_fc2_bias.data[0] == 2.0f);
}

TEST_CASE("checkpoint: round trip, and damaged or foreign checkpoints are refused", "[train][checkpoint]") {
  TempDir dir("checkpoint");
  nn::Architecture arch;
  arch.blocks = 1;
  arch.channels = 4;
  nn::Model m(arch);
  nn::init_model(m, 5);
  Optimizer opt({.kind = OptimizerKind::ADAMW}, m);
  std::mt19937_64 rng(10);
  for (auto& s : opt.state())
    for (float& x : s.tensor->data) x = float(rng() % 1000) / 7.0f;
  const std::string path = dir.file("run.ckpt");
  save_checkpoint(path, {{"step", 12}, {"samples", 384}}, m, opt);

  Checkpoint c = load_checkpoint(path);
  CHECK(c.meta["step"] == 12);
  CHECK(same_weights(c.model, m));
  Optimizer back({.kind = OptimizerKind::ADAMW}, c.model);
  restore_optimizer_state(c, back);
  for (size_t i = 0; i < opt.state().size(); ++i) CHECK(back.state()[i].tensor->data == opt.state()[i].tensor->data);
  Optimizer sgd({.kind = OptimizerKind::SGD}, c.model);
  CHECK_THROWS_WITH(restore_optimizer_state(c, sgd), Catch::Contains("no optimizer state"));

  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto damaged = bytes;
  damaged[damaged.size() / 2] ^= 0x10;
  write_bytes(dir.file("damaged.ckpt"), damaged);
  CHECK_THROWS_WITH(load_checkpoint(dir.file("damaged.ckpt")),
                    Catch::Contains("damaged.ckpt") && Catch::Contains("corrupt"));
  write_bytes(dir.file("short.ckpt"), std::vector<uint8_t>(bytes.begin(), bytes.begin() + bytes.size() / 3));
  CHECK_THROWS_WITH(load_checkpoint(dir.file("short.ckpt")), Catch::Contains("corrupt"));
  CHECK_THROWS_WITH(load_checkpoint(dir.file("missing.ckpt")), Catch::Contains("cannot open"));
}

TEST_CASE("training: a tiny network overfits a few hundred positions", "[train][run]") {
  TempDir dir("overfit");
  const auto records = random_game_records(6, 32, 11);  // 192 positions
  REQUIRE(!write_hcpe_file(dir.file("train.hcpe"), records));
  const float lambda = 0.333f;

  // The threshold of each loss is set between two figures computed from the data:
  //  - "blind": the best a predictor that ignores the position can do. For the policy that is the
  //    entropy H_move of the empirical distribution of the recorded moves' labels (what the policy
  //    bias alone can learn); for the value, the loss of predicting the mean target everywhere.
  //  - "floor": the best possible. For the one-hot policy targets, 0; for the value, the loss of
  //    predicting each position's own blended target t = (1 - lambda) result + lambda eval (the
  //    cross-entropy against the result cannot reach 0 while the eval pulls t inside (0, 1), and
  //    draws keep it at ln 2).
  // The run must close at least half of the gap: only a network that reads the board and
  // memorises the positions (working forward, backward and optimizer) gets there.
  std::map<int, int> label_count;
  double value_floor = 0, mean_t = 0;
  auto bce = [](double p, double y) { return -y * std::log(p) - (1 - y) * std::log(1 - p); };
  std::vector<std::pair<double, double>> targets;  // (result, eval probability)
  for (const auto& r : records) {
    Position pos;
    REQUIRE(!decode_hcp(r.hcp, pos));
    ++label_count[nn::move_to_label(Move(r.move16), pos.side_to_move())];
    const double z = r.result == DRAW ? 0.5 : (r.result == BLACK_WIN) == (pos.side_to_move() == BLACK) ? 1.0 : 0.0;
    const double q = 1.0 / (1.0 + std::exp(-r.eval / 756.0864962951762));
    const double t = (1 - lambda) * z + lambda * q;
    value_floor += ((1 - lambda) * bce(t, z) + lambda * bce(t, q)) / records.size();
    mean_t += t / records.size();
    targets.emplace_back(z, q);
  }
  double h_move = 0, value_blind = 0;
  for (auto& [label, count] : label_count)
    h_move -= double(count) / records.size() * std::log(double(count) / records.size());
  for (auto& [z, q] : targets)
    value_blind += ((1 - lambda) * bce(mean_t, z) + lambda * bce(mean_t, q)) / records.size();

  TrainConfig c = tiny_config(dir.file("train.hcpe"), dir.file("model.bin"));
  c.arch.channels = 16;  // 8 channels memorise the moves too slowly for a quick test
  c.val_lambda = lambda;
  c.steps = 80;      // 13 epochs
  c.log_every = 10;  // last_train: the mean over the last 10 steps
  c.test = {dir.file("train.hcpe")};
  c.eval_every = 20;
  c.log = dir.file("log.jsonl");
  TrainResult r = train(c);
  // Held-out records every 20 steps and at the end, with the samples seen and the seconds of training.
  const std::vector<nlohmann::json> tests = log_records(c.log, "test");
  REQUIRE(tests.size() == 4);
  for (size_t i = 0; i < tests.size(); ++i) {
    CHECK(tests[i]["step"] == 20 * int64_t(i + 1));
    CHECK(tests[i]["samples"] == 20 * 32 * int64_t(i + 1));
    CHECK(tests[i]["seconds"].get<double>() > (i ? tests[i - 1]["seconds"].get<double>() : 0.0));
  }
  CHECK(tests.back()["loss"].get<double>() < tests.front()["loss"].get<double>());

  const Metrics& m = r.last_train;
  const double value = (1 - lambda) * m.value_loss + lambda * m.value_eval_loss;
  INFO("policy: blind " << h_move << ", reached " << m.policy_loss << "; value: blind " << value_blind << ", floor "
                        << value_floor << ", reached " << value);
  CHECK(m.policy_loss < 0.5 * h_move);
  CHECK(value < value_floor + 0.5 * (value_blind - value_floor));
  CHECK(r.test.samples == int64_t(records.size()));
  CHECK(std::isfinite(r.test.loss));
  // The exported model loads and has the architecture trained.
  CHECK(nn::load_model(c.model_out).arch == c.arch);
}

TEST_CASE("training: a held-out record's seconds leave every evaluation out, its own too", "[train][run]") {
  // A held-out set a hundred times the training: each evaluation takes far longer than the steps
  // and set-up before it, so a record that counted its own evaluation would show it.
  TempDir dir("eval_seconds");
  REQUIRE(!write_hcpe_file(dir.file("train.hcpe"), random_game_records(2, 20, 21)));
  REQUIRE(!write_hcpe_file(dir.file("heldout.hcpe"), random_game_records(100, 40, 22)));
  TrainConfig c = tiny_config(dir.file("train.hcpe"), dir.file("model.bin"));
  c.steps = 6;
  c.eval_every = 2;
  c.test = {dir.file("heldout.hcpe")};
  c.log = dir.file("log.jsonl");
  train(c);
  const std::vector<nlohmann::json> tests = log_records(c.log, "test");
  REQUIRE(tests.size() == 3);
  for (size_t i = 0; i < tests.size(); ++i) {
    INFO("evaluation " << i << ": seconds " << tests[i]["seconds"] << ", its own " << tests[i]["eval_seconds"]);
    CHECK(tests[i]["samples"] == 2 * 32 * int64_t(i + 1));
    CHECK(tests[i]["seconds"].get<double>() < tests[i]["eval_seconds"].get<double>());
    // Two steps between records: the training time grows, by less than an evaluation.
    if (i) {
      const double gap = tests[i]["seconds"].get<double>() - tests[i - 1]["seconds"].get<double>();
      CHECK(gap > 0);
      CHECK(gap < tests[i - 1]["eval_seconds"].get<double>());
    }
  }
}

TEST_CASE("training: a resumed run ends with exactly the weights of an uninterrupted one", "[train][run]") {
  TempDir dir("resume");
  REQUIRE(!write_hcpe_file(dir.file("train.hcpe"), random_game_records(5, 20, 12)));  // 100 positions
  for (const auto& [kind, replicas] :
       {std::pair{OptimizerKind::ADAMW, 1}, std::pair{OptimizerKind::SGD, 1}, std::pair{OptimizerKind::SGD, 2}}) {
    TrainConfig c = tiny_config(dir.file("train.hcpe"), dir.file("whole.bin"));
    c.replicas = replicas;  // two replicas: each resumes its share of the stream and its batch-norm statistics
    c.optimizer.kind = kind;
    c.optimizer.weight_decay = 1e-4;
    c.schedule = {.kind = Schedule::COSINE, .lr = kind == OptimizerKind::SGD ? 0.05 : 3e-3, .warmup_steps = 3};
    c.clip_grad_norm = 1.0;
    c.steps = 10;  // 320 positions: the run crosses three epoch boundaries
    c.log_every = 5;
    train(c);

    c.model_out = dir.file("parts.bin");
    c.checkpoint = dir.file("parts.ckpt");
    c.stop_after = 4;  // as if Ctrl-C came after step 4
    TrainResult first = train(c);
    CHECK(first.interrupted);
    CHECK(first.step == 4);
    CHECK(!fs::exists(c.model_out));
    c.stop_after = 0;
    c.resume = true;
    c.checkpoint_every = 3;  // checkpoints written along the way change nothing
    c.threads = 1;           // nor does the number of threads
    c.test = {dir.file("train.hcpe")};
    c.eval_every = 2;  // nor do held-out evaluations (under the replicas' mean statistics)
    TrainResult rest = train(c);
    CHECK(!rest.interrupted);
    CHECK(rest.step == 10);
    CAPTURE(optimizer_name(kind), replicas);
    CHECK(same_weights(nn::load_model(dir.file("whole.bin")), nn::load_model(dir.file("parts.bin"))));

    // Another batch size is another run: refused, naming the difference.
    const int batch = c.batch;
    c.batch = 16;
    CHECK_THROWS_WITH(train(c), Catch::Contains("other settings") && Catch::Contains("batch"));
    c.batch = batch;
    // So is another shape asked for by --blocks/--channels (it resumed the checkpoint's silently).
    c.arch_given = true;
    c.arch.channels *= 2;
    CHECK_THROWS_WITH(train(c), Catch::Contains("the checkpoint holds a") && Catch::Contains("drop --blocks"));
    c.arch_given = false;
    c.arch.channels /= 2;
    c.test.clear();
    c.eval_every = 0;
    fs::remove(c.checkpoint);
    fs::remove(c.model_out);
  }
}

TEST_CASE("training: --batch auto resumes with the interrupted run's tuner, ramp included", "[train][run]") {
  TempDir dir("resume_auto");
  REQUIRE(!write_hcpe_file(dir.file("train.hcpe"), random_game_records(5, 20, 14)));
  TrainConfig c = tiny_config(dir.file("train.hcpe"), dir.file("whole.bin"));
  // Odd, so it has no batch halves to measure the noise scale with: one replica then decides on
  // throughput alone from the first decision. Not a candidate: that decision always changes the
  // batch and starts a ramp.
  c.batch = 5;
  c.batch_auto = true;
  c.tune_min = 8;
  c.tune_max = 16;
  c.tune_reps = 2;
  c.tune_every = 2;
  c.lr_ramp_steps = 6;
  c.steps = 60;
  c.log_every = 1;
  // Per step of a log: its learning rate and batch; and how many candidate batches were timed.
  struct Run {
    std::map<int64_t, double> lr;
    std::map<int64_t, int> batch;
    int timed = 0;
  };
  auto read_log = [](const std::string& path) {
    Run r;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      const auto j = nlohmann::json::parse(line);
      if (j["type"] == "tuner_cost") ++r.timed;
      if (j["type"] != "train") continue;
      r.lr[j["step"].get<int64_t>()] = j["lr"].get<double>();
      r.batch[j["step"].get<int64_t>()] = j["batch"].get<int>();
    }
    return r;
  };
  c.log = dir.file("whole.jsonl");
  train(c);
  const Run whole = read_log(c.log);

  c.model_out = dir.file("parts.bin");
  c.checkpoint = dir.file("parts.ckpt");
  c.log = dir.file("parts.jsonl");
  c.stop_after = 4;  // two steps into the ramp that follows the decision at step 2
  REQUIRE(train(c).interrupted);
  c.stop_after = 0;
  c.resume = true;
  REQUIRE(!train(c).interrupted);
  const Run parts = read_log(c.log);

  CHECK(parts.timed == 2);  // the candidates were timed once, not again on resuming
  // The ramp goes on where it stopped: equal steps of the learning rate on both sides of the
  // interruption (a ramp restarted or dropped on resuming would jump).
  REQUIRE(parts.lr.count(3) + parts.lr.count(4) + parts.lr.count(5) + parts.lr.count(6) == 4);
  const double rise = parts.lr.at(4) - parts.lr.at(3);
  CHECK(rise > 0);
  CHECK(parts.lr.at(5) - parts.lr.at(4) == Approx(rise).epsilon(1e-6));
  CHECK(parts.lr.at(6) - parts.lr.at(5) == Approx(rise).epsilon(1e-6));
  // The tuner picks by measured times: where both runs picked the same batches, the resumed run ends
  // with exactly the uninterrupted one's weights.
  if (parts.batch == whole.batch)
    CHECK(same_weights(nn::load_model(dir.file("whole.bin")), nn::load_model(dir.file("parts.bin"))));
  else WARN("the two runs' timings picked different batches: weights not compared");
}

TEST_CASE("training: --batch auto keeps its measured step times for the next run of the setting", "[train][run]") {
  TempDir dir("tuner_file");
  REQUIRE(!write_hcpe_file(dir.file("train.hcpe"), random_game_records(3, 20, 15)));
  TrainConfig c = tiny_config(dir.file("train.hcpe"), dir.file("a.bin"));
  c.batch = 8;
  c.batch_auto = true;
  c.tune_min = 8;
  c.tune_max = 32;
  c.tune_reps = 2;
  c.steps = 4;
  c.tuner_file = dir.file("cache/batch-tuner.txt");  // a directory the first run makes
  // A log's timed batches and its model's figures.
  struct Run {
    std::vector<int> timed;
    std::vector<double> model;
    bool kept = false;
  };
  auto run = [&](const std::string& name) {
    c.model_out = dir.file(name + ".bin");
    c.log = dir.file(name + ".jsonl");
    train(c);
    Run r;
    std::ifstream in(c.log);
    for (std::string line; std::getline(in, line);) {
      const auto j = nlohmann::json::parse(line);
      if (j["type"] == "tuner_cost") r.timed.push_back(j["batch"].get<int>());
      if (j["type"] == "tuner_model") {
        r.model = {j["alpha_c_ms"], j["beta_c_ms"], j["t_n_ms"], j["gamma"]};
        r.kept = j["kept"].get<bool>();
      }
    }
    return r;
  };
  const Run first = run("first");
  CHECK(first.timed == std::vector<int>{8, 32});
  CHECK(!first.kept);
  REQUIRE(first.model.size() == 4);
  // The next run of the setting times nothing and decides with the first run's model.
  const Run second = run("second");
  CHECK(second.timed.empty());
  CHECK(second.kept);
  REQUIRE(second.model.size() == 4);
  for (int i = 0; i < 4; ++i) CHECK(second.model[i] == Approx(first.model[i]).epsilon(1e-6));
  // Another setting (another network shape) is timed afresh, beside the first.
  c.arch.channels *= 2;
  const Run wider = run("wider");
  CHECK(wider.timed == std::vector<int>{8, 32});
  CHECK(!wider.kept);
  c.arch.channels /= 2;

  // The file itself: one line a setting, the later line of a key wins, damaged lines are skipped.
  std::ifstream in(c.tuner_file);
  int lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  CHECK(lines == 2);
  const std::string file = dir.file("models.txt");
  const StepTimeModel one{0.001, 2e-5, 0.0003, 1.5}, two{0.002, 3e-5, 0.0004, 2.5};
  CHECK(!read_step_time_model(file, "k"));  // no file
  REQUIRE(keep_step_time_model(file, "k", one));
  REQUIRE(keep_step_time_model(file, "other", two));
  CHECK(read_step_time_model(file, "k")->gamma == 1.5);
  REQUIRE(keep_step_time_model(file, "k", two));
  CHECK(read_step_time_model(file, "k")->alpha_c == 0.002);
  {
    std::ofstream damaged(file, std::ios::app);
    damaged << "jiriki-tuner-1\tk\t0.5\t1e-5\n"                  // fields missing
            << "jiriki-tuner-1\tk\t-1\t1e-5\t0.0003\t1.5\n"      // a negative time
            << "jiriki-tuner-1\tk\t0.001\t1e-5\t0.0003\t40\n"    // gamma out of its range
            << "jiriki-tuner-0\tk\t0.007\t1e-5\t0.0003\t1.5\n";  // another format
  }
  CHECK(read_step_time_model(file, "k")->alpha_c == 0.002);
  CHECK(!read_step_time_model(file, "k2"));
  CHECK(!keep_step_time_model(file, "a\tkey", one));  // a key must stay one field
  CHECK(!read_step_time_model("", "k"));
  CHECK(!keep_step_time_model("", "k", one));

  // Where `jiriki train` keeps it: $JIRIKI_TUNER_CACHE ("off": nowhere), else the user's cache
  // directory (the variables given back their values at the end).
  const char* names[] = {"JIRIKI_TUNER_CACHE", "XDG_CACHE_HOME"};
  std::vector<std::optional<std::string>> saved;
  for (const char* n : names)
    saved.push_back(std::getenv(n) ? std::optional<std::string>(std::getenv(n)) : std::nullopt);
  setenv("JIRIKI_TUNER_CACHE", "/somewhere/models.txt", 1);
  CHECK(tuner_file_path() == "/somewhere/models.txt");
  setenv("JIRIKI_TUNER_CACHE", "off", 1);
  CHECK(tuner_file_path().empty());
  unsetenv("JIRIKI_TUNER_CACHE");
  setenv("XDG_CACHE_HOME", "/cache", 1);
  CHECK(tuner_file_path() == "/cache/jiriki/batch-tuner.txt");
  for (size_t i = 0; i < saved.size(); ++i)
    if (saved[i]) setenv(names[i], saved[i]->c_str(), 1);
    else unsetenv(names[i]);
}

TEST_CASE("training: the GPU trainer's convolution choices are kept a shape, the later line winning", "[train][run]") {
  // What training/conv_choices.h keeps for the GPU trainer (the trainer's own use of it is checked on
  // a GPU in test_train_cuda.cpp): a line round-trips, the later line of a key wins, lines of other
  // keys, of another format or with impossible values are skipped, and the process remembers its
  // answers with no file at all.
  forget_conv_choices();
  jiriki::testing::TempDir dir("conv_choices");
  const std::string file = dir.file("cache/cudnn-choices.txt");
  TrainConvChoices a;
  a.route = {ConvRoute::IDENTITY, ConvRoute::BARE, ConvRoute::IDENTITY,
             ConvRoute::BARE,     ConvRoute::BARE, ConvRoute::IDENTITY};
  a.stem = {1, 0, 1, 1, 1, 1};
  a.block = {6, 1, 3, 1, 2, 1};
  TrainConvChoices b = a;
  b.route[BLOCK_DATA] = ConvRoute::LEGACY;
  b.block.filter = 5;
  CHECK(!kept_conv_choices(file, "H200/b64"));  // no file
  const std::string line = format_conv_choices("H200/b64", a);
  CHECK(line == "jiriki-train-conv-1 H200/b64 2 1 2 1 1 2 1 0 1 1 1 1 6 1 3 1 2 1");
  CHECK(parse_conv_choices(line, "H200/b64") == a);
  CHECK(!parse_conv_choices(line, "H200/b128"));
  REQUIRE(keep_conv_choices(file, "H200/b64", a));  // creates the directory
  REQUIRE(keep_conv_choices(file, "H200/b128", b));
  forget_conv_choices();
  CHECK(kept_conv_choices(file, "H200/b64") == a);
  CHECK(kept_conv_choices(file, "H200/b128") == b);
  REQUIRE(keep_conv_choices(file, "H200/b64", b));
  forget_conv_choices();
  CHECK(kept_conv_choices(file, "H200/b64") == b);
  {
    std::ofstream damaged(file, std::ios::app);
    damaged << "jiriki-train-conv-1 H200/b64 2 1 2 1 1 2 1 0 1 1 1\n"                  // fields missing
            << "jiriki-train-conv-1 H200/b64 2 1 2 1 1 2 1 0 1 1 1 1 6 1 3 1 2 1 7\n"  // one too many
            << "jiriki-train-conv-1 H200/b64 2 2 2 1 1 2 1 0 1 1 1 1 6 1 3 1 2 1\n"    // a filter through an identity
            << "jiriki-train-conv-1 H200/b64 2 1 2 1 1 1 1 0 1 1 1 1 6 1 3 1 2 1\n"    // the skip's pass without it
            << "jiriki-train-conv-1 H200/b64 2 1 2 1 1 2 9 0 1 1 1 1 6 1 3 1 2 1\n"    // no forward algorithm 9
            << "jiriki-train-conv-1 H200/b64 2 1 2 1 1 2 1 0 7 1 1 1 6 1 3 1 2 1\n"    // nor backward filter 7
            << "jiriki-train-conv-1 H200/b64 3 1 2 1 1 2 1 0 1 1 1 1 6 1 3 1 2 1\n"    // no route 3
            << "jiriki-cudnn-2 H200/b64 1 0 0 -1 0.05\n";                              // cuDNN's engine choices
  }
  forget_conv_choices();
  CHECK(kept_conv_choices(file, "H200/b64") == b);
  CHECK(!keep_conv_choices(file, "a key", a));   // a key must stay one field...
  CHECK(kept_conv_choices(file, "a key") == a);  // ... but the process remembers it
  // No file: remembered in the process only.
  CHECK(!kept_conv_choices("", "H200/b64"));
  CHECK(!keep_conv_choices("", "H200/b64", a));
  CHECK(kept_conv_choices("", "H200/b64") == a);
  forget_conv_choices();
  CHECK(!kept_conv_choices("", "H200/b64"));
}

TEST_CASE("train command: options, errors and a short run", "[train][command]") {
  TempDir dir("command");
  REQUIRE(!write_hcpe_file(dir.file("a.hcpe"), random_game_records(2, 10, 13)));
  auto run = [&](const std::string& args) {
    const std::string cmd = std::string(JIRIKI_BINARY) + " train " + args + " > " + dir.file("out.txt") + " 2>&1";
    int rc = std::system(cmd.c_str());
    std::ifstream f(dir.file("out.txt"));
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    return std::pair{WEXITSTATUS(rc), text};
  };
  CHECK(run("--help").first == 0);
  // (--backend cuda without a GPU: test_train_cuda.cpp.)
  auto [rc, text] = run("--data " + dir.file("a.hcpe") + " --model-out " + dir.file("m.bin") + " --backend tpu");
  CHECK(rc != 0);
  CHECK_THAT(text, Catch::Contains("unknown backend 'tpu'") && Catch::Contains("auto, cpu or cuda"));
  std::tie(rc, text) = run("--model-out " + dir.file("m.bin") + " --data " + dir.file("missing.hcpe"));
  CHECK(rc != 0);
  CHECK_THAT(text, Catch::Contains("missing.hcpe") && Catch::Contains("no such file"));

  std::tie(rc, text) =
      run("--data " + dir.file("a.hcpe") + " --model-out " + dir.file("m.bin") +
          " --blocks 1 --channels 4 --batch 8 --steps 3 --optimizer adamw --log-every 1 --backend cpu");
  CHECK(rc == 0);
  CHECK_THAT(text, Catch::Contains("samples/s") && Catch::Contains("ETA"));
  CHECK(nn::load_model(dir.file("m.bin")).arch.blocks == 1);
  std::ifstream log(dir.file("m.bin") + ".log.jsonl");
  int train_lines = 0;
  for (std::string line; std::getline(log, line);) {
    auto j = nlohmann::json::parse(line);
    train_lines += j["type"] == "train";
  }
  CHECK(train_lines == 3);
  CHECK(fs::exists(dir.file("m.bin") + ".ckpt"));

  // Ctrl-C stops after the current step with a checkpoint, and the exit status says so (130 = 128 +
  // SIGINT). The signal is sent once the first progress line shows a step was made (at most 60 s),
  // so a slow, loaded machine cannot interrupt the run before it has anything to save. A file of its
  // own: in out.txt the runs above left progress lines, which the first grep could see before the
  // background job truncates the file, and a SIGINT sent before jiriki sets its handler is lost (a
  // background job of a non-interactive shell starts with SIGINT ignored): the run went on for hours.
  // SIGTERM (a scheduler's, systemd's, timeout's) does the same; it used to end the run with no
  // checkpoint. Exit status 128 + the signal.
  for (const auto& [sig, name] : {std::pair{SIGINT, "INT"}, std::pair{SIGTERM, "TERM"}}) {
    INFO("SIG" << name);
    const std::string out = dir.file(std::string("interrupted_") + name + ".txt");
    const std::string model = dir.file(std::string("i_") + name + ".bin");
    const std::string cmd = "sh -c '" + std::string(JIRIKI_BINARY) + " train --data " + dir.file("a.hcpe") +
                            " --model-out " + model +
                            " --blocks 1 --channels 4 --batch 8 --steps 1000000 --log-every 1 --backend cpu > " + out +
                            " 2>&1 & pid=$!; i=0; while ! grep -q samples/s " + out +
                            " && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; kill -" + name + " $pid; wait $pid'";
    const int status = std::system(cmd.c_str());
    CHECK(WEXITSTATUS(status) == 128 + sig);
    REQUIRE(fs::exists(model + ".ckpt"));
    Checkpoint c = load_checkpoint(model + ".ckpt");
    CHECK(c.meta["step"].get<int64_t>() >= 1);
    CHECK(c.meta["samples"].get<int64_t>() == 8 * c.meta["step"].get<int64_t>());
    CHECK(!fs::exists(model));  // no model exported from an interrupted run
  }
}

// ---- distillation (training/teacher.h) ------------------------------------------------------------

namespace {

// The legal moves' labels of `pos` (mirrored when asked), and a softmax of `logits` over them,
// computed here from the move generator and the label map.
std::map<int, double> legal_softmax(const Position& pos, const float* logits, bool mirror) {
  std::map<int, double> p;
  const MoveList moves = legal_moves(pos);
  for (int i = 0; i < moves.size(); ++i) {
    const int label = nn::move_to_label(moves.moves[i], pos.side_to_move());
    p[mirror ? nn::mirror_policy_index(label) : label] = 0;
  }
  double sum = 0;
  for (auto& [k, v] : p) sum += v = std::exp(double(logits[k]));
  for (auto& [k, v] : p) v /= sum;
  return p;
}

nn::BackendOptions reference_backend(int max_batch) {
  nn::BackendOptions o;
  o.kind = nn::BackendKind::REFERENCE;
  o.max_batch = max_batch;
  return o;
}

}  // namespace

TEST_CASE("data: every move of hcpe3 games for a teacher, flagged, and a window that counts the others",
          "[train][data][distill]") {
  TempDir dir("every_move");
  std::mt19937_64 rng(21);
  std::vector<Hcpe3Game> games = {random_hcpe3_game(rng, 12, BLACK_WIN), random_hcpe3_game(rng, 9, DRAW)};
  REQUIRE(!write_hcpe3_file(dir.file("a.hcpe3"), games));

  const Dataset recorded = load_dataset({dir.file("a.hcpe3")}, {});
  const Dataset every = load_dataset({dir.file("a.hcpe3")}, {.every_move = true});
  CHECK(recorded.positions.size() == 8 + 6);
  REQUIRE(every.positions.size() == 12 + 9);
  size_t k = 0;
  for (const Hcpe3Game& g : games) {
    Position pos;
    for (const Hcpe3Move& m : g.moves) {
      const TrainingPosition& tp = every.positions[k++];
      CHECK(tp.record.hcp == encode_hcp(pos));
      CHECK(has_own_target(tp) == !m.candidates.empty());
      CHECK(tp.candidate_count == m.candidates.size());
      pos.do_move(m.move);
    }
  }
  // A window of 5 keeps the newest 5 positions with their own targets and the moves between them:
  // plies 1 to 8 of the second game (its plies 2, 5 and 8 have none).
  const Dataset windowed = load_dataset({dir.file("a.hcpe3")}, {.window = 5, .every_move = true});
  REQUIRE(windowed.positions.size() == 8);
  CHECK(std::count_if(windowed.positions.begin(), windowed.positions.end(), has_own_target) == 5);
  CHECK(windowed.positions.front().record == every.positions[every.positions.size() - 8].record);
  // Those positions have no target without a teacher.
  CHECK_THROWS_WITH(Loader(every, {.batch_size = 4}), Catch::Contains("need a teacher"));
}

TEST_CASE("loader: a teacher's policy over the legal moves and its value become the targets",
          "[train][data][distill]") {
  TempDir dir("teacher_targets");
  std::mt19937_64 rng(22);
  REQUIRE(!write_hcpe3_file(dir.file("a.hcpe3"), {random_hcpe3_game(rng, 30, WHITE_WIN)}));
  const Dataset data = load_dataset({dir.file("a.hcpe3")}, {.every_move = true});
  REQUIRE(data.positions.size() == 30);
  const nn::Model teacher = nn::testing::random_model(1, 8, nn::Activation::RELU, 5);
  const float weight = 0.25f;
  const nn::BackendOptions reference = reference_backend(1);
  // Mirror images too: the teacher sees the mirrored planes, and the targets are of the mirrored moves.
  Loader loader(data, {.batch_size = 30, .shuffle = false, .mirror = true, .teacher = [&] {
                         // A batch of 30 in five calls of 7 at most.
                         return std::make_unique<Teacher>(teacher, reference_backend(7), weight);
                       }});
  const Batch* b = loader.acquire();
  REQUIRE(b->size == 30);
  auto oracle = nn::make_evaluator(teacher, reference);
  Batch own;  // the same rows without a teacher
  own.allocate(1);
  Position pos;
  int mirrored = 0;
  for (int row = 0; row < 30; ++row) {
    const TrainingPosition& tp = data.positions[size_t(row)];
    REQUIRE(!decode_hcp(tp.record.hcp, pos));
    std::vector<float> planes(nn::INPUT_SIZE), logits(nn::POLICY_SIZE);
    nn::encode_features(pos, planes.data());
    const bool mirror = !std::equal(planes.begin(), planes.end(), b->features + int64_t(row) * nn::INPUT_SIZE);
    if (mirror) nn::mirror_features(planes.data()), ++mirrored;
    REQUIRE(std::equal(planes.begin(), planes.end(), b->features + int64_t(row) * nn::INPUT_SIZE));
    float value = 0;
    oracle->evaluate(planes.data(), 1, logits.data(), &value);
    const auto p = legal_softmax(pos, logits.data(), mirror);
    build_sample(data, uint32_t(row), own, 0, pos, mirror);
    const double w = has_own_target(tp) ? weight : 1.0;
    const float* target = b->policy_target + int64_t(row) * nn::POLICY_SIZE;
    double sum = 0;
    for (int i = 0; i < nn::POLICY_SIZE; ++i) {
      const double want = (1 - w) * own.policy_target[i] + w * (p.count(i) ? p.at(i) : 0.0);
      CHECK(target[i] == Approx(want).margin(1e-6));
      sum += target[i];
    }
    CHECK(sum == Approx(1.0).epsilon(1e-5));
    CHECK(b->value_eval[row] == Approx((1 - w) * own.value_eval[0] + w * value).margin(1e-6));
    CHECK(b->value_result[row] == own.value_result[0]);  // the game's result stays
  }
  CHECK(mirrored > 5);
  CHECK(mirrored < 25);
}

TEST_CASE("training: a student distilled from a teacher learns the teacher's policy", "[train][run][distill]") {
  // The records' own targets are random moves; the teacher is a fixed random network. A student
  // trained on the teacher's targets must come much closer to the teacher's policy (in KL divergence
  // over the legal moves of the positions) than one trained on the records alone.
  TempDir dir("distill");
  std::mt19937_64 rng(23);
  std::vector<Hcpe3Game> games;
  for (int g = 0; g < 8; ++g) games.push_back(random_hcpe3_game(rng, 30, uint8_t(g % 3)));
  REQUIRE(!write_hcpe3_file(dir.file("a.hcpe3"), games));
  const nn::Model teacher = nn::testing::random_model(1, 8, nn::Activation::RELU, 6);
  nn::save_model(teacher, dir.file("teacher.jnn"));

  auto kl_to_teacher = [&](const std::string& student_file) {
    const Dataset data = load_dataset({dir.file("a.hcpe3")}, {.every_move = true});
    auto t = nn::make_evaluator(teacher, reference_backend(1));
    auto s = nn::make_evaluator(nn::load_model(student_file), reference_backend(1));
    Position pos;
    double kl = 0;
    for (const TrainingPosition& tp : data.positions) {
      REQUIRE(!decode_hcp(tp.record.hcp, pos));
      std::vector<float> planes(nn::INPUT_SIZE), tl(nn::POLICY_SIZE), sl(nn::POLICY_SIZE);
      nn::encode_features(pos, planes.data());
      float v;
      t->evaluate(planes.data(), 1, tl.data(), &v);
      s->evaluate(planes.data(), 1, sl.data(), &v);
      const auto pt = legal_softmax(pos, tl.data(), false), ps = legal_softmax(pos, sl.data(), false);
      for (auto& [k, p] : pt) kl += p * std::log(p / ps.at(k)) / double(data.positions.size());
    }
    return kl;
  };
  TrainConfig c = tiny_config(dir.file("a.hcpe3"), dir.file("plain.jnn"));
  c.arch.channels = 16;
  c.steps = 150;
  train(c);
  c.model_out = dir.file("student.jnn");
  c.teacher = dir.file("teacher.jnn");
  c.teacher_weight = 1.0f;
  train(c);
  const double plain = kl_to_teacher(dir.file("plain.jnn")), student = kl_to_teacher(dir.file("student.jnn"));
  INFO("KL to the teacher: trained on the records " << plain << ", distilled " << student);
  CHECK(student < 0.5 * plain);
}
