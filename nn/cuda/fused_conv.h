// One fused convolution of the network through the cuDNN graph (backend descriptor) API:
//
//     y = act(conv(x, w) + bias [+ residual])
//
// on 9x9 boards, NHWC tensors in bf16, fp32 accumulation, one kernel where cuDNN has an
// engine for the whole pattern. A FusedConv is built for one shape and one batch size: cuDNN's
// heuristics list engine configurations, tune() times those that finalize on the real buffers
// and keeps the fastest; later FusedConvs of the same shape on the same device take that choice
// without timing (the process shares it: fused_conv.cpp). If no engine takes the fused graph, the convolution alone
// runs through cuDNN and a small kernel of ours applies bias, residual and activation (slower, never wrong;
// JIRIKI_CUDA_UNFUSED=1 in the environment forces this path).
#pragma once
#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "nn/backend.h"
#include "nn/cuda/cuda_util.h"
#include "nn/model.h"

namespace jiriki::nn::cuda {

// Which convolution a FusedConv computes: the forward pass (with its epilogue), or for the trainer
// the gradient of the weights (backward filter, no epilogue) or of the input (backward data).
enum class ConvPass { FORWARD, BACKWARD_FILTER, BACKWARD_DATA };

struct ConvShape {
  int batch = 1;
  int in_channels = 0, out_channels = 0;
  int kernel = 3;         // 3 (pad 1) or 1
  bool residual = false;  // adds a tensor shaped like y before the activation (BACKWARD_DATA with
                          // identity: dx = the input gradient + a tensor shaped like x)
  Activation act = Activation::RELU;
  bool epilogue = true;  // false: y = conv(x, w) alone (the trainer's batch norm follows)
  // With epilogue false, in the forward and backward data passes: the convolution's result written
  // through a pointwise identity (or addition, with residual), a graph that cuDNN's runtime-fusion
  // engines also take (at batch 256 on an H100 they ran the forward 192->192 convolution in 0.028
  // ms against 0.039 for the precompiled engines the bare convolution gets).
  bool identity = false;
  ConvPass pass = ConvPass::FORWARD;  // BACKWARD_FILTER needs epilogue false
};

// Device pointers of one call. x, residual, y: [batch][81][channels] bf16; w: [out][kh][kw][in]
// (KRSC) bf16; bias: [out] fp32. BACKWARD_FILTER reads x and y (the gradient of the output) and
// writes dw, shaped like w. BACKWARD_DATA reads w and y (the gradient of the output) [and
// residual] and writes dx, shaped like x.
struct ConvArgs {
  const uint16_t* x = nullptr;
  const uint16_t* w = nullptr;
  const float* bias = nullptr;
  const uint16_t* residual = nullptr;
  uint16_t* y = nullptr;
  uint16_t* dw = nullptr;
  uint16_t* dx = nullptr;
};

// The current CUDA device as the choice file names it: its model (spaces made '_'), compute
// capability and cuDNN's version, e.g. "NVIDIA_H200/sm90/cudnn91900"; the start of every key there.
std::string choice_device_key();

// How many shapes this process has tuned (timed its engines for); the others reused a choice, made
// in this process or read from the choice file (fused_conv.cpp says where it lives).
int shapes_tuned();
// Forgets the choices this process made or read, so that the next FusedConvs read the choice file
// again (tests of that file).
void forget_tuned_shapes();

class FusedConv {
 public:
  // Builds the operation graph and finalizes up to settings.engine_candidates engine configurations (or
  // only the one chosen before for this shape). Call tune() next: until then, another FusedConv of
  // the same shape on the same device waits in its constructor.
  // Throws if cuDNN has no engine at all for the convolution.
  FusedConv(cudnnHandle_t handle, const ConvShape& shape, const CudaSettings& settings);
  ~FusedConv();
  FusedConv(const FusedConv&) = delete;
  FusedConv& operator=(const FusedConv&) = delete;

  // Times every candidate on `args` (its output is overwritten) and keeps the fastest; does nothing
  // when the choice was taken from an earlier FusedConv of this shape.
  void tune(cudnnHandle_t handle, cudaStream_t stream, const ConvArgs& args);
  // Enqueues the convolution on the handle's stream. `workspace` holds workspace_size() bytes.
  void run(cudnnHandle_t handle, cudaStream_t stream, const ConvArgs& args, void* workspace) const;
  size_t workspace_size() const;
  // What runs, for logs: "fused engine 3 (runtime-compiled), 0.12 ms" or "unfused ...".
  std::string description() const;
  const ConvShape& shape() const { return shape_; }

  struct Graph;   // the cuDNN descriptors of the operation graph (fused_conv.cpp)
  struct Plan;    // one finalized engine configuration (fused_conv.cpp)
  struct Choice;  // a tuned shape's engine, shared by the process (fused_conv.cpp)
  // The device, the shape, and whether the unfused path is forced: what a Choice is for.
  using Key = std::tuple<int, int, int, int, int, bool, int, bool, bool, int, bool>;

 private:
  void release_tuning(const std::optional<Choice>& choice, bool tuned = true);
  void add_sweep(cudnnHandle_t handle);

  ConvShape shape_;
  CudaSettings settings_;  // the sweep, the unfused path, the choice file, logging
  std::unique_ptr<Graph> graph_;
  bool fused_ = true;  // false: the graph is the convolution alone, our kernel does the rest
  std::vector<std::unique_ptr<Plan>> candidates_;
  size_t chosen_ = 0;
  bool tuned_ = false;        // chosen_ is final
  bool owns_tuning_ = false;  // this one tunes the shape; the others wait for its choice
  Key key_;
  std::string disk_key_, disk_path_;  // its name in the choice file, and that file ("" for none)
};

}  // namespace jiriki::nn::cuda
