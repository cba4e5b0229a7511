// The model in memory and on disk: tensor shapes and names, FLOP count, initialisation, batch-norm
// folding, the layers on hand-worked inputs, the file round trip and every kind of corrupt file.
#include <sys/wait.h>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/fnv1a.h"
#include "nn/layers.h"
#include "nn/model_file.h"

using namespace jiriki::nn;
using Catch::Matchers::Contains;

namespace {

Model small_model(Activation act = Activation::RELU, uint64_t seed = 5) {
  Architecture a;
  a.blocks = 2;
  a.channels = 8;
  a.activation = act;
  Model m(a);
  init_model(m, seed);
  return m;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("jiriki_test_" + name)).string();
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

// The message load_model gives for these bytes ("" when it loads).
std::string load_error(const std::vector<uint8_t>& bytes) {
  const std::string path = temp_path("corrupt.bin");
  write_bytes(path, bytes);
  try {
    load_model(path);
  } catch (const ModelFileError& e) {
    std::filesystem::remove(path);
    return e.what();
  }
  std::filesystem::remove(path);
  return "";
}

}  // namespace

TEST_CASE("model: tensor names, shapes and the FLOP count of the issue's 10x192 network", "[nn][model]") {
  Model m(Architecture{});  // 10 blocks, 192 channels
  auto t = m.tensors();
  // stem (5) + 10 blocks x 2 convs x 5 + policy (2) + value conv (5) + fc (4)
  REQUIRE(t.size() == 5 + 100 + 2 + 5 + 4);
  CHECK(t[0].name == "stem.conv.weight");
  CHECK(t[0].tensor->shape == std::vector<int>{192, 119, 3, 3});
  CHECK(t[3].name == "stem.conv.bn.mean");
  CHECK_FALSE(t[3].trainable);
  CHECK(t[5 + 5].name == "blocks.0.conv2.weight");
  CHECK(m.policy_bias.shape == std::vector<int>{2187});
  CHECK(m.value_fc1_weight.shape == std::vector<int>{256, 2187});
  // Multiply-adds: 81*9*192 = 139968 per input channel of a 3x3 conv to 192 channels;
  // stem 139968*119 = 16656192, blocks 139968*192*20 = 537477120, heads 2 * 81*192*27 = 839808,
  // fc 2187*256 + 256 = 560128. Total 555533248, i.e. the 1.11 GFLOP per position.
  CHECK(macs_per_position(m.arch) == 555533248);
  size_t floats = 0;
  for (const auto& n : t) floats += n.tensor->size();
  CHECK(int64_t(floats) == tensor_floats(m.arch));
}

TEST_CASE("model: initialisation is deterministic and He-scaled", "[nn][model]") {
  Model a = small_model(Activation::RELU, 11), b = small_model(Activation::RELU, 11),
        c = small_model(Activation::RELU, 12);
  CHECK(a.stem.weight.data == b.stem.weight.data);
  CHECK(a.stem.weight.data != c.stem.weight.data);
  CHECK(a.stem.bn.gamma.data == std::vector<float>(8, 1.0f));
  CHECK(a.stem.bn.var.data == std::vector<float>(8, 1.0f));
  CHECK(a.stem.bn.mean.data == std::vector<float>(8, 0.0f));
  CHECK(a.policy_bias.data == std::vector<float>(POLICY_SIZE, 0.0f));
  // Stem weights: 8*119*9 = 8568 samples of N(0, 2/(119*9)); the sample std is within 5%.
  double sum2 = 0, sum = 0;
  for (float w : a.stem.weight.data) sum += w, sum2 += double(w) * w;
  const double n = double(a.stem.weight.size());
  CHECK(std::abs(sum / n) < 0.005);
  CHECK(std::sqrt(sum2 / n) == Approx(std::sqrt(2.0 / (119 * 9))).epsilon(0.05));
}

TEST_CASE("layers: 3x3 convolution with zero padding on a hand-worked board", "[nn][model]") {
  // One input plane of ones and a kernel of ones: each output is the number of in-board
  // neighbours including itself: 4 in a corner, 6 on an edge, 9 inside. Plus bias 0.5.
  std::vector<float> in(SQUARES, 1.0f), w(9, 1.0f), out(SQUARES);
  float bias = 0.5f;
  conv_forward(out.data(), in.data(), w.data(), &bias, 1, 1, 1, 3);
  CHECK(out[0] == 4.5f);  // h=0,w=0
  CHECK(out[4] == 6.5f);  // h=0,w=4
  CHECK(out[9 * 4 + 4] == 9.5f);
  CHECK(out[80] == 4.5f);
  // A kernel with a single 1 at (kh=0, kw=2) reads in[h-1][w+1]: shifting a lone one at (4,4)
  // to output (5,3).
  std::vector<float> lone(SQUARES, 0.0f), shift(9, 0.0f);
  lone[4 * 9 + 4] = 1.0f;
  shift[2] = 1.0f;
  conv_forward(out.data(), lone.data(), shift.data(), nullptr, 1, 1, 1, 3);
  for (int s = 0; s < SQUARES; ++s) CHECK(out[s] == (s == 5 * 9 + 3 ? 1.0f : 0.0f));
  // swish(1) = 1 / (1 + e^-1) = 0.7310586; relu(-2) = 0.
  float x[2] = {1.0f, -2.0f}, y[2];
  activation_forward(y, x, 2, Activation::SWISH);
  CHECK(y[0] == Approx(0.7310586f).epsilon(1e-6));
  activation_forward(y, x, 2, Activation::RELU);
  CHECK(y[1] == 0.0f);
}

TEST_CASE("model: batch-norm folding equals convolution followed by batch norm", "[nn][model]") {
  Model m = small_model();
  // Non-trivial statistics on the stem.
  for (int c = 0; c < 8; ++c) {
    m.stem.bn.gamma.data[c] = 0.5f + 0.1f * c;
    m.stem.bn.beta.data[c] = -0.3f + 0.05f * c;
    m.stem.bn.mean.data[c] = 0.2f - 0.07f * c;
    m.stem.bn.var.data[c] = 0.4f + 0.3f * c;
  }
  FoldedModel f = fold_batch_norm(m);
  std::vector<float> x(INPUT_SIZE);
  for (int i = 0; i < INPUT_SIZE; ++i) x[i] = float((i * 7919) % 13 == 0);
  std::vector<float> a(8 * SQUARES), b(8 * SQUARES);
  conv_forward(a.data(), x.data(), m.stem.weight.ptr(), nullptr, 1, INPUT_PLANES, 8, 3);
  batchnorm_forward(a.data(), a.data(), m.stem.bn, m.arch.bn_eps, 1, 8);
  conv_forward(b.data(), x.data(), f.stem.weight.data(), f.stem.bias.data(), 1, INPUT_PLANES, 8, 3);
  for (size_t i = 0; i < a.size(); ++i) REQUIRE(b[i] == Approx(a[i]).margin(1e-5).epsilon(1e-5));
}

TEST_CASE("model file: round trip keeps every tensor bit for bit", "[nn][model][file]") {
  Model m = small_model(Activation::SWISH);
  m.arch.bn_eps = 1e-3f;
  const std::string path = temp_path("roundtrip.bin");
  save_model(m, path);
  Model back = load_model(path);
  std::filesystem::remove(path);
  CHECK(back.arch == m.arch);
  auto ta = m.tensors();
  auto tb = back.tensors();
  REQUIRE(ta.size() == tb.size());
  for (size_t i = 0; i < ta.size(); ++i) {
    CHECK(ta[i].name == tb[i].name);
    CHECK(ta[i].tensor->shape == tb[i].tensor->shape);
    CHECK(std::memcmp(ta[i].tensor->ptr(), tb[i].tensor->ptr(), ta[i].tensor->size() * 4) == 0);
  }
  CHECK(serialize_model(back) == serialize_model(m));
}

// Format version 1, written here from its description (no storage field, every tensor f32): files
// from before bf16 storage must keep loading.
std::vector<uint8_t> version1_bytes(Model& m) {
  std::vector<uint8_t> payload;
  auto put32 = [&](uint32_t v) { payload.insert(payload.end(), (uint8_t*)&v, (uint8_t*)&v + 4); };
  put32(uint32_t(m.arch.feature_set)), put32(uint32_t(m.arch.blocks)), put32(uint32_t(m.arch.channels));
  put32(uint32_t(m.arch.activation));
  payload.insert(payload.end(), (uint8_t*)&m.arch.bn_eps, (uint8_t*)&m.arch.bn_eps + 4);
  put32(uint32_t(m.tensors().size()));
  for (const auto& [name, t, trainable] : m.tensors()) {
    put32(uint32_t(name.size()));
    payload.insert(payload.end(), name.begin(), name.end());
    put32(uint32_t(t->shape.size()));
    for (int d : t->shape) put32(uint32_t(d));
    payload.insert(payload.end(), (uint8_t*)t->ptr(), (uint8_t*)t->ptr() + t->size() * 4);
  }
  std::vector<uint8_t> out = {'J', 'I', 'R', 'I', 'K', 'I', 'N', 'N', 1, 0, 0, 0};
  const uint64_t size = payload.size(), sum = jiriki::fnv1a64(payload.data(), payload.size());
  out.insert(out.end(), (uint8_t*)&size, (uint8_t*)&size + 8);
  out.insert(out.end(), payload.begin(), payload.end());
  out.insert(out.end(), (uint8_t*)&sum, (uint8_t*)&sum + 8);
  return out;
}

TEST_CASE("model file: bf16 storage rounds the weights only, halving the file; version 1 still loads",
          "[nn][model][file]") {
  Model m = small_model(Activation::RELU, 9);
  for (auto& t : m.tensors())  // non-trivial BN statistics and biases, which must survive exactly
    if (t.tensor->shape.size() == 1)
      for (size_t i = 0; i < t.tensor->size(); ++i) t.tensor->data[i] = 0.1f + 0.37f * float(i % 7) + 1e-7f * float(i);
  const std::vector<uint8_t> f32 = serialize_model(m), bf16 = serialize_model(m, WeightStorage::BF16);
  CHECK(double(bf16.size()) < 0.6 * double(f32.size()));
  ModelFileSummary summary;
  Model back = deserialize_model(bf16.data(), bf16.size(), "bf16", &summary);
  CHECK(summary.version == 2);
  int rounded = 0;
  auto ta = m.tensors(), tb = back.tensors();
  for (size_t i = 0; i < ta.size(); ++i) {
    INFO(ta[i].name);
    const bool weight = ta[i].trainable && ta[i].tensor->shape.size() >= 2;
    rounded += weight;
    for (size_t k = 0; k < ta[i].tensor->size(); ++k) {
      const float a = ta[i].tensor->data[k], b = tb[i].tensor->data[k];
      if (!weight) {
        REQUIRE(std::memcmp(&a, &b, 4) == 0);
        continue;
      }
      uint32_t bits;
      std::memcpy(&bits, &b, 4);
      REQUIRE((bits & 0xffff) == 0);                    // a bf16 number
      REQUIRE(std::fabs(a - b) <= std::fabs(a) / 256);  // the nearest one: within half of bf16's 2^-7 step
    }
  }
  CHECK(summary.bf16_tensors == rounded);
  CHECK(rounded == 2 * m.arch.blocks + 5);  // stem, 2 per block, policy head, value head's conv and 2 fc

  std::vector<uint8_t> v1 = version1_bytes(m);
  ModelFileSummary s1;
  Model old = deserialize_model(v1.data(), v1.size(), "v1", &s1);
  CHECK(s1.version == 1);
  CHECK(s1.bf16_tensors == 0);
  CHECK(serialize_model(old) == f32);
}

TEST_CASE("model file: each kind of corruption is rejected with its message", "[nn][model][file]") {
  const std::vector<uint8_t> good = serialize_model(small_model());
  REQUIRE(load_error(good).empty());

  auto bad = good;
  bad[0] = 'X';
  CHECK_THAT(load_error(bad), Contains("wrong magic"));
  CHECK_THAT(load_error({'J', 'I', 'R'}), Contains("wrong magic"));

  bad = good;
  bad[8] = 3;  // format version 3
  CHECK_THAT(load_error(bad), Contains("unsupported model format version 3"));

  CHECK_THAT(load_error(std::vector<uint8_t>(good.begin(), good.begin() + 14)), Contains("truncated"));
  CHECK_THAT(load_error(std::vector<uint8_t>(good.begin(), good.end() - 1)), Contains("truncated"));
  CHECK_THAT(load_error(std::vector<uint8_t>(good.begin(), good.begin() + good.size() / 2)), Contains("truncated"));

  bad = good;
  bad.push_back(0);
  CHECK_THAT(load_error(bad), Contains("trailing data"));

  bad = good;
  bad[good.size() / 2] ^= 0x10;  // one bit inside the tensor data
  CHECK_THAT(load_error(bad), Contains("checksum mismatch"));

  // A well-formed file whose tensor does not fit the architecture it declares.
  Model wrong = small_model();
  wrong.blocks[1].conv1.weight = Tensor({8, 8, 5, 5});
  CHECK_THAT(
      load_error(serialize_model(wrong)),
      Contains(
          "shape mismatch: tensor 'blocks.1.conv1.weight' is [8,8,5,5] in the file, the architecture needs [8,8,3,3]"));

  // A header claiming 1000 blocks over the tensors of 2, with a checksum that matches: refused
  // before anything is allocated for the 1000 blocks. Payload offset 20: feature set, then blocks.
  bad = good;
  const uint32_t blocks = 1000;
  std::memcpy(&bad[24], &blocks, 4);
  const uint64_t sum = jiriki::fnv1a64(bad.data() + 20, bad.size() - 28);
  std::memcpy(&bad[bad.size() - 8], &sum, 8);
  CHECK_THAT(load_error(bad), Contains("shape mismatch: a network of 1000 blocks and 8 channels has"));

  CHECK_THROWS_WITH(load_model(temp_path("does_not_exist.bin")), Contains("cannot open"));
  // A directory given as a model: named, not basic_filebuf::underflow.
  const std::string dir = std::filesystem::temp_directory_path().string();
  CHECK_THROWS_WITH(load_model(dir), Contains(dir) && Contains("a directory, not a model file"));
}

namespace {
// Runs the jiriki binary with a shell command line; returns exit status and combined output.
std::pair<int, std::string> run_jiriki(const std::string& args) {
  std::string cmd = std::string(JIRIKI_BINARY) + " " + args + " 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  REQUIRE(f);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  int status = pclose(f);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}
}  // namespace

TEST_CASE("jiriki nn init, info and eval", "[nn][model][cli]") {
  const std::string path = temp_path("cli.bin");
  auto [rc, out] = run_jiriki("nn init --blocks 1 --channels 8 --activation swish --seed 3 -o " + path);
  REQUIRE(rc == 0);
  std::tie(rc, out) = run_jiriki("nn info " + path);
  CHECK(rc == 0);
  CHECK_THAT(out, Contains("1 blocks, 8 channels, swish"));
  // A White-to-move position; the listed moves are White's, and 5 of them are shown.
  std::tie(rc, out) = run_jiriki("nn eval " + path +
                                 " --backend reference --top 5 --sfen "
                                 "'lnsgkgsnl/1r5b1/ppppppppp/9/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL w - 2'");
  CHECK(rc == 0);
  CHECK_THAT(out, Contains("probability that white, to move, wins"));
  CHECK_THAT(out, Contains("30 legal moves, top 5"));

  std::tie(rc, out) = run_jiriki("nn convert " + path + " -o " + path + ".bf16");
  CHECK(rc == 0);
  std::tie(rc, out) = run_jiriki("nn info " + path + ".bf16");
  CHECK(rc == 0);
  CHECK_THAT(out, Contains("model format version 2") && Contains("stored in bf16"));
  std::tie(rc, out) = run_jiriki("nn eval " + path + ".bf16 --backend reference --top 5");
  CHECK(rc == 0);
  CHECK_THAT(out, Contains("30 legal moves, top 5"));
  std::tie(rc, out) = run_jiriki("nn convert " + path + " -o " + path + ".x --weights f16");
  CHECK(rc != 0);
  CHECK_THAT(out, Contains("--weights must be bf16 or f32"));
  std::filesystem::remove(path + ".bf16");
  auto bytes = serialize_model(load_model(path));
  bytes[bytes.size() - 3] ^= 1;  // inside the checksum
  write_bytes(path, bytes);
  std::tie(rc, out) = run_jiriki("nn eval " + path);
  CHECK(rc == 1);
  CHECK_THAT(out, Contains("checksum mismatch"));
  std::tie(rc, out) = run_jiriki("nn init --blocks 1 --channels 8 --activation tanh -o " + path);
  CHECK(rc != 0);
  CHECK_THAT(out, Contains("unknown activation 'tanh'"));
  std::filesystem::remove(path);
}
