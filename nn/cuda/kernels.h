// The CUDA backend's own kernels: everything between cuDNN's convolutions and cuBLAS's matrix
// products (layout changes, the heads' epilogues). Host-side launchers, so that the .cpp files need
// no CUDA compiler. Activations and weights are stored in bf16 (uint16_t on the host side, the bit
// pattern of a bfloat16); arithmetic is fp32 throughout.
#pragma once
#include <cuda_runtime.h>

#include <bit>
#include <cstdint>

#include "common/bf16.h"
#include "nn/model.h"

namespace jiriki::nn::cuda {

// Channels of the stem's input: the 119 planes padded with zero planes to 128, a multiple of 8
// so that every NHWC pixel starts on a 16-byte boundary as the tensor cores need, and of 64, which
// cuDNN's kernels tile the reduction by. The inference backend and the GPU trainer both use it.
constexpr int INPUT_CHANNELS_PADDED = 128;
// The two heads' 1x1 convolutions run as one matrix product of 27 + 27 outputs (the GPU trainer's
// heads GEMM), padded to 56 in the inference backend.
constexpr int HEAD_OUTPUTS = POLICY_LABELS + VALUE_CHANNELS;
constexpr int HEAD_CHANNELS = 56;
static_assert(HEAD_CHANNELS >= HEAD_OUTPUTS && HEAD_CHANNELS % 8 == 0);
constexpr int VALUE_HEAD_OFFSET = POLICY_LABELS;  // value channels follow the policy channels
// The value head's flattened input (2187) padded to a multiple of 8 for the same reason.
constexpr int VALUE_FC1_IN_PADDED = 2192;

using jiriki::to_bf16;  // common/bf16.h

// Order of the rows of activations: [n][81][c] (NHWC, cuDNN's) or [81][n][c] (square-major, the
// Hopper convolution's, nn/cuda/square_conv.h).
enum class RowOrder { POSITION_MAJOR, SQUARE_MAJOR };

// bits: [n][PACKED_INPUT_BYTES] (nn::encode_packed_features)  ->  planes: [n][119][81] bf16 (NCHW).
void launch_unpack_features(const uint8_t* bits, uint16_t* planes, int n, cudaStream_t stream);

// features: [n][119][81] bf16 (NCHW, as copied from the host; the inference backend) or fp32 (the
// GPU trainer's batches)  ->  x: [n][81][128] bf16 (NHWC, channels 119.. zero), or [81][n][128] if
// `order` is SQUARE_MAJOR. One kernel for both.
void launch_features_to_nhwc(const uint16_t* features, uint16_t* x, int n, cudaStream_t stream,
                             RowOrder order = RowOrder::POSITION_MAJOR);
void launch_features_to_nhwc(const float* features, uint16_t* x, int n, cudaStream_t stream,
                             RowOrder order = RowOrder::POSITION_MAJOR);

// y = act(y + bias [+ residual]) over [rows][channels] (the unfused convolution's epilogue).
void launch_bias_residual_act(uint16_t* y, const float* bias, const uint16_t* residual, int64_t rows, int channels,
                              Activation act, cudaStream_t stream);

// heads: [n][81][56] fp32 ([81][n][56] if `order` is SQUARE_MAJOR), the 1x1 convolutions of both heads.
//   policy[n][81*label + sq] = heads[n][sq][label] + policy_bias[81*label + sq]   (fp32)
//   value_in[n][27*sq + c]  = act(heads[n][sq][27 + c] + value_bias[c])           (bf16, NHWC
//                             flattening; fc1's columns are permuted to match; pad columns zero)
void launch_heads_epilogue(const float* heads, const float* policy_bias, const float* value_bias, Activation act,
                           float* policy, uint16_t* value_in, int n, cudaStream_t stream,
                           RowOrder order = RowOrder::POSITION_MAJOR);

// value[n] = sigmoid(fc2_bias + sum_j fc2_weight[j] * act(hidden[n][j] + fc1_bias[j])), j < 256.
void launch_value_epilogue(const float* hidden, const float* fc1_bias, const float* fc2_weight, const float* fc2_bias,
                           Activation act, float* value, int n, cudaStream_t stream);

}  // namespace jiriki::nn::cuda
