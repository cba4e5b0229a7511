// `jiriki nn init|info|convert|eval` and `jiriki bench nn`: create, inspect, evaluate and time networks.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>

#include "command/commands.h"
#include "command/options.h"
#include "common/args.h"
#include "engine/network_setup.h"
#include "nn/backend.h"
#include "nn/features.h"
#include "nn/model_file.h"
#include "shogi/movegen.h"
#if JIRIKI_HAVE_CUDA
#include "nn/cuda/cuda_backend.h"
#endif

namespace jiriki {

using namespace nn;

static std::string describe(const Architecture& a) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%d blocks, %d channels, %s, feature set %u, %.3f GFLOP/position", a.blocks,
                a.channels, activation_name(a.activation), unsigned(a.feature_set),
                2e-9 * double(macs_per_position(a)));
  return buf;
}

// --weights of `nn convert`: "bf16" or "f32".
static WeightStorage parse_weight_storage(const std::string& s) {
  if (s == "bf16") return WeightStorage::BF16;
  if (s == "f32") return WeightStorage::F32;
  throw std::invalid_argument("--weights must be bf16 or f32");
}
static const char* weight_storage_name(WeightStorage w) { return w == WeightStorage::BF16 ? "bf16" : "f32"; }

// The options of a command that evaluates a network: where it runs and in what precision.
struct NetworkOptions {
  options::Device device;
  int threads = 0;  // CPU backend: threads (0: all)
  Precision precision = Precision::AUTO;
};

static void bind_network_options(Args& args, NetworkOptions& o) {
  options::bind_device(args, o.device, BackendUse::INFERENCE, "the CUDA device");
  options::bind_threads(args, o.threads, "CPU backend: threads (0: all)");
  args.bind("precision", o.precision, "auto, fp32, fp16, bf16 or int8 (int8: the CPU backends)", parse_precision,
            precision_name);
}

// The backend the options ask for, resolved, as one evaluator with all the CPU threads (--threads 0).
static engine::NetworkSetup network_setup(const NetworkOptions& o) {
  engine::NetworkSettings s;
  s.backend = o.device.backend;
  s.gpu = options::gpu(o.device);
  s.evaluators = 1;
  s.cpu_threads = o.threads;
  s.precision = o.precision;
  return engine::NetworkSetup::resolve(s);
}

static int nn_init(int argc, char** argv) {
  Args args("jiriki nn init --blocks N --channels C [--activation relu|swish] [--seed S] -o FILE",
            "Writes a freshly initialised network (He-normal weights from the seed).");
  Architecture a;
  uint64_t seed = 1;
  std::string out;
  args.bind("blocks", a.blocks, "residual blocks", 0, 1024)
      .bind("channels", a.channels, "channels of the residual tower", 1, 4096)
      .bind("activation", a.activation, "relu or swish", parse_activation, activation_name)
      .bind("o", out, "model file to write");
  options::bind_seed(args, seed, "seed of the initial weights");
  if (int rc = args.parse(argc, argv); rc >= 0) return rc;
  if (!args.has("o")) throw std::invalid_argument("-o FILE is required");
  Model model(a);
  init_model(model, seed);
  save_model(model, out);
  std::cout << "wrote " << out << ": " << describe(a) << "\n";
  return 0;
}

static int nn_info(int argc, char** argv) {
  Args args("jiriki nn info FILE [--tensors]", "Checks a model file and prints its architecture.");
  bool list_tensors = false;
  args.flag("tensors", list_tensors, "list every tensor with its shape").positionals();
  if (int rc = args.parse(argc, argv); rc >= 0) return rc;
  if (args.rest().size() != 1) throw std::invalid_argument("expected one model file");
  ModelFileSummary file;
  Model model = load_model(args.rest()[0], &file);
  size_t params = 0, tensors = 0;
  for (const auto& [name, t, trainable] : model.tensors()) params += t->size(), ++tensors;
  std::cout << args.rest()[0] << ": model format version " << file.version << ", checksum ok\n"
            << "architecture: " << describe(model.arch) << "\n"
            << "tensors: " << tensors << ", " << params << " floats (BN statistics included); "
            << (file.bf16_tensors ? std::to_string(file.bf16_tensors) + " stored in bf16, the rest in f32\n"
                                  : std::string("all stored in f32\n"));
  if (list_tensors)
    for (const auto& [name, t, trainable] : model.tensors())
      std::cout << "  " << name << " " << shape_string(t->shape) << "\n";
  return 0;
}

static int nn_convert(int argc, char** argv) {
  Args args("jiriki nn convert FILE -o OUT [--weights bf16|f32]",
            "Rewrites a model file in the current format, its weights stored in bf16 (half the size: how the\n"
            "shipped networks are kept) or f32. Biases and batch-norm parameters stay f32.");
  std::string out;
  WeightStorage weights = WeightStorage::BF16;
  args.bind("o", out, "model file to write")
      .bind("weights", weights, "bf16 or f32", parse_weight_storage, weight_storage_name)
      .positionals();
  if (int rc = args.parse(argc, argv); rc >= 0) return rc;
  if (args.rest().size() != 1) throw std::invalid_argument("expected one model file");
  if (!args.has("o")) throw std::invalid_argument("-o OUT is required");
  Model model = load_model(args.rest()[0]);
  save_model(model, out, weights);
  std::cout << "wrote " << out << ": " << describe(model.arch) << ", weights in " << weight_storage_name(weights)
            << "\n";
  return 0;
}

static int nn_eval(int argc, char** argv) {
  Args args("jiriki nn eval FILE [--sfen S] [--backend auto|cpu|cuda|reference] [--top K]",
            "Prints the value (win probability of the side to move) and the most likely moves.");
  std::string sfen = "startpos";
  int top_moves = 10;
  NetworkOptions network;
  args.bind("sfen", sfen, "position to evaluate").bind("top", top_moves, "moves to list", 0);
  bind_network_options(args, network);
  args.positionals();
  if (int rc = args.parse(argc, argv); rc >= 0) return rc;
  if (args.rest().size() != 1) throw std::invalid_argument("expected one model file");
  Position pos;
  if (auto err = pos.set_sfen(sfen)) throw std::invalid_argument("bad --sfen: " + *err);
  Model model = load_model(args.rest()[0]);
  const engine::NetworkSetup setup = network_setup(network);
  auto eval = setup.make_evaluator(model, 1);

  std::vector<float> features(INPUT_SIZE), logits(POLICY_SIZE);
  float value = 0;
  encode_features(pos, features.data());
  eval->evaluate(features.data(), 1, logits.data(), &value);

  std::cout << "backend: " << eval->name() << " [" << setup.backend.reason << "]\n"
            << "value: " << value << " (probability that " << (pos.side_to_move() == BLACK ? "black" : "white")
            << ", to move, wins)\n";
  MoveList moves = legal_moves(pos);
  if (moves.size() == 0) {
    std::cout << "no legal moves\n";
    return 0;
  }
  // Softmax over the legal moves only, as the search sees the policy.
  std::vector<std::pair<float, Move>> scored;
  float max_logit = -INFINITY;
  for (Move m : moves) {
    scored.emplace_back(logits[move_to_label(m, pos.side_to_move())], m);
    max_logit = std::max(max_logit, scored.back().first);
  }
  double sum = 0;
  for (auto& [l, m] : scored) sum += std::exp(double(l - max_logit));
  std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  int top = std::min<int>(top_moves, int(scored.size()));
  std::cout << "policy (" << moves.size() << " legal moves, top " << top << "):\n";
  for (int i = 0; i < top; ++i) {
    double p = std::exp(double(scored[i].first - max_logit)) / sum;
    std::printf("  %-6s %6.2f%%  logit %+.4f\n", move_to_usi(scored[i].second).c_str(), 100 * p, scored[i].first);
  }
  return 0;
}

int cmd_nn(int argc, char** argv) {
  const std::string sub = argc >= 2 ? argv[1] : "";
  if (sub == "init") return nn_init(argc - 1, argv + 1);
  if (sub == "info") return nn_info(argc - 1, argv + 1);
  if (sub == "convert") return nn_convert(argc - 1, argv + 1);
  if (sub == "eval") return nn_eval(argc - 1, argv + 1);
  std::cout << "usage: jiriki nn init|info|convert|eval [OPTIONS]\n\n"
               "  init     write a freshly initialised network\n"
               "  info     check a model file and print its architecture\n"
               "  convert  rewrite a model file with bf16 (or f32) weights\n"
               "  eval     evaluate one position\n";
  return sub == "--help" || sub == "-h" ? 0 : 2;
}

// Positions from random games, so that the benchmark runs on real inputs.
static std::vector<float> random_position_features(int count, uint64_t seed) {
  std::vector<float> out(size_t(count) * INPUT_SIZE);
  std::mt19937_64 rng(seed);
  Position pos;
  for (int i = 0; i < count; ++i) {
    MoveList moves = legal_moves(pos);
    if (moves.size() == 0 || pos.game_ply() > 200) {
      pos.set_startpos();
      moves = legal_moves(pos);
    }
    pos.do_move(moves.moves[rng() % moves.size()]);
    encode_features(pos, out.data() + size_t(i) * INPUT_SIZE);
  }
  return out;
}

// For scripts/torch_reference.py: int32 n, then the n x 119 x 81 features, the backend's n x 2187
// policy logits and its n win probabilities, all float32, little-endian.
static void dump_outputs(const std::string& path, Evaluator& eval, const std::vector<float>& features, int n) {
  std::vector<float> logits(size_t(n) * POLICY_SIZE), values(n);
  eval.evaluate(features.data(), n, logits.data(), values.data());
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  const int32_t count = n;
  f.write(reinterpret_cast<const char*>(&count), sizeof count);
  f.write(reinterpret_cast<const char*>(features.data()), std::streamsize(size_t(n) * INPUT_SIZE * sizeof(float)));
  f.write(reinterpret_cast<const char*>(logits.data()), std::streamsize(logits.size() * sizeof(float)));
  f.write(reinterpret_cast<const char*>(values.data()), std::streamsize(values.size() * sizeof(float)));
  if (!f.flush()) throw std::runtime_error(path + ": write failed");
  std::cout << "wrote " << n << " positions and their outputs to " << path << "\n";
}

#if JIRIKI_HAVE_CUDA
// The CUDA backend's forward pass alone, inputs and outputs left on the GPU: the figure that
// frameworks' GPU timings report (evaluate() adds host conversion and PCIe copies). Timed the way
// scripts/torch_reference.py times PyTorch, so that the two figures compare like with like: a few
// warm-up replays, then five windows of seconds/5 each, and the median window. A GPU under
// sustained load lowers its clocks, so one long window would read slower than short ones.
// The replays read real positions: one evaluate() first leaves them in the GPU's input buffer. (The
// GPU draws less power on all-zero inputs and keeps higher clocks: an H100 at batch 1024 read 9%
// faster on the zeroed buffer than on positions.)
static void bench_gpu_only(Evaluator& eval, const std::vector<int64_t>& batches, double seconds, double flop,
                           const std::vector<float>& features) {
  constexpr int WINDOWS = 5;
  std::cout << "GPU only (inputs and outputs already on the GPU, CUDA graph replays timed with CUDA events, "
               "median of "
            << WINDOWS << " windows):\n";
  // tower: whose 3x3 convolutions the bucket runs, cuDNN's or the square-major Hopper kernel.
  std::printf("%7s %14s %12s %10s %8s %9s %7s\n", "batch", "positions/s", "latency_ms", "GFLOP/s", "replays", "spread%",
              "tower");
  for (int64_t b : batches) {
    const int n = int(b);
    std::vector<float> logits(size_t(n) * POLICY_SIZE), values(n);
    eval.evaluate(features.data(), n, logits.data(), values.data());
    const double once = cuda_device_seconds_per_batch(eval, n, 3);
    const int reps = int(std::clamp(seconds / WINDOWS / once, 5.0, 100000.0));
    std::vector<double> window(WINDOWS);
    for (double& w : window) w = cuda_device_seconds_per_batch(eval, n, reps);
    std::sort(window.begin(), window.end());
    const double s = window[WINDOWS / 2], spread = 100 * (window.back() - window.front()) / s;
    std::printf("%7d %14.1f %12.3f %10.1f %8d %9.1f %7s\n", n, n / s, 1e3 * s, n / s * flop * 1e-9, WINDOWS * reps,
                spread, cuda_uses_square_conv(eval, n) ? "square" : "cudnn");
  }
}
#endif

int bench_nn(int argc, char** argv) {
  Args args("jiriki bench nn --model FILE [--backend auto|cpu|cuda] [--batch 1,16,64,256,1024] [--seconds S]",
            "Positions per second and latency of a backend at each batch size.");
  std::string model_file, dump;
  std::vector<int64_t> batches = {1, 16, 64, 256, 1024};
  double seconds = 3;
  bool gpu_only = false, packed_input = false;
  std::string isa = "best";
  NetworkOptions network;
  args.bind("model", model_file, "model file (required)")
      .bind("batch", batches, "batch sizes", int64_t(1), int64_t(65536))
      .bind("seconds", seconds, "time spent at each batch size")
      .bind("dump", dump,
            "then write the largest batch's features and outputs to this file (scripts/torch_reference.py)")
      .flag("gpu-only", gpu_only, "cuda: time only the forward pass on the GPU, not evaluate() from host memory")
      .flag("packed", packed_input,
            "time evaluate_packed() from bit-packed planes (the search's path), not evaluate() from floats")
      .bind("isa", isa, "simd backend: the widest instruction set its kernels may use: best, avx2 or scalar");
  bind_network_options(args, network);
  if (int rc = args.parse(argc, argv); rc >= 0) return rc;
  if (!args.has("model")) throw std::invalid_argument("--model FILE is required");
  if (isa != "best" && isa != "avx2" && isa != "scalar")
    throw std::invalid_argument("--isa must be best, avx2 or scalar, not \"" + isa + "\"");
  if (isa != "best" && network.device.backend != "simd")
    throw std::invalid_argument("--isa is the simd backend's: give --backend simd");
  const int max_batch = int(*std::max_element(batches.begin(), batches.end()));

  Model model = load_model(model_file);
  const engine::NetworkSetup setup = network_setup(network);
  const bool cuda = setup.on_gpu();
  if (gpu_only && !cuda) throw std::invalid_argument("--gpu-only needs the cuda backend");
  std::unique_ptr<Evaluator> eval;
  if (isa == "best") {
    eval = setup.make_evaluator(model, max_batch);
  } else {  // the simd kernels under a cap, as the tests run them
    BackendOptions o;
    o.kind = BackendKind::SIMD;
    o.max_batch = max_batch;
    o.threads = network.threads;
    o.precision = network.precision;
    o.cpu_isa = isa == "avx2" ? CpuIsa::AVX2 : CpuIsa::SCALAR;
    eval = make_evaluator(model, o);
  }
  std::vector<float> features = random_position_features(max_batch, 1);
  std::vector<float> logits(size_t(max_batch) * POLICY_SIZE), values(max_batch);
  const double flop = 2.0 * double(macs_per_position(model.arch));

  std::cout << "model: " << model_file << " (" << describe(model.arch) << ")\n"
            << "backend: " << eval->name() << " [" << setup.backend.reason << "]\n";
  // The same positions as bits (every plane is 0 or 1), for --packed.
  std::vector<uint8_t> packed(size_t(max_batch) * PACKED_INPUT_BYTES, 0);
  for (size_t i = 0; i < features.size(); ++i)
    if (features[i] != 0.0f)
      packed[i / INPUT_SIZE * PACKED_INPUT_BYTES + i % INPUT_SIZE / 8] |= uint8_t(1u << (i % INPUT_SIZE % 8));
  auto call = [&](int n) {
    if (packed_input) eval->evaluate_packed(packed.data(), n, logits.data(), values.data());
    else eval->evaluate(features.data(), n, logits.data(), values.data());
  };
  if (packed_input && !gpu_only) std::cout << "evaluate_packed(): from bit-packed planes\n";
  if (!gpu_only) std::printf("%7s %14s %12s %10s %8s\n", "batch", "positions/s", "latency_ms", "GFLOP/s", "calls");
  for (int64_t b : gpu_only ? std::vector<int64_t>{} : batches) {
    const int n = int(b);
    call(n);  // warm-up: builds the plan
    int calls = 0;
    auto t0 = std::chrono::steady_clock::now();
    double elapsed = 0;
    while (elapsed < seconds || calls < 3) {
      call(n);
      ++calls;
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    double pps = double(calls) * n / elapsed;
    std::printf("%7d %14.1f %12.3f %10.1f %8d\n", n, pps, 1e3 * elapsed / calls, pps * flop * 1e-9, calls);
  }
#if JIRIKI_HAVE_CUDA
  if (cuda) bench_gpu_only(*eval, batches, seconds, flop, features);
#endif
  if (!dump.empty()) dump_outputs(dump, *eval, features, max_batch);
  return 0;
}

}  // namespace jiriki
