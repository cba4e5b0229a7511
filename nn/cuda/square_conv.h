// A 3x3 convolution for Hopper (sm_90a) tensor cores on square-major activations: [81][batch][C]
// bf16, batch a multiple of 128. With the 128 positions of a tile all at one square, a tap that
// falls off the board falls off for the whole tile and is skipped: 625 of the 729 taps of a padded
// 9x9 convolution are computed (14% fewer). cuDNN's NHWC kernels mix squares in a tile and must
// multiply the zero padding. The rest of the network keeps cuDNN; see docs/architecture.md.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace jiriki::nn::cuda {

enum class SquareAct : int { relu = 1, swish = 2 };

// Batch positions are tiled by this many rows: the batch must be a multiple.
constexpr int kSquareTile = 128;

// Whether the kernel exists for these channel counts (128->128, 128->192, 192->192) on `device`
// (compute capability 9.0 exactly: wgmma is not in later architectures' baseline).
bool square_conv_supported(int device, int c_in, int c_out);

// One convolution's launch, bound to its buffers: TMA descriptors (opaque 128-byte blobs) for the
// input, the weights, the residual and the output, so a plan is made once per layer and buffer set.
struct SquareConvPlan {
  alignas(64) unsigned char x_map[128];
  alignas(64) unsigned char w_map[128];
  alignas(64) unsigned char r_map[128];
  alignas(64) unsigned char y_map[128];
  const void* kernel = nullptr;     // the instance for the shape, activation and residual
  int ctas = 0;                     // persistent CTAs: one per SM
  const short* schedule = nullptr;  // their tiles, [ctas][per_cta]
  int per_cta = 0;
  int smem = 0;
  const float* bias = nullptr;
  int batch = 0;
};

// Plans y = act(conv(x) + bias [+ residual]) for x [81][batch][c_in], weights w [9 taps][c_out][c_in]
// (tap = 3*(dy+1) + dx+1), bias [c_out], residual (or null) and y [81][batch][c_out]. y may be the
// residual but not x. Throws std::runtime_error if the shape is unsupported or the driver refuses
// the descriptors.
SquareConvPlan make_square_conv_plan(const __nv_bfloat16* x, const __nv_bfloat16* w, const float* bias,
                                     const __nv_bfloat16* residual, __nv_bfloat16* y, SquareAct act, int batch,
                                     int c_in, int c_out);

// Enqueues the planned convolution on `stream` (capturable into a CUDA graph).
void launch_square_conv(const SquareConvPlan& plan, cudaStream_t stream);

}  // namespace jiriki::nn::cuda
