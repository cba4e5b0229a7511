// The one narrow interface between the engine, self-play and the trainer on one side and the
// inference backends on the other (in the spirit of KataGo's nninterface.h): a batch of encoded
// positions in, policy logits and win probabilities out.
//
// Backends:
//   reference  plain direct loops on the training form (nn/reference.cpp); the test oracle
//   cpu        the default CPU evaluator (default_cpu_backend): onednn where built with it, else simd
//   simd       the project's own SIMD kernels (nn/simd_backend.cpp, nn/cpu_kernels.h): AVX2 + FMA,
//              AVX-512F and AVX-512 BF16 chosen at run time; every build has it
//   onednn     oneDNN (nn/cpu_backend.cpp), only when built with JIRIKI_HAVE_DNNL
//   cuda       cuDNN + cuBLAS (nn/cuda/), only when built with JIRIKI_HAVE_CUDA
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/model.h"

namespace jiriki::nn {

enum class BackendKind { REFERENCE, CPU, SIMD, ONEDNN, CUDA };
// "reference" | "cpu" | "simd" | "onednn" | "cuda"; throws std::invalid_argument
BackendKind parse_backend_kind(const std::string& name);
const char* backend_kind_name(BackendKind k);
// The evaluator `cpu` stands for (SIMD or ONEDNN) in this build.
BackendKind default_cpu_backend();

// What a backend is asked for: evaluating a network (reference, cpu, simd, onednn, cuda) or training
// one (cpu: training/network.h, cuda: training/cuda/; no other).
enum class BackendUse { INFERENCE, TRAINING };

// The backend a command runs on and why, for the one line every command prints.
struct BackendChoice {
  BackendKind kind = BackendKind::CPU;
  std::string reason;  // e.g. "auto: no CUDA device available (no CUDA-capable device is detected)"
  std::string line() const { return std::string("backend: ") + backend_kind_name(kind) + " (" + reason + ")"; }
};

// The one place where "auto" | "cpu" | "cuda" | "simd" | "onednn" | "reference" (--backend, USI's
// Backend) becomes a backend, for every command that evaluates or trains a network. "auto" is the GPU
// when one is usable (built with CUDA and a device present), else the CPU. A named backend is taken
// as asked; one not built in or not usable fails later, when it is made, with the reason. Throws
// std::invalid_argument for an unknown name (training takes only auto, cpu and cuda).
BackendChoice resolve_backend(const std::string& name, BackendUse use = BackendUse::INFERENCE);
// How many times resolve_backend has run in this process (on a CUDA build "auto" asks the driver):
// tests check that a set-up resolves its backend once (engine/network_setup.h).
int64_t backend_resolutions();

// CUDA devices this process can use: 0 when built without CUDA or when the driver finds none, with
// the reason in `why` (when given).
int cuda_device_count(std::string* why = nullptr);
// Their indices, as --gpus and CUDA_VISIBLE_DEVICES number them: a device too old for the backend
// is skipped, so the list need not start at 0 or be contiguous.
std::vector<int> cuda_devices(std::string* why = nullptr);

// Arithmetic the backend computes in. AUTO: bf16 on the GPU; on both CPU backends int8 where the CPU
// has AVX2 or wider (ReLU networks; cpu_has_native_int8, kernels::int8_kernels), else bf16 where it
// has AVX-512 bf16 instructions, else fp32. INT8: the CPU backends (nn/cpu_backend.cpp,
// nn/simd_backend.cpp), on AVX2 or wider.
enum class Precision { AUTO, FP32, FP16, BF16, INT8 };
Precision parse_precision(const std::string& name);  // "auto" | "fp32" | "fp16" | "bf16" | "int8"; throws
const char* precision_name(Precision p);
// Whether this CPU computes bf16 natively (AVX-512 BF16, as the simd kernels and oneDNN use it;
// oneDNN's emulation elsewhere is slower than fp32).
bool cpu_has_native_bf16();
// Whether oneDNN computes int8 convolutions with integer multiply-adds on this CPU, AVX2's or wider
// (AVX-512 VNNI, AMX; false in a build without oneDNN): where the onednn backend's AUTO is int8.
bool cpu_has_native_int8();

// The widest instruction set the simd backend may use: BEST is the processor's widest (AVX-512 where
// it has it); AVX2 and SCALAR cap it, so that tests run every path on one machine.
enum class CpuIsa { BEST, AVX2, SCALAR };

// Settings of the CUDA backend's convolutions (nn/cuda/) and of the GPU trainer's, typed and passed
// down (BackendOptions::cuda, training::TrainConfig::cuda). A default-constructed one keeps no file
// of tuned engines and logs nothing: what tests want. The commands take from_environment(), where
// the JIRIKI_* variables of the README override the defaults.
struct CudaSettings {
  // Whose 3x3 convolutions a batch bucket's tower runs (nn/cuda/square_conv.h).
  enum class Tower { TIMED, CUDNN, SQUARE };
  Tower tower = Tower::TIMED;  // JIRIKI_CUDA_SQUARE: 0 cuDNN, 1 square-major where it applies; unset: the faster
  int parts = 0;               // JIRIKI_CUDA_PARTS: a bucket as 1 or 2 half towers; 0: the faster
  int engine_candidates = 16;  // JIRIKI_CUDNN_CANDIDATES: cuDNN engine configurations timed per convolution
  int cudnn_sweep = -1;        // JIRIKI_CUDNN_SWEEP: kernel configurations timed beyond cuDNN's heuristics for
                               // every fused convolution; -1: 14 for inference from batch 256 on, else none
  bool unfused = false;        // JIRIKI_CUDA_UNFUSED: the convolution alone, then our epilogue kernel
  std::string choice_file;     // JIRIKI_CUDNN_CACHE: the file of tuned engines ("": none; "off" in the variable)
  bool spin = true;            // JIRIKI_CUDA_SPIN=0: a thread waiting for its batch sleeps instead of spinning on
                               // its core, leaving the cores to other searches sharing the GPU (matches)
  bool verbose = false;        // JIRIKI_CUDA_VERBOSE: engine choices and timings to stderr
  bool profile = false;        // JIRIKI_CUDA_PROFILE=1: the GPU trainer's timing runs one step for a profiler

  // The defaults with the JIRIKI_* variables' overrides; the choice file defaults to
  // $XDG_CACHE_HOME/jiriki/cudnn-choices.txt, else ~/.cache/jiriki/cudnn-choices.txt.
  static CudaSettings from_environment();
};

struct BackendOptions {
  BackendKind kind = BackendKind::CPU;
  int threads = 0;      // CPU threads; 0 = all hardware threads
  int gpu = 0;          // CUDA device index
  int max_batch = 256;  // largest n evaluate() accepts
  Precision precision = Precision::AUTO;
  CpuIsa cpu_isa = CpuIsa::BEST;  // the simd backend's
  CudaSettings cuda;              // the cuda backend's
};

// Evaluates batches of positions. One evaluator is used by one thread at a time; make one per
// search thread or GPU stream. Construction does the expensive setup (weights uploaded, layouts
// chosen); evaluate() is the hot path.
class Evaluator {
 public:
  virtual ~Evaluator() = default;
  // features:      n x 119 x 81 floats, NCHW, as written by nn::encode_features.
  // policy_logits: n x 2187 raw logits, index 81 * label + square (side-to-move view); the caller
  //                masks illegal moves and applies the softmax.
  // value:         n win probabilities of the side to move, sigmoid of the value logit, in [0,1].
  // 1 <= n <= max_batch(); throws std::invalid_argument otherwise.
  virtual void evaluate(const float* features, int n, float* policy_logits, float* value) = 0;
  // The same from n x PACKED_INPUT_BYTES bytes written by nn::encode_packed_features, the search's
  // and self-play's path. This default expands the bits on the host and calls evaluate(); the CUDA
  // backend copies the bits and expands them on the GPU.
  virtual void evaluate_packed(const uint8_t* packed, int n, float* policy_logits, float* value);
  virtual int max_batch() const = 0;
  virtual std::string name() const = 0;  // e.g. "simd (own avx512-bf16 kernels, 2 threads, bf16)"
};

// Builds the evaluator the options ask for. Throws std::runtime_error naming the problem, e.g.
// "jiriki was built without CUDA" when the backend was not compiled in.
std::unique_ptr<Evaluator> make_evaluator(const Model& model, const BackendOptions& options);

// Backend constructors, one per kind; make_evaluator dispatches to them.
std::unique_ptr<Evaluator> make_reference_evaluator(const Model& model, const BackendOptions& options);
std::unique_ptr<Evaluator> make_simd_evaluator(const FoldedModel& model, const BackendOptions& options);
#if JIRIKI_HAVE_DNNL
std::unique_ptr<Evaluator> make_onednn_evaluator(const FoldedModel& model, const BackendOptions& options);
#endif
#if JIRIKI_HAVE_CUDA
// Implemented in nn/cuda/. The weights are BN-folded, OIHW, fp32; the backend converts them to its
// own layout and precision.
std::unique_ptr<Evaluator> make_cuda_evaluator(const FoldedModel& model, const BackendOptions& options);
#endif

// Positions of `games` games the network plays against itself from the start, each move drawn from
// its policy over the legal moves (softmax of the logits), at most `plies` a game, as packed planes
// (nn/features.h): positions like those a search shows it, for calibrating int8 and for tests.
// Deterministic for a given evaluator and seed; games * plies positions at most. Each call of the
// evaluator takes `games` positions.
std::vector<uint8_t> self_play_positions(Evaluator& net, int games, int plies, uint64_t seed);

// compute()'s result for this network (keyed by its weights) and `kind`, computed once per process:
// every search thread makes an evaluator, and only the first calibrates.
std::vector<float> calibration_once(const std::string& kind, const FoldedModel& m,
                                    const std::function<std::vector<float>()>& compute);

// In int8 an activation past the largest its convolution wrote on the calibration positions
// saturates at 255. A handful do on an ordinary position (0 to 5 on each of the int8 test's
// positions, three networks of 6x64 and 10x128); a position far from those the network was calibrated on
// saturates thousands (gpu-v8 on 2 of 762: 2,129 and 2,317, its activations five times the
// calibrated maxima in the middle blocks, its win probability 0.12 and 0.17 off). The CPU backends count
// each position's saturated activations and evaluate one with more than this many again in fp32.
constexpr int SATURATION_LIMIT = 64;

// The options of the fp32 evaluator with which an int8 one of options `o` evaluates those positions
// again: one position at a time, on the calling thread.
inline BackendOptions saturation_fallback_options(BackendOptions o) {
  o.precision = Precision::FP32;
  o.max_batch = 1;
  o.threads = 1;
  return o;
}

// The CPU backends' int8 calibration, once per network and backend: an fp32 evaluator of the
// backend's class plays 8 games of at most 160 plies against itself, and its
// activation_maxima(packed, count) gives the largest value of each u8 layer over those positions.
template <class Fp32Evaluator>
std::vector<float> calibrated_maxima(const std::string& kind, const FoldedModel& m, int threads) {
  return calibration_once(kind, m, [&] {
    constexpr int GAMES = 8, PLIES = 160;
    BackendOptions o;
    o.precision = Precision::FP32;
    o.threads = threads;
    o.max_batch = GAMES;
    Fp32Evaluator fp32(m, o);
    const std::vector<uint8_t> packed = self_play_positions(fp32, GAMES, PLIES, 1);
    return fp32.activation_maxima(packed.data(), int(packed.size() / PACKED_INPUT_BYTES));
  });
}

// Shared by the backends: throws std::invalid_argument unless 1 <= n <= max_batch.
void check_batch_size(int n, int max_batch);

}  // namespace jiriki::nn
