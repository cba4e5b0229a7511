// The fused convolution through cuDNN's backend descriptor API (see nn/cuda/fused_conv.h).
//
// The operation graph, in cuDNN's terms (tensor dimensions always listed N, C, H, W; NHWC is a
// matter of strides):
//
//   x [N,Cin,9,9] --conv(w [Cout,Cin,k,k])--> c (virtual fp32) --add bias [1,Cout,1,1] fp32--> b
//   b --add residual [N,Cout,9,9]--> s (virtual fp32, only with a residual) --relu|swish--> y
//
// cuDNN's runtime-fusion engines generate one kernel for such a graph (the epilogue applied to the
// accumulators before they leave the chip), so the pre-activation values never touch memory.
// For the trainer the same class builds the bare convolution, the convolution through an identity
// (c --identity--> y, which the runtime-fusion engines also take), the backward data pass
// (w, dy -> dx, optionally + residual) and the backward filter pass (x, dy -> dw).
#include "nn/cuda/fused_conv.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <tuple>
#include <utility>

#include "nn/cuda/kernels.h"

namespace jiriki::nn::cuda {

namespace {

// Owns one backend descriptor. set() and finalize() throw with the attribute's number, since a
// rejected attribute is a bug in this file, not something a user can fix.
class Desc {
 public:
  explicit Desc(cudnnBackendDescriptorType_t type) { JIRIKI_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &d_)); }
  ~Desc() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  Desc(Desc&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
  Desc& operator=(Desc&& o) noexcept {
    std::swap(d_, o.d_);
    return *this;
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;

  cudnnBackendDescriptor_t get() const { return d_; }
  template <class T>
  Desc& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const T* values, int64_t count = 1) {
    cudnnStatus_t s = cudnnBackendSetAttribute(d_, name, type, count, values);
    if (s != CUDNN_STATUS_SUCCESS)
      throw std::runtime_error("CUDA backend: cuDNN rejected attribute " + std::to_string(int(name)) + ": " +
                               cudnn_status_text(s));
    return *this;
  }
  Desc& finalize(const char* what) {
    cudnnStatus_t s = cudnnBackendFinalize(d_);
    if (s != CUDNN_STATUS_SUCCESS)
      throw std::runtime_error(std::string("CUDA backend: cuDNN rejected the ") + what + ": " + cudnn_status_text(s));
    return *this;
  }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

enum Uid : int64_t { X = 1, W, BIAS, RESIDUAL, Y, CONV_OUT, BIASED, SUMMED };

Desc make_tensor(Uid uid, cudnnDataType_t type, int64_t n, int64_t c, int64_t h, int64_t w, bool is_virtual) {
  const std::array<int64_t, 4> dims = {n, c, h, w};
  const std::array<int64_t, 4> nhwc_strides = {h * w * c, 1, w * c, c};
  const int64_t id = uid, alignment = 16;
  Desc t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type)
      .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), 4)
      .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, nhwc_strides.data(), 4)
      .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &id)
      .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &alignment)
      .set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &is_virtual)
      .finalize("tensor");
  return t;
}

}  // namespace

// Every descriptor of the operation graph, kept alive as long as plans made from it.
struct FusedConv::Graph {
  std::deque<Desc> parts;  // a deque: references to its elements stay valid as it grows
  Desc* graph = nullptr;

  cudnnBackendDescriptor_t add_op(Desc&& d) {
    parts.push_back(std::move(d));
    return parts.back().get();
  }
};

struct FusedConv::Plan {
  Desc cfg{CUDNN_BACKEND_ENGINECFG_DESCRIPTOR};
  Desc plan{CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR};
  int64_t workspace = 0;
  int64_t engine = -1;  // cuDNN's global engine index
  bool runtime_compiled = false;
  bool nondeterministic = false;  // cuDNN says results may vary from run to run (atomics)
  float ms = -1.0f;               // measured by tune()
  int heur_mode = 0;              // where the heuristics listed it: their mode ...
  int heur_index = 0;             // ... and its place in their list
  int kernel_cfg = -1;            // KERNEL_CFG knob set by the sweep in place of the heuristics' (-1: theirs)
  std::string knobs;              // its knob choices, for the log: "type=value ..."
};

// ---- engine choices shared by the process ------------------------------------------------------
// Tuning one shape (finalizing up to 16 plans, some compiled at run time by NVRTC, then timing
// each) takes seconds. A search runs an evaluator per thread, all on one GPU, and each meets every
// batch bucket: without sharing, each would tune each bucket again, stalling the search for
// seconds at a time. So the first FusedConv of a shape on a device tunes it and publishes its
// choice; the next ones finalize that one plan and skip the timing. One that arrives while the
// same shape is being tuned waits for the result rather than tuning it twice.
struct FusedConv::Choice {
  bool fused;
  int heur_mode, heur_index, kernel_cfg;
  float ms;
};

namespace {

struct ChoiceEntry {
  bool tuning = false;  // a FusedConv is tuning this shape now
  std::optional<FusedConv::Choice> choice;
};

struct ChoiceCache {
  std::mutex mutex;
  int tuned = 0;  // choices published
  std::condition_variable changed;
  std::map<FusedConv::Key, ChoiceEntry> entries;  // std::map: references stay valid as it grows
  std::string disk_path;                          // the choice file `disk` was read from
  std::map<std::string, FusedConv::Choice> disk;  // its choices by disk_key()
};

ChoiceCache& choice_cache() {
  static ChoiceCache cache;
  return cache;
}

// ---- choices kept on disk ----------------------------------------------------------------------
// Tuning every shape again in each process made `isready` take 10-50 s on a GPU, so each choice is
// also appended to a text file, one line per shape:
//   jiriki-cudnn-2 <key> <fused 0|1> <heuristics mode> <index in their list> <kernel cfg|-1> <ms>
// where the key names the GPU model, its compute capability, the cuDNN version, the shape and the
// number of candidates timed. The file is read when a process first needs it; of two lines for one
// key the later wins. A line that does not parse is ignored, and a choice whose plan no longer
// finalizes is tuned afresh (and appended), so a stale or damaged file costs time, never a wrong
// result. Where: $JIRIKI_CUDNN_CACHE, else $XDG_CACHE_HOME/jiriki/cudnn-choices.txt, else
// ~/.cache/jiriki/cudnn-choices.txt (CudaSettings::choice_file, nn/backend.h); JIRIKI_CUDNN_CACHE=off
// keeps nothing on disk. Delete the file to tune again (after a driver update, say).
constexpr const char* CHOICE_FILE_MAGIC = "jiriki-cudnn-2";

// The file's name for a shape: no spaces, so that a line splits on them.
std::string disk_key(const ConvShape& s, bool force_unfused, int max_candidates) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "/b%d,i%d,o%d,k%d,r%d,a%d,e%d,u%d,p%d,id%d,c%d", s.batch, s.in_channels,
                s.out_channels, s.kernel, int(s.residual), int(s.act), int(s.epilogue), int(force_unfused), int(s.pass),
                int(s.identity), max_candidates);
  return choice_device_key() + buf;
}

// Reads the choice file into cache.disk if it is not the one read last. Under cache.mutex.
void load_choice_file(ChoiceCache& cache, const std::string& path) {
  if (path == cache.disk_path) return;
  cache.disk_path = path;
  cache.disk.clear();
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string magic, key, extra;
    int fused = -1;
    FusedConv::Choice c{};
    if (!(fields >> magic >> key >> fused >> c.heur_mode >> c.heur_index >> c.kernel_cfg >> c.ms) || fields >> extra ||
        magic != CHOICE_FILE_MAGIC || (fused != 0 && fused != 1) || c.heur_index < 0 || c.kernel_cfg < -1 ||
        !(c.ms > 0.0f))
      continue;
    c.fused = fused == 1;
    cache.disk[key] = c;
  }
}

// Appends one choice to the file (creating its directory); a file that cannot be written is left
// alone: the choice still serves this process.
void append_choice(const std::string& path, const std::string& key, const FusedConv::Choice& c, bool verbose) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  std::ofstream out(path, std::ios::app);
  char buf[64];
  std::snprintf(buf, sizeof buf, " %d %d %d %d %.6f\n", int(c.fused), c.heur_mode, c.heur_index, c.kernel_cfg,
                double(c.ms));
  out << CHOICE_FILE_MAGIC << ' ' << key << buf;
  if (!out && verbose) std::fprintf(stderr, "[cuda] could not write the tuning file %s\n", path.c_str());
}

}  // namespace

std::string choice_device_key() {
  int device = 0;
  JIRIKI_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop;
  JIRIKI_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  std::string gpu = prop.name;
  for (char& c : gpu)
    if (c == ' ' || c == '\t' || c == '\n') c = '_';
  return gpu + "/sm" + std::to_string(prop.major) + std::to_string(prop.minor) + "/cudnn" +
         std::to_string(size_t(cudnnGetVersion()));
}

int shapes_tuned() {
  ChoiceCache& cache = choice_cache();
  std::lock_guard lock(cache.mutex);
  return cache.tuned;
}

void forget_tuned_shapes() {
  ChoiceCache& cache = choice_cache();
  std::lock_guard lock(cache.mutex);
  for (auto it = cache.entries.begin(); it != cache.entries.end();)
    it = it->second.tuning ? std::next(it) : cache.entries.erase(it);
  cache.disk_path.clear();
  cache.disk.clear();
}

// The pointwise operation y = mode(x [, b]) with fp32 arithmetic.
static cudnnBackendDescriptor_t add_pointwise(FusedConv::Graph& g, cudnnPointwiseMode_t mode, const Desc& x,
                                              const Desc* b, const Desc& y) {
  const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
  Desc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &mode)
      .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &prec);
  if (mode == CUDNN_POINTWISE_SWISH_FWD) {
    const float beta = 1.0f;  // swish(x) = x * sigmoid(beta * x); 1 is the default, said explicitly
    pw.set(CUDNN_ATTR_POINTWISE_SWISH_BETA, CUDNN_TYPE_FLOAT, &beta);
  }
  pw.finalize("pointwise descriptor");
  auto pw_d = pw.get(), x_d = x.get(), y_d = y.get();
  Desc op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  op.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, &pw_d)
      .set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &x_d);
  if (b) {
    auto b_d = b->get();
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &b_d);
  }
  op.set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &y_d).finalize("pointwise operation");
  g.parts.push_back(std::move(pw));
  return g.add_op(std::move(op));
}

// Builds the graph: fused (conv, bias, residual, activation; or conv and identity when the shape has
// no epilogue) or the convolution alone.
static std::unique_ptr<FusedConv::Graph> build_graph(cudnnHandle_t handle, const ConvShape& s, bool fused) {
  auto g = std::make_unique<FusedConv::Graph>();
  const int64_t n = s.batch, k = s.kernel;
  auto tensor = [&](Uid uid, cudnnDataType_t type, int64_t c, int64_t h, int64_t w, bool is_virtual,
                    int64_t batch) -> Desc& {
    g->parts.push_back(make_tensor(uid, type, batch, c, h, w, is_virtual));
    return g->parts.back();
  };
  Desc& x = tensor(X, CUDNN_DATA_BFLOAT16, s.in_channels, 9, 9, false, n);
  Desc& w = tensor(W, CUDNN_DATA_BFLOAT16, s.in_channels, k, k, false, s.out_channels);
  Desc& y = tensor(Y, CUDNN_DATA_BFLOAT16, s.out_channels, 9, 9, false, n);
  // The convolution's own result: y, or for a fused graph a virtual fp32 tensor the pointwise
  // operations read (shaped like x for the backward data pass).
  const bool data = s.pass == ConvPass::BACKWARD_DATA;
  Desc& conv_out = !fused ? (data ? x : y)
                          : tensor(CONV_OUT, CUDNN_DATA_FLOAT, data ? s.in_channels : s.out_channels, 9, 9, true, n);

  const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t spatial = 2, pad[2] = {k / 2, k / 2}, one[2] = {1, 1};
  Desc conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  conv.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &comp)
      .set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, &mode)
      .set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, &spatial)
      .set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, one, 2)
      .set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, one, 2)
      .set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, pad, 2)
      .set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, pad, 2)
      .finalize("convolution descriptor");
  // The convolution operation. cuDNN names its attributes per pass; in each, the first two tensors
  // are read and the third written: forward (x, w) -> y, backward data (w, dy) -> dx, backward
  // filter (x, dy) -> dw. The pass's result is conv_out; for the backward filter pass conv_out is y
  // (never fused), read as dy, and w is written.
  struct OpKind {
    cudnnBackendDescriptorType_t type;
    cudnnBackendAttributeName_t in1, in2, out, conv, alpha, beta;
    const char* what;
  };
  static constexpr OpKind FORWARD_OP = {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
                                        CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
                                        CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
                                        CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
                                        CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                                        CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
                                        CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
                                        "convolution operation"};
  static constexpr OpKind DATA_OP = {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
                                     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
                                     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
                                     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
                                     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
                                     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
                                     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
                                     "convolution backward data operation"};
  static constexpr OpKind FILTER_OP = {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
                                       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
                                       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
                                       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
                                       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
                                       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
                                       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
                                       "convolution backward filter operation"};
  const bool filter = s.pass == ConvPass::BACKWARD_FILTER;
  const OpKind& kind = data ? DATA_OP : filter ? FILTER_OP : FORWARD_OP;
  cudnnBackendDescriptor_t in1 = data ? w.get() : x.get(),
                           in2 = data     ? y.get()
                                 : filter ? conv_out.get()
                                          : w.get(),
                           out = filter ? w.get() : conv_out.get(), conv_d = conv.get();
  const float alpha = 1.0f, beta = 0.0f;
  Desc op(kind.type);
  op.set(kind.in1, CUDNN_TYPE_BACKEND_DESCRIPTOR, &in1)
      .set(kind.in2, CUDNN_TYPE_BACKEND_DESCRIPTOR, &in2)
      .set(kind.out, CUDNN_TYPE_BACKEND_DESCRIPTOR, &out)
      .set(kind.conv, CUDNN_TYPE_BACKEND_DESCRIPTOR, &conv_d)
      .set(kind.alpha, CUDNN_TYPE_FLOAT, &alpha)
      .set(kind.beta, CUDNN_TYPE_FLOAT, &beta)
      .finalize(kind.what);
  g->parts.push_back(std::move(conv));
  std::vector<cudnnBackendDescriptor_t> ops = {g->add_op(std::move(op))};

  if (fused && !s.epilogue) {  // the identity graph, or the addition of the residual
    Desc& out = data ? x : y;
    if (s.residual) {
      Desc& residual = tensor(RESIDUAL, CUDNN_DATA_BFLOAT16, data ? s.in_channels : s.out_channels, 9, 9, false, n);
      ops.push_back(add_pointwise(*g, CUDNN_POINTWISE_ADD, conv_out, &residual, out));
    } else {
      ops.push_back(add_pointwise(*g, CUDNN_POINTWISE_IDENTITY, conv_out, nullptr, out));
    }
  } else if (fused) {
    Desc& bias = tensor(BIAS, CUDNN_DATA_FLOAT, s.out_channels, 1, 1, false, 1);
    Desc& biased = tensor(BIASED, CUDNN_DATA_FLOAT, s.out_channels, 9, 9, true, n);
    ops.push_back(add_pointwise(*g, CUDNN_POINTWISE_ADD, conv_out, &bias, biased));
    Desc* pre_act = &biased;
    if (s.residual) {
      Desc& residual = tensor(RESIDUAL, CUDNN_DATA_BFLOAT16, s.out_channels, 9, 9, false, n);
      Desc& summed = tensor(SUMMED, CUDNN_DATA_FLOAT, s.out_channels, 9, 9, true, n);
      ops.push_back(add_pointwise(*g, CUDNN_POINTWISE_ADD, biased, &residual, summed));
      pre_act = &summed;
    }
    ops.push_back(add_pointwise(*g, s.act == Activation::RELU ? CUDNN_POINTWISE_RELU_FWD : CUDNN_POINTWISE_SWISH_FWD,
                                *pre_act, nullptr, y));
  }

  Desc graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops.data(), int64_t(ops.size()))
      .set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle)
      .finalize("operation graph");
  g->parts.push_back(std::move(graph));
  g->graph = &g->parts.back();
  return g;
}

// Engine configurations cuDNN's heuristics propose for the graph, best first; empty if none.
static std::vector<Desc> heuristic_configs(const Desc& graph, cudnnBackendHeurMode_t mode) {
  auto graph_d = graph.get();
  Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heur.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, &graph_d)
      .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode);
  if (cudnnBackendFinalize(heur.get()) != CUDNN_STATUS_SUCCESS) return {};
  int64_t count = 0;
  if (cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                               nullptr) != CUDNN_STATUS_SUCCESS)
    return {};
  std::vector<Desc> cfgs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    cfgs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    raw.push_back(cfgs.back().get());
  }
  int64_t got = 0;
  if (count == 0 || cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                             count, &got, raw.data()) != CUDNN_STATUS_SUCCESS)
    return {};
  cfgs.erase(cfgs.begin() + got, cfgs.end());
  return cfgs;
}

// The descriptors of `type` that backend descriptor `d` holds in its array attribute `attr`.
static std::deque<Desc> descriptor_array(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t attr,
                                         cudnnBackendDescriptorType_t type) {
  std::deque<Desc> out;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int i = 0; i < CUDNN_KNOB_TYPE_COUNTS; ++i) raw.push_back(out.emplace_back(type).get());
  int64_t n = 0;
  if (cudnnBackendGetAttribute(d, attr, CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(raw.size()), &n, raw.data()) !=
      CUDNN_STATUS_SUCCESS)
    n = 0;
  while (int64_t(out.size()) > n) out.pop_back();
  return out;
}

// For the log: a configuration's knob choices and its engine's knob ranges, in cuDNN's knob type
// numbers: "24=40 of 17:1..128/1 24:0..55/1".
static std::string knob_text(cudnnBackendDescriptor_t cfg, cudnnBackendDescriptor_t engine) {
  auto value = [](const Desc& d, cudnnBackendAttributeName_t attr) {
    int64_t v = 0, got = 0;
    cudnnBackendGetAttribute(d.get(), attr, CUDNN_TYPE_INT64, 1, &got, &v);
    return std::to_string(v);
  };
  auto type = [](const Desc& d, cudnnBackendAttributeName_t attr) {
    cudnnBackendKnobType_t t{};
    int64_t got = 0;
    cudnnBackendGetAttribute(d.get(), attr, CUDNN_TYPE_KNOB_TYPE, 1, &got, &t);
    return std::to_string(int(t));
  };
  std::string text;
  for (const Desc& c : descriptor_array(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR))
    text += type(c, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE) + "=" + value(c, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE) + " ";
  text += "of";
  for (const Desc& k : descriptor_array(engine, CUDNN_ATTR_ENGINE_KNOB_INFO, CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR))
    text.append(" ")
        .append(type(k, CUDNN_ATTR_KNOB_INFO_TYPE))
        .append(":")
        .append(value(k, CUDNN_ATTR_KNOB_INFO_MINIMUM_VALUE))
        .append("..")
        .append(value(k, CUDNN_ATTR_KNOB_INFO_MAXIMUM_VALUE))
        .append("/")
        .append(value(k, CUDNN_ATTR_KNOB_INFO_STRIDE));
  return text;
}

// The engine a configuration runs on.
static Desc config_engine(const Desc& cfg) {
  Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  auto engine_d = engine.get();
  int64_t got = 0;
  JIRIKI_CUDNN_CHECK(cudnnBackendGetAttribute(cfg.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                              &got, &engine_d));
  return engine;
}

// The values the engine's KERNEL_CFG knob takes (none if it has no such knob).
static std::vector<int64_t> kernel_cfg_values(const Desc& engine) {
  std::vector<int64_t> values;
  for (const Desc& k :
       descriptor_array(engine.get(), CUDNN_ATTR_ENGINE_KNOB_INFO, CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR)) {
    cudnnBackendKnobType_t type{};
    int64_t got = 0, lo = 0, hi = -1, stride = 1;
    cudnnBackendGetAttribute(k.get(), CUDNN_ATTR_KNOB_INFO_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &got, &type);
    if (type != CUDNN_KNOB_TYPE_KERNEL_CFG) continue;
    cudnnBackendGetAttribute(k.get(), CUDNN_ATTR_KNOB_INFO_MINIMUM_VALUE, CUDNN_TYPE_INT64, 1, &got, &lo);
    cudnnBackendGetAttribute(k.get(), CUDNN_ATTR_KNOB_INFO_MAXIMUM_VALUE, CUDNN_TYPE_INT64, 1, &got, &hi);
    cudnnBackendGetAttribute(k.get(), CUDNN_ATTR_KNOB_INFO_STRIDE, CUDNN_TYPE_INT64, 1, &got, &stride);
    for (int64_t v = lo; v <= hi && values.size() < 4096; v += std::max<int64_t>(stride, 1)) values.push_back(v);
  }
  return values;
}

// A copy of configuration `cfg` with its KERNEL_CFG knob set to `value`, its other knobs kept;
// nullopt if cuDNN refuses it.
static std::optional<Desc> with_kernel_cfg(const Desc& cfg, int64_t value) {
  Desc engine = config_engine(cfg);
  std::deque<Desc> choices;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (const Desc& c :
       descriptor_array(cfg.get(), CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR)) {
    cudnnBackendKnobType_t type{};
    int64_t got = 0, v = 0;
    cudnnBackendGetAttribute(c.get(), CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &got, &type);
    cudnnBackendGetAttribute(c.get(), CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &got, &v);
    if (type == CUDNN_KNOB_TYPE_KERNEL_CFG) v = value;
    Desc& choice = choices.emplace_back(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
    choice.set(CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, &type)
        .set(CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, &v);
    if (cudnnBackendFinalize(choice.get()) != CUDNN_STATUS_SUCCESS) return std::nullopt;
    raw.push_back(choice.get());
  }
  Desc out(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
  auto engine_d = engine.get();
  out.set(CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, &engine_d);
  if (!raw.empty())
    out.set(CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, raw.data(), int64_t(raw.size()));
  if (cudnnBackendFinalize(out.get()) != CUDNN_STATUS_SUCCESS) return std::nullopt;
  return out;
}

// The KERNEL_CFG sweep: besides the heuristics' list, time K values of that knob (spread evenly over
// its range; a K at least the range's size takes them all) on the first runtime-compiled candidate.
// Each is compiled by NVRTC, 0.3-0.5 s apiece. By default the inference convolutions of batch 256
// and more get K = 14 (every fourth of the 56 values), 20-30 s per batch size, once per machine
// (the choice file keeps the result): on an H200 cuDNN's heuristics left out the configuration that
// runs the 192->192 convolution at batch 1024 in 0.097 ms and picked one taking 0.133 ms, and the
// forward pass went from 392,000 to 447,000 positions/s; on an H100 it was listed at 1024 but not
// at 512 (0.076 ms against 0.052), bench/results/nn_cuda_h100.txt. Smaller batches are latency-bound and keep the
// heuristics' list. CudaSettings::cudnn_sweep (JIRIKI_CUDNN_SWEEP) = K sets K for every fused shape (the trainer's
// too); 0 turns the sweep off.
constexpr int DEFAULT_SWEEP = 14;
constexpr int DEFAULT_SWEEP_MIN_BATCH = 256;

static int sweep_size(const ConvShape& s, int setting) {
  if (setting >= 0) return setting;
  const bool inference = s.pass == ConvPass::FORWARD && s.epilogue;
  return inference && s.batch >= DEFAULT_SWEEP_MIN_BATCH ? DEFAULT_SWEEP : 0;
}

// Finalizes one configuration into a plan; null when it does not run on this device or shape.
static std::unique_ptr<FusedConv::Plan> make_plan(cudnnHandle_t handle, Desc&& cfg, int heur_mode, int heur_index,
                                                  bool verbose) {
  auto p = std::make_unique<FusedConv::Plan>();
  p->cfg = std::move(cfg);
  p->heur_mode = heur_mode;
  p->heur_index = heur_index;
  auto cfg_d = p->cfg.get();
  p->plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle)
      .set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, &cfg_d);
  if (cudnnBackendFinalize(p->plan.get()) != CUDNN_STATUS_SUCCESS) return nullptr;
  int64_t got = 0;
  JIRIKI_CUDNN_CHECK(cudnnBackendGetAttribute(p->plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64,
                                              1, &got, &p->workspace));
  Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  auto engine_d = engine.get();
  if (cudnnBackendGetAttribute(p->cfg.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got,
                               &engine_d) == CUDNN_STATUS_SUCCESS) {
    cudnnBackendGetAttribute(engine_d, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &got, &p->engine);
    if (verbose) p->knobs = knob_text(p->cfg.get(), engine_d);
    cudnnBackendBehaviorNote_t notes[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
    int64_t note_count = 0;
    if (cudnnBackendGetAttribute(engine_d, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                 CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &note_count, notes) == CUDNN_STATUS_SUCCESS)
      for (int64_t i = 0; i < note_count; ++i)
        if (notes[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) p->runtime_compiled = true;
    cudnnBackendNumericalNote_t numerical[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    if (cudnnBackendGetAttribute(engine_d, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                 CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &note_count, numerical) == CUDNN_STATUS_SUCCESS)
      for (int64_t i = 0; i < note_count; ++i)
        if (numerical[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) p->nondeterministic = true;
  }
  return p;
}

FusedConv::FusedConv(cudnnHandle_t handle, const ConvShape& shape, const CudaSettings& settings)
    : shape_(shape), settings_(settings) {
  const int max_candidates = settings.engine_candidates;
  const auto start = std::chrono::steady_clock::now();
  // The fused graph needs cuDNN's runtime-fusion engines, which compile kernels with NVRTC when a
  // plan is made; where they are missing (no libnvrtc, an older GPU), the unfused graph still runs.
  // CudaSettings::unfused (JIRIKI_CUDA_UNFUSED) takes the unfused path at once, so that tests can check it.
  const bool force_unfused = settings.unfused;
  int device = 0;
  JIRIKI_CUDA_CHECK(cudaGetDevice(&device));
  if (shape.pass == ConvPass::BACKWARD_FILTER && (shape.epilogue || shape.identity))
    throw std::invalid_argument("FusedConv: the backward filter pass has no epilogue");
  if (shape.pass == ConvPass::BACKWARD_DATA && (shape.epilogue || (shape.residual && !shape.identity)))
    throw std::invalid_argument("FusedConv: the backward data pass adds a residual only through identity");
  if (shape.identity && shape.epilogue) throw std::invalid_argument("FusedConv: identity is for epilogue false");
  key_ = Key(device, shape.batch, shape.in_channels, shape.out_channels, shape.kernel, shape.residual, int(shape.act),
             shape.epilogue, force_unfused, int(shape.pass), shape.identity);
  std::optional<Choice> known;
  bool from_disk = false;  // known comes from the choice file: verified here before it is shared
  disk_key_ = disk_key(shape, force_unfused, max_candidates);
  disk_path_ = settings.choice_file;
  {
    ChoiceCache& cache = choice_cache();
    std::unique_lock lock(cache.mutex);
    ChoiceEntry& entry = cache.entries[key_];
    cache.changed.wait(lock, [&] { return !entry.tuning; });
    known = entry.choice;
    if (!known && !disk_path_.empty()) {
      load_choice_file(cache, disk_path_);
      if (auto it = cache.disk.find(disk_key_); it != cache.disk.end()) known = it->second, from_disk = true;
    }
    if (!known || from_disk) entry.tuning = owns_tuning_ = true;
  }
  if (known) {  // tuned before in this process: finalize that one plan
    fused_ = known->fused;
    graph_ = build_graph(handle, shape, fused_);
    std::unique_ptr<Plan> p;
    std::vector<Desc> cfgs = heuristic_configs(*graph_->graph, cudnnBackendHeurMode_t(known->heur_mode));
    if (known->heur_index < int(cfgs.size())) {
      std::optional<Desc> cfg = known->kernel_cfg < 0 ? std::optional<Desc>(std::move(cfgs[known->heur_index]))
                                                      : with_kernel_cfg(cfgs[known->heur_index], known->kernel_cfg);
      if (cfg) p = make_plan(handle, std::move(*cfg), known->heur_mode, known->heur_index, settings_.verbose);
      if (p) p->kernel_cfg = known->kernel_cfg;
    }
    if (p) {
      p->ms = known->ms;
      candidates_.push_back(std::move(p));
      tuned_ = true;
      if (settings_.verbose)
        std::fprintf(stderr, "[cuda] conv %dx%d %d->%d%s batch %d: engine %lld as tuned before%s, in %.2f s\n",
                     shape.kernel, shape.kernel, shape.in_channels, shape.out_channels,
                     shape.residual ? " +residual" : "", shape.batch, (long long)candidates_[0]->engine,
                     from_disk ? " (tuning file)" : "",
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      if (from_disk) release_tuning(known, false);
      return;
    }
    graph_.reset();  // the heuristics answered differently this time: tune afresh
  }
  try {
    for (bool fused : {true, false}) {
      if (fused && (force_unfused || !(shape.epilogue || shape.identity))) continue;
      if (!fused && !shape.epilogue && shape.residual) continue;  // the bare convolution would drop the residual
      fused_ = fused;
      try {
        graph_ = build_graph(handle, shape, fused);
      } catch (const std::runtime_error& e) {
        if (!fused) throw;
        if (settings_.verbose)
          std::fprintf(stderr, "[cuda] fused graph rejected (%s); trying the unfused one\n", e.what());
        continue;
      }
      for (auto mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
        std::vector<Desc> cfgs = heuristic_configs(*graph_->graph, mode);
        if (settings_.verbose)
          std::fprintf(stderr, "[cuda] heuristics mode %d: %zu configurations\n", int(mode), cfgs.size());
        for (size_t i = 0; i < cfgs.size() && int(candidates_.size()) < max_candidates; ++i) {
          auto p = make_plan(handle, std::move(cfgs[i]), int(mode), int(i), settings_.verbose);
          // Weight gradients must be the same on every run (resume, replicas): no atomics.
          if (p && !(shape.pass == ConvPass::BACKWARD_FILTER && p->nondeterministic))
            candidates_.push_back(std::move(p));
        }
        if (!candidates_.empty()) break;
      }
      if (fused && !candidates_.empty()) add_sweep(handle);
      if (!candidates_.empty()) break;
      if (settings_.verbose) std::fprintf(stderr, "[cuda] no engine for the %s graph\n", fused ? "fused" : "unfused");
    }
    if (candidates_.empty())
      throw std::runtime_error("CUDA backend: cuDNN has no engine for a " + std::to_string(shape.kernel) + "x" +
                               std::to_string(shape.kernel) + " convolution " + std::to_string(shape.in_channels) +
                               " -> " + std::to_string(shape.out_channels) + " channels at batch " +
                               std::to_string(shape.batch));
  } catch (...) {
    release_tuning(std::nullopt);
    throw;
  }
  if (settings_.verbose) {
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "[cuda] conv %dx%d %d->%d%s batch %d: %zu %s candidates in %.2f s\n", shape.kernel,
                 shape.kernel, shape.in_channels, shape.out_channels, shape.residual ? " +residual" : "", shape.batch,
                 candidates_.size(), fused_ ? "fused" : "unfused", s);
  }
}

// The KERNEL_CFG sweep (sweep_size()) on the first runtime-compiled candidate, appended to the list.
void FusedConv::add_sweep(cudnnHandle_t handle) {
  const int k = sweep_size(shape_, settings_.cudnn_sweep);
  if (k == 0) return;
  auto base = std::find_if(candidates_.begin(), candidates_.end(), [](const auto& p) { return p->runtime_compiled; });
  if (base == candidates_.end()) return;
  const Plan& b = **base;
  std::vector<int64_t> values = kernel_cfg_values(config_engine(b.cfg));
  const size_t count = std::min(values.size(), size_t(k));
  std::vector<std::unique_ptr<Plan>> added;
  for (size_t i = 0; i < count; ++i) {
    const int64_t v = values[i * values.size() / count];  // evenly spread when count < values.size()
    std::optional<Desc> cfg = with_kernel_cfg(b.cfg, v);
    if (!cfg) continue;
    auto p = make_plan(handle, std::move(*cfg), b.heur_mode, b.heur_index, settings_.verbose);
    if (!p) continue;
    p->kernel_cfg = int(v);
    added.push_back(std::move(p));
  }
  if (settings_.verbose)
    std::fprintf(stderr, "[cuda] sweep: %zu of %zu kernel configurations of engine %lld finalized\n", added.size(),
                 values.size(), (long long)b.engine);
  for (auto& p : added) candidates_.push_back(std::move(p));
}

// Ends this FusedConv's claim on tuning its shape, publishing its choice if it has one; `tuned`:
// the choice was timed here (counted, and appended to the choice file), not read from that file.
void FusedConv::release_tuning(const std::optional<Choice>& choice, bool tuned) {
  if (!owns_tuning_) return;
  owns_tuning_ = false;
  ChoiceCache& cache = choice_cache();
  {
    std::lock_guard lock(cache.mutex);
    ChoiceEntry& entry = cache.entries[key_];
    entry.tuning = false;
    if (choice) {
      entry.choice = choice;
      if (tuned) {
        ++cache.tuned;
        if (!disk_path_.empty()) {
          append_choice(disk_path_, disk_key_, *choice, settings_.verbose);
          if (disk_path_ == cache.disk_path) cache.disk[disk_key_] = *choice;
        }
      }
    }
  }
  cache.changed.notify_all();
}

FusedConv::~FusedConv() { release_tuning(std::nullopt); }

void FusedConv::run(cudnnHandle_t handle, cudaStream_t stream, const ConvArgs& a, void* workspace) const {
  const Plan& p = *candidates_[chosen_];
  std::vector<int64_t> uids = {X, W, Y};
  std::vector<void*> ptrs = {shape_.pass == ConvPass::BACKWARD_DATA ? a.dx : const_cast<uint16_t*>(a.x),
                             shape_.pass == ConvPass::BACKWARD_FILTER ? a.dw : const_cast<uint16_t*>(a.w), a.y};
  if (fused_ && shape_.epilogue) {
    uids.push_back(BIAS);
    ptrs.push_back(const_cast<float*>(a.bias));
  }
  if (fused_ && shape_.residual) {
    uids.push_back(RESIDUAL);
    ptrs.push_back(const_cast<uint16_t*>(a.residual));
  }
  Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids.data(), int64_t(uids.size()))
      .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, ptrs.data(), int64_t(ptrs.size()))
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &workspace)
      .finalize("variant pack");
  JIRIKI_CUDNN_CHECK(cudnnSetStream(handle, stream));
  JIRIKI_CUDNN_CHECK(cudnnBackendExecute(handle, p.plan.get(), pack.get()));
  if (!fused_ && shape_.epilogue)
    launch_bias_residual_act(a.y, a.bias, shape_.residual ? a.residual : nullptr, int64_t(shape_.batch) * SQUARES,
                             shape_.out_channels, shape_.act, stream);
}

void FusedConv::tune(cudnnHandle_t handle, cudaStream_t stream, const ConvArgs& args) {
  if (tuned_) return;  // a choice made before in this process
  constexpr int REPS = 20;
  cudaEvent_t begin, end;
  JIRIKI_CUDA_CHECK(cudaEventCreate(&begin));
  JIRIKI_CUDA_CHECK(cudaEventCreate(&end));
  float best = -1.0f;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    DeviceBuffer workspace(size_t(candidates_[i]->workspace));
    chosen_ = i;
    try {
      run(handle, stream, args, workspace.get());  // warm-up: loads the kernel
      JIRIKI_CUDA_CHECK(cudaEventRecord(begin, stream));
      for (int r = 0; r < REPS; ++r) run(handle, stream, args, workspace.get());
      JIRIKI_CUDA_CHECK(cudaEventRecord(end, stream));
      JIRIKI_CUDA_CHECK(cudaEventSynchronize(end));
    } catch (const std::runtime_error& e) {
      if (settings_.verbose)
        std::fprintf(stderr, "[cuda]   engine %lld failed to run: %s\n", (long long)candidates_[i]->engine, e.what());
      continue;  // ms stays negative: never chosen
    }
    float ms = 0.0f;
    JIRIKI_CUDA_CHECK(cudaEventElapsedTime(&ms, begin, end));
    candidates_[i]->ms = ms / REPS;
    if (settings_.verbose)
      std::fprintf(stderr, "[cuda]   engine %lld%s: %.4f ms, workspace %lld bytes, knobs %s\n",
                   (long long)candidates_[i]->engine, candidates_[i]->runtime_compiled ? " (runtime-compiled)" : "",
                   candidates_[i]->ms, (long long)candidates_[i]->workspace, candidates_[i]->knobs.c_str());
    if (best < 0.0f || candidates_[i]->ms < best) best = candidates_[i]->ms;
  }
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  if (best < 0.0f) {
    release_tuning(std::nullopt);
    throw std::runtime_error("CUDA backend: no cuDNN engine could run the convolution");
  }
  for (size_t i = 0; i < candidates_.size(); ++i)
    if (candidates_[i]->ms == best) chosen_ = i;
  tuned_ = true;
  const Plan& p = *candidates_[chosen_];
  release_tuning(Choice{fused_, p.heur_mode, p.heur_index, p.kernel_cfg, p.ms});
}

size_t FusedConv::workspace_size() const { return size_t(candidates_[chosen_]->workspace); }

std::string FusedConv::description() const {
  const Plan& p = *candidates_[chosen_];
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s engine %lld%s, %.4f ms",
                fused_ && !shape_.epilogue
                    ? (shape_.pass == ConvPass::BACKWARD_DATA
                           ? (shape_.residual ? "backward data + residual" : "backward data through identity")
                           : "convolution through identity")
                : fused_                                   ? "fused"
                : shape_.epilogue                          ? "unfused (conv + our epilogue)"
                : shape_.pass == ConvPass::BACKWARD_FILTER ? "backward filter"
                : shape_.pass == ConvPass::BACKWARD_DATA   ? "backward data"
                                                           : "convolution only",
                (long long)p.engine, p.runtime_compiled ? " (runtime-compiled)" : "", p.ms);
  return buf;
}

}  // namespace jiriki::nn::cuda
