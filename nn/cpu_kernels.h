// The simd backend's kernels (nn/simd_backend.cpp): direct 3x3 and 1x1 convolutions on the 9x9
// board with the bias, the residual skip and the activation fused, and the value head's fully
// connected layer. No third-party code; one body (nn/cpu_kernels_body.h) compiled once per
// instruction set and chosen at run time by CPUID, so that a build for x86-64-v3 (or below) uses
// AVX-512 where the running processor has it:
//   SCALAR       plain C++ on 8-float arrays; any processor (and the non-x86 builds)
//   AVX2         AVX2 + FMA, 8 floats a vector
//   AVX512       AVX-512F, 16 floats a vector
//   AVX512_BF16  AVX512 plus `vdpbf16ps` (bf16 pairs, fp32 accumulation) for bf16 convolutions
// and, apart from those, the int8 convolution (Int8Kernels), the widest the processor has:
//   avx512-vnni  AVX-512 VNNI's `vpdpbusd`, 16 int32 accumulators a vector
//   avx-vnni     AVX-VNNI's (the VEX form, as on Intel's Alder Lake), 8 a vector
//   avx2-int8    AVX2 alone: `vpmaddubsw` and `vpmaddwd` in place of `vpdpbusd`, 8 a vector (the
//                sum of two products saturates at 16 bits first: nn/cpu_kernels.cpp)
//
// Layout ("padded NHWC"): a position's activations are [121][stride] values, the 9x9 board with a
// border of zero squares (11x11, square (h, w) at index (h + 1) * 11 + w + 1) and the channels of
// a square contiguous, `stride` a multiple of 16. The border and the channels past the real ones are
// zero and stay zero (their weights and biases are zero), so the convolutions need no bounds tests.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace jiriki::nn::kernels {

constexpr int PADDED_BOARD = 11;                             // the 9x9 board and its zero border
constexpr int PADDED_SQUARES = PADDED_BOARD * PADDED_BOARD;  // 121
constexpr int CHANNEL_ALIGN = 16;                            // strides and padded channel counts are multiples

// Index in the padded board of the square (h, w) of the 9x9 board (sq = 9 * h + w).
constexpr int padded_square(int sq) { return (sq / 9 + 1) * PADDED_BOARD + sq % 9 + 1; }
constexpr int round_up(int x, int m) { return (x + m - 1) / m * m; }

enum class Isa { SCALAR, AVX2, AVX512, AVX512_BF16 };
const char* isa_name(Isa isa);  // "scalar", "avx2", "avx512", "avx512-bf16"
// Whether the running processor (and the operating system) can run that instruction set.
bool cpu_supports(Isa isa);
// The widest instruction set this processor runs.
Isa best_isa();

enum class Act { NONE, RELU, SWISH };

// One convolution over positions [0, n) (the pointers point at the first one). out[sq][co] =
// act(bias[co] + residual[sq][co] + sum over taps and ci of weight * in[sq + tap][ci]).
//
// In int8 (Int8Kernels::conv) the input is u8 and the weights s8, summed in s32, and
//   out[sq][co] = act(scale[co] * (acc + bias[co]) + residual_scale * residual_u8[sq][co]),
// written as fp32 (out) and/or as u8 rounded to nearest and saturated (out_u8).
struct ConvArgs {
  const void* in = nullptr;  // float, bf16 (uint16_t) for conv_bf16, u8 for int8: [n][121][in_stride]
  int in_stride = 0;
  int cin = 0;                   // input channels summed over (<= in_stride; even for bf16, a multiple of 4 for int8)
  int taps = 9;                  // 9: 3x3 with padding 1; 1: 1x1
  const void* weight = nullptr;  // as pack_conv_weights laid it out for this kernel set
  const float* bias = nullptr;   // [cout]
  int cout = 0;                  // output channels computed: a multiple of 16
  int out_stride = 0;
  const float* residual = nullptr;  // fp32 [n][121][out_stride] added before the activation, or null; may equal out
  float* out = nullptr;             // fp32 output, or null
  uint16_t* out_bf16 = nullptr;     // bf16 output, or null (conv_bf16's kernel sets only)
  Act act = Act::NONE;
  const float* scale = nullptr;          // int8: [cout], each output channel's multiplier
  const uint8_t* residual_u8 = nullptr;  // int8: u8 [n][121][out_stride] added (times residual_scale), or null
  float residual_scale = 1.0f;
  uint8_t* out_u8 = nullptr;  // int8: u8 output, or null; may equal residual_u8
};

// The value head's fully connected layer over positions [0, n): y[b][o] = act(bias[o] + sum_i
// x[b][i] * wt[i][o]), wt the weights transposed ([in][out], out a multiple of 16).
struct DenseArgs {
  const float* x = nullptr;  // [n][x_stride]
  int x_stride = 0, in = 0;
  const float* wt = nullptr;  // [in][out]
  const float* bias = nullptr;
  int out = 0;
  float* y = nullptr;  // [n][out]
  Act act = Act::NONE;
};

// The kernels of one instruction set. A call does the work items [begin, end) of n positions, so
// that threads can share one call's items (conv_items, dense_items give their count).
struct KernelSet {
  Isa isa;
  int block;  // output channels a convolution's register tile covers (the packed weights' block)
  void (*conv)(const ConvArgs& a, int n, int64_t begin, int64_t end);
  void (*conv_bf16)(const ConvArgs& a, int n, int64_t begin, int64_t end);  // null without bf16 instructions
  void (*dense)(const DenseArgs& a, int n, int64_t begin, int64_t end);
  int64_t conv_items(int n, int cout) const;
  int64_t dense_items(int n, int out) const;
};

// The kernel set of an instruction set the processor runs (cpu_supports(isa)).
const KernelSet& kernel_set(Isa isa);

// The int8 convolution of one instruction set (ConvArgs above; weights from pack_conv_weights_s8).
struct Int8Kernels {
  const char* name;  // "avx512-vnni", "avx-vnni" or "avx2-int8"
  int bits;          // the vectors' width: 512 or 256
  int block;         // output channels a register tile covers (the packed weights' block)
  void (*conv)(const ConvArgs& a, int n, int64_t begin, int64_t end);
  int64_t conv_items(int n, int cout) const;
};

// How many of `bytes` u8 activations are 255 (saturated: nn/backend.h's SATURATION_LIMIT), in the
// widest vectors the processor has (AVX-512 BW 64 bytes at a time, AVX2 32, else 8 in a word).
int count_saturated(const uint8_t* a, size_t bytes);

// Every int8 kernel set the processor runs, the widest first (avx2-int8 last, on any AVX2 processor).
std::vector<const Int8Kernels*> int8_kernels_here();
// The first of those within `cap` (AVX512_BF16 or AVX512: any; AVX2: the 256-bit ones), or null (the
// scalar cap, or a processor without AVX2).
const Int8Kernels* int8_kernels(Isa cap);

// A convolution's weights (OIHW, [cout][cin][k][k], k = 3 or 1) in the layout of `set`'s kernel:
// output channels in blocks of set.block (the last one narrower), each [tap][ci][block] fp32, or for
// bf16 [tap][ci / 2][block][2]. Output channels are padded with zeros to cout_padded, input channels
// to cin_padded.
std::vector<float> pack_conv_weights(const float* oihw, int cout, int cin, int kernel, int cout_padded, int cin_padded,
                                     const KernelSet& set);
std::vector<uint16_t> pack_conv_weights_bf16(const float* oihw, int cout, int cin, int kernel, int cout_padded,
                                             int cin_padded, const KernelSet& set);
// The same in s8 for Int8Kernels of `block`: [tap][ci / 4][block][4], each output channel rounded at
// its own scale, 127 / its largest |weight|, written to scales[co] (1 for an all-zero or padded one).
std::vector<int8_t> pack_conv_weights_s8(const float* oihw, int cout, int cin, int kernel, int cout_padded,
                                         int cin_padded, int block, std::vector<float>& scales);

}  // namespace jiriki::nn::kernels
