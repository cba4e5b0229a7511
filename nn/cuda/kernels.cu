// The CUDA backend's own kernels (declarations and layouts in nn/cuda/kernels.h). All are memory-
// bound and small next to the convolutions; each is written for coalesced global accesses, using
// shared memory where a layout changes.
#include <cuda_bf16.h>

#include <type_traits>

#include "nn/cuda/activation.cuh"
#include "nn/cuda/cuda_util.h"
#include "nn/cuda/kernels.h"

namespace jiriki::nn::cuda {

namespace {

using bf16 = __nv_bfloat16;
static_assert(sizeof(bf16) == sizeof(uint16_t));

__device__ __forceinline__ bf16 to_bf16(bf16 v) { return v; }
__device__ __forceinline__ bf16 to_bf16(float v) { return __float2bfloat16_rn(v); }

// One block per position: the 119 x 81 planes pass through shared memory so that the read (along
// squares) and the write (along channels) are both coalesced. bf16 planes are read as 4-byte words
// (a position's planes start on a 2-byte boundary only, hence `shift`); fp32 planes (the trainer's)
// as they are. The write moves 16-byte groups of 8 channels: a simple version moving 2 bytes at a
// time took 3x as long.
template <class T>
__global__ void features_to_nhwc_kernel(const T* features, bf16* x, int n, RowOrder order) {
  const T* planes;
  if constexpr (std::is_same_v<T, bf16>) {
    constexpr int WORDS = INPUT_SIZE / 2 + 2;
    __shared__ uint32_t words[WORDS];
    const uintptr_t begin = reinterpret_cast<uintptr_t>(features + int64_t(blockIdx.x) * INPUT_SIZE);
    const uint32_t* in = reinterpret_cast<const uint32_t*>(begin & ~uintptr_t(3));
    const int shift = int(begin & 3) / 2;  // planes[i] is element i + shift of `words`
    const int count = (shift + INPUT_SIZE + 1) / 2;
    for (int i = threadIdx.x; i < count; i += blockDim.x) words[i] = in[i];
    planes = reinterpret_cast<const bf16*>(words) + shift;
  } else {
    __shared__ T values[INPUT_SIZE];
    const T* in = features + int64_t(blockIdx.x) * INPUT_SIZE;
    for (int i = threadIdx.x; i < INPUT_SIZE; i += blockDim.x) values[i] = in[i];
    planes = values;
  }
  __syncthreads();
  constexpr int GROUPS = INPUT_CHANNELS_PADDED / 8;
  for (int g = threadIdx.x; g < SQUARES * GROUPS; g += blockDim.x) {
    const int sq = g / GROUPS, c0 = g % GROUPS * 8;
    const int64_t row =
        order == RowOrder::SQUARE_MAJOR ? int64_t(sq) * n + blockIdx.x : int64_t(blockIdx.x) * SQUARES + sq;
    union {
      uint4 vector;
      bf16 lanes[8];
    } v;
#pragma unroll
    for (int k = 0; k < 8; ++k)
      v.lanes[k] = c0 + k < INPUT_PLANES ? to_bf16(planes[(c0 + k) * SQUARES + sq]) : __float2bfloat16_rn(0.0f);
    *reinterpret_cast<uint4*>(x + row * INPUT_CHANNELS_PADDED + c0) = v.vector;
  }
}

// Bit i of a position's packed planes -> planes[i] as bf16 0 or 1; one thread per 8 planes (a byte).
__global__ void unpack_features_kernel(const uint8_t* bits, bf16* planes, int64_t bytes_used) {
  constexpr int USED = (INPUT_SIZE + 7) / 8;  // bytes of a position that hold planes
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= bytes_used) return;
  const int64_t position = t / USED;
  const int byte = int(t % USED);
  const uint8_t b = bits[position * PACKED_INPUT_BYTES + byte];
  bf16* out = planes + position * INPUT_SIZE + byte * 8;
  const bf16 one = __float2bfloat16_rn(1.0f), zero = __float2bfloat16_rn(0.0f);
  const int count = min(8, INPUT_SIZE - byte * 8);
  for (int k = 0; k < count; ++k) out[k] = (b >> k) & 1 ? one : zero;
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
                                      Activation act, float* policy, bf16* value_in, int n, RowOrder order) {
  __shared__ float tile[SQUARES * HEAD_CHANNELS];
  for (int i = threadIdx.x; i < SQUARES * HEAD_CHANNELS; i += blockDim.x) {
    const int sq = i / HEAD_CHANNELS;
    const int64_t row =
        order == RowOrder::SQUARE_MAJOR ? int64_t(sq) * n + blockIdx.x : int64_t(blockIdx.x) * SQUARES + sq;
    tile[i] = heads[row * HEAD_CHANNELS + i % HEAD_CHANNELS];
  }
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

void launch_unpack_features(const uint8_t* bits, uint16_t* planes, int n, cudaStream_t stream) {
  const int64_t bytes_used = int64_t(n) * ((INPUT_SIZE + 7) / 8);
  constexpr int THREADS = 256;
  unpack_features_kernel<<<grid_for(bytes_used, THREADS), THREADS, 0, stream>>>(bits, as_bf16(planes), bytes_used);
  JIRIKI_CUDA_CHECK_LAUNCH();
}

void launch_features_to_nhwc(const uint16_t* features, uint16_t* x, int n, cudaStream_t stream, RowOrder order) {
  features_to_nhwc_kernel<<<n, 256, 0, stream>>>(as_bf16(features), as_bf16(x), n, order);
  JIRIKI_CUDA_CHECK_LAUNCH();
}

void launch_features_to_nhwc(const float* features, uint16_t* x, int n, cudaStream_t stream, RowOrder order) {
  features_to_nhwc_kernel<<<n, 256, 0, stream>>>(features, as_bf16(x), n, order);
  JIRIKI_CUDA_CHECK_LAUNCH();
}

void launch_bias_residual_act(uint16_t* y, const float* bias, const uint16_t* residual, int64_t rows, int channels,
                              Activation act, cudaStream_t stream) {
  const int64_t count = rows * channels;
  bias_residual_act_kernel<<<grid_for(count, 256), 256, 0, stream>>>(as_bf16(y), bias, as_bf16(residual), count,
                                                                     channels, act);
  JIRIKI_CUDA_CHECK_LAUNCH();
}

void launch_heads_epilogue(const float* heads, const float* policy_bias, const float* value_bias, Activation act,
                           float* policy, uint16_t* value_in, int n, cudaStream_t stream, RowOrder order) {
  heads_epilogue_kernel<<<n, 256, 0, stream>>>(heads, policy_bias, value_bias, act, policy, as_bf16(value_in), n,
                                               order);
  JIRIKI_CUDA_CHECK_LAUNCH();
}

void launch_value_epilogue(const float* hidden, const float* fc1_bias, const float* fc2_weight, const float* fc2_bias,
                           Activation act, float* value, int n, cudaStream_t stream) {
  constexpr int WARPS = 8;
  value_epilogue_kernel<<<(n + WARPS - 1) / WARPS, WARPS * 32, 0, stream>>>(hidden, fc1_bias, fc2_weight, fc2_bias, act,
                                                                            value, n);
  JIRIKI_CUDA_CHECK_LAUNCH();
}

}  // namespace jiriki::nn::cuda
