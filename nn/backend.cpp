// Backend selection: names of the kinds and precisions, and the factory.
#include "nn/backend.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <vector>

#include "common/platform.h"
#include "nn/cpu_kernels.h"
#include "nn/features.h"
#include "shogi/movegen.h"

namespace jiriki::nn {

BackendKind parse_backend_kind(const std::string& name) {
  if (name == "reference") return BackendKind::REFERENCE;
  if (name == "cpu") return BackendKind::CPU;
  if (name == "simd") return BackendKind::SIMD;
  if (name == "onednn") return BackendKind::ONEDNN;
  if (name == "cuda") return BackendKind::CUDA;
  throw std::invalid_argument("unknown backend '" + name + "' (expected cpu, cuda, simd, onednn or reference)");
}

const char* backend_kind_name(BackendKind k) {
  switch (k) {
    case BackendKind::REFERENCE: return "reference";
    case BackendKind::CPU: return "cpu";
    case BackendKind::SIMD: return "simd";
    case BackendKind::ONEDNN: return "onednn";
    case BackendKind::CUDA: return "cuda";
  }
  return "?";
}

BackendKind default_cpu_backend() {
#if JIRIKI_HAVE_DNNL
  return BackendKind::ONEDNN;
#else
  return BackendKind::SIMD;
#endif
}

// The one place where the JIRIKI_* variables of the CUDA code are read.
CudaSettings CudaSettings::from_environment() {
  CudaSettings s;
  auto number = [](const char* name) -> std::optional<int> {
    const char* v = std::getenv(name);
    return v ? std::optional<int>(std::atoi(v)) : std::nullopt;
  };
  if (auto v = number("JIRIKI_CUDA_SQUARE")) s.tower = std::clamp(*v, 0, 1) == 1 ? Tower::SQUARE : Tower::CUDNN;
  if (auto v = number("JIRIKI_CUDA_PARTS")) s.parts = std::clamp(*v, 0, 2);
  if (auto v = number("JIRIKI_CUDNN_CANDIDATES")) s.engine_candidates = std::max(1, *v);
  if (auto v = number("JIRIKI_CUDNN_SWEEP")) s.cudnn_sweep = std::max(0, *v);
  s.unfused = std::getenv("JIRIKI_CUDA_UNFUSED") != nullptr;
  if (const char* e = std::getenv("JIRIKI_CUDA_SPIN")) s.spin = *e != '0';
  s.verbose = std::getenv("JIRIKI_CUDA_VERBOSE") != nullptr;
  if (const char* e = std::getenv("JIRIKI_CUDA_PROFILE")) s.profile = *e == '1';
  s.choice_file = user_cache_file("JIRIKI_CUDNN_CACHE", "cudnn-choices.txt");
  return s;
}

namespace {
std::atomic<int64_t> g_resolutions{0};
}

int64_t backend_resolutions() { return g_resolutions.load(); }

BackendChoice resolve_backend(const std::string& name, BackendUse use) {
  ++g_resolutions;
  const bool inference = use == BackendUse::INFERENCE;
  if (name == "cpu" || name == "cuda" || (inference && (name == "reference" || name == "simd" || name == "onednn")))
    return {parse_backend_kind(name), "asked for"};
  if (name != "auto")
    throw std::invalid_argument("unknown backend '" + name + "' (expected " +
                                (inference ? "auto, cpu, cuda, simd, onednn or reference)" : "auto, cpu or cuda)"));
  std::string why;
  if (const int n = cuda_device_count(&why); n > 0)
    return {BackendKind::CUDA, "auto: " + std::to_string(n) + " CUDA device" + (n == 1 ? "" : "s") + " found"};
  return {BackendKind::CPU, "auto: " + why};
}

#if !JIRIKI_HAVE_CUDA
std::vector<int> cuda_devices(std::string* why) {
  if (why) *why = "this jiriki was built without CUDA";
  return {};
}
int cuda_device_count(std::string* why) { return int(cuda_devices(why).size()); }
#endif

Precision parse_precision(const std::string& name) {
  if (name == "auto") return Precision::AUTO;
  if (name == "fp32") return Precision::FP32;
  if (name == "fp16") return Precision::FP16;
  if (name == "bf16") return Precision::BF16;
  if (name == "int8") return Precision::INT8;
  throw std::invalid_argument("unknown precision '" + name + "' (expected auto, fp32, fp16, bf16 or int8)");
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::AUTO: return "auto";
    case Precision::FP32: return "fp32";
    case Precision::FP16: return "fp16";
    case Precision::BF16: return "bf16";
    case Precision::INT8: return "int8";
  }
  return "?";
}

std::vector<uint8_t> self_play_positions(Evaluator& net, int games, int plies, uint64_t seed) {
  std::vector<Position> board(games);
  std::vector<bool> over(games, false);
  std::vector<uint8_t> out, batch(size_t(games) * PACKED_INPUT_BYTES);
  std::vector<float> logits(size_t(games) * POLICY_SIZE), value(games);
  std::vector<MoveList> moves(games);
  std::mt19937_64 rng(seed);
  for (int ply = 0; ply < plies; ++ply) {
    std::vector<int> live;
    for (int g = 0; g < games; ++g) {
      if (over[g]) continue;
      moves[g] = legal_moves(board[g]);
      if (moves[g].size() == 0) {
        over[g] = true;
        continue;
      }
      encode_packed_features(board[g], batch.data() + live.size() * PACKED_INPUT_BYTES);
      live.push_back(g);
    }
    if (live.empty()) break;
    const int n = int(live.size());
    // Always `games` positions a call (the rows past n hold earlier, finished positions), so that the
    // evaluator makes one plan for one batch size.
    net.evaluate_packed(batch.data(), games, logits.data(), value.data());
    out.insert(out.end(), batch.begin(), batch.begin() + size_t(n) * PACKED_INPUT_BYTES);
    for (int k = 0; k < n; ++k) {
      Position& pos = board[live[k]];
      const MoveList& legal = moves[live[k]];
      const float* l = logits.data() + size_t(k) * POLICY_SIZE;
      std::vector<double> weight(legal.size());
      double most = -1e30, total = 0;
      for (int i = 0; i < legal.size(); ++i)
        most = std::max(most, double(l[move_to_label(legal.moves[i], pos.side_to_move())]));
      for (int i = 0; i < legal.size(); ++i)
        total += weight[i] = std::exp(double(l[move_to_label(legal.moves[i], pos.side_to_move())]) - most);
      double r = double(rng() >> 11) * 0x1.0p-53 * total;
      int pick = 0;
      while (pick + 1 < legal.size() && (r -= weight[pick]) > 0) ++pick;
      pos.do_move(legal.moves[pick]);
    }
  }
  return out;
}

std::vector<float> calibration_once(const std::string& kind, const FoldedModel& m,
                                    const std::function<std::vector<float>()>& compute) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, std::vector<float>>, std::vector<float>> known;
  // Keyed by the stem's weights and biases and the blocks' last biases: enough to tell networks apart.
  std::vector<float> weights = m.stem.weight;
  weights.insert(weights.end(), m.stem.bias.begin(), m.stem.bias.end());
  for (const FoldedConv& c : m.block_conv2) weights.insert(weights.end(), c.bias.begin(), c.bias.end());
  auto key = std::make_pair(kind, std::move(weights));
  std::lock_guard<std::mutex> lock(mutex);  // held while computing: other threads wait for the result
  if (auto it = known.find(key); it != known.end()) return it->second;
  std::vector<float> result = compute();
  known.emplace(std::move(key), result);
  return result;
}

void check_batch_size(int n, int max_batch) {
  if (n < 1 || n > max_batch)
    throw std::invalid_argument("batch of " + std::to_string(n) + " positions; this evaluator takes 1 to " +
                                std::to_string(max_batch));
}

#if !JIRIKI_HAVE_DNNL
bool cpu_has_native_bf16() { return kernels::cpu_supports(kernels::Isa::AVX512_BF16); }
bool cpu_has_native_int8() { return false; }
#endif

void Evaluator::evaluate_packed(const uint8_t* packed, int n, float* policy_logits, float* value) {
  check_batch_size(n, max_batch());
  thread_local std::vector<float> planes;  // one evaluator is used by one thread at a time
  planes.resize(size_t(n) * INPUT_SIZE);
  unpack_features(packed, n, planes.data());
  evaluate(planes.data(), n, policy_logits, value);
}

std::unique_ptr<Evaluator> make_evaluator(const Model& model, const BackendOptions& options) {
  if (options.max_batch < 1) throw std::invalid_argument("max batch must be at least 1");
  switch (options.kind) {
    case BackendKind::REFERENCE: return make_reference_evaluator(model, options);
    case BackendKind::CPU: {
      BackendOptions o = options;
      o.kind = default_cpu_backend();
      return make_evaluator(model, o);
    }
    case BackendKind::SIMD: return make_simd_evaluator(fold_batch_norm(model), options);
    case BackendKind::ONEDNN:
#if JIRIKI_HAVE_DNNL
      return make_onednn_evaluator(fold_batch_norm(model), options);
#else
      throw std::runtime_error(
          "jiriki was built without oneDNN: the onednn backend is unavailable "
          "(--backend cpu runs the simd kernels; install libdnnl-dev and rebuild for oneDNN)");
#endif
    case BackendKind::CUDA:
#if JIRIKI_HAVE_CUDA
      return make_cuda_evaluator(fold_batch_norm(model), options);
#else
      throw std::runtime_error("jiriki was built without CUDA: the cuda backend is unavailable");
#endif
  }
  throw std::invalid_argument("unknown backend kind");
}

}  // namespace jiriki::nn
