// The CUDA backend's own kernels (declarations and layouts in nn/cuda/kernels.h). All are memory-
// bound and small next to the convolutions; each is written for coalesced global accesses.
#include <cuda_bf16.h>

#include "nn/cuda/cuda_util.h"
#include "nn/cuda/kernels.h"

namespace jiriki::nn::cuda {

namespace {

using bf16 = __nv_bfloat16;
static_assert(sizeof(bf16) == sizeof(uint16_t));

__device__ __forceinline__ float activate(float x, Activation act) {
  // Swish as x / (1 + e^-x): exact limits at both ends (e^-x overflowing to inf gives -0, not NaN).
  return act == Activation::RELU ? fmaxf(x, 0.0f) : x / (1.0f + expf(-x));
}

__global__ void bias_residual_act_kernel(bf16* y, const float* bias, const bf16* residual, int64_t count, int channels,
                                         Activation act) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    float v = __bfloat162float(y[i]) + bias[i % channels];
    if (residual) v += __bfloat162float(residual[i]);
    y[i] = __float2bfloat16_rn(activate(v, act));
  }
}

// One block per position; the 81 x 56 head outputs are staged in shared memory so that the policy,
// written label-major, is read without strided global loads.
__global__ void heads_epilogue_kernel(const float* heads, const float* policy_bias, const float* value_bias,
                                      Activation act, float* policy, bf16* value_in) {
  __shared__ float tile[SQUARES * HEAD_CHANNELS];
  const float* in = heads + int64_t(blockIdx.x) * SQUARES * HEAD_CHANNELS;
  for (int i = threadIdx.x; i < SQUARES * HEAD_CHANNELS; i += blockDim.x) tile[i] = in[i];
  __syncthreads();
  float* p = policy + int64_t(blockIdx.x) * POLICY_SIZE;
  for (int i = threadIdx.x; i < POLICY_SIZE; i += blockDim.x) {
    int label = i / SQUARES, sq = i % SQUARES;
    p[i] = tile[sq * HEAD_CHANNELS + label] + policy_bias[i];
  }
  bf16* v = value_in + int64_t(blockIdx.x) * VALUE_FC1_IN_PADDED;
  for (int i = threadIdx.x; i < VALUE_FC1_IN_PADDED; i += blockDim.x) {
    float out = 0.0f;
    if (i < VALUE_CHANNELS * SQUARES) {
      int sq = i / VALUE_CHANNELS, c = i % VALUE_CHANNELS;
      out = activate(tile[sq * HEAD_CHANNELS + VALUE_HEAD_OFFSET + c] + value_bias[c], act);
    }
    v[i] = __float2bfloat16_rn(out);
  }
}

// One warp per position.
__global__ void value_epilogue_kernel(const float* hidden, const float* fc1_bias, const float* fc2_weight,
                                      const float* fc2_bias, Activation act, float* value, int n) {
  int pos = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (pos >= n) return;
  const float* h = hidden + int64_t(pos) * VALUE_HIDDEN;
  float sum = 0.0f;
  for (int j = lane; j < VALUE_HIDDEN; j += 32) sum += fc2_weight[j] * activate(h[j] + fc1_bias[j], act);
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  if (lane == 0) value[pos] = 1.0f / (1.0f + expf(-(sum + fc2_bias[0])));
}

int grid_for(int64_t count, int threads) {
  int64_t blocks = (count + threads - 1) / threads;
  return int(blocks < 65535 ? blocks : 65535);
}

const bf16* as_bf16(const uint16_t* p) { return reinterpret_cast<const bf16*>(p); }
bf16* as_bf16(uint16_t* p) { return reinterpret_cast<bf16*>(p); }

}  // namespace

void launch_bias_residual_act(uint16_t* y, const float* bias, const uint16_t* residual, int64_t rows, int channels,
                              Activation act, cudaStream_t stream) {
  const int64_t count = rows * channels;
  bias_residual_act_kernel<<<grid_for(count, 256), 256, 0, stream>>>(as_bf16(y), bias, as_bf16(residual), count,
                                                                     channels, act);
  JIRIKI_CUDA_CHECK_LAUNCH();
}

void launch_heads_epilogue(const float* heads, const float* policy_bias, const float* value_bias, Activation act,
                           float* policy, uint16_t* value_in, int n, cudaStream_t stream) {
  heads_epilogue_kernel<<<n, 256, 0, stream>>>(heads, policy_bias, value_bias, act, policy, as_bf16(value_in));
  JIRIKI_CUDA_CHECK_LAUNCH();
}

void launch_value_epilogue(const float* hidden, const float* fc1_bias, const float* fc2_weight, const float* fc2_bias,
                           Activation act, float* value, int n, cudaStream_t stream) {
  constexpr int WARPS = 8;
  value_epilogue_kernel<<<(n + WARPS - 1) / WARPS, WARPS * 32, 0, stream>>>(hidden, fc1_bias, fc2_weight, fc2_bias,
                                                                             act, value, n);
  JIRIKI_CUDA_CHECK_LAUNCH();
}

}  // namespace jiriki::nn::cuda
