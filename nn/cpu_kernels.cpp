// The kernel sets: nn/cpu_kernels_body.h compiled once per instruction set, each in its own
// namespace under that set's target options (GCC's `#pragma GCC target`, clang's `#pragma clang
// attribute`), so that the rest of the program keeps the build's baseline and the wider sets run
// only where CPUID says the processor has them.
#include "nn/cpu_kernels.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "common/bf16.h"

#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GNUC__)
#define JIRIKI_KERNELS_X86 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define JIRIKI_KERNELS_X86 0
#endif

namespace jiriki::nn::kernels {

namespace {

#define JIRIKI_KERNELS_INT8 0  // (1 only for the int8 sets below)

// ---- SCALAR: plain C++ on arrays of 8 floats, for any processor ---------------------------------
namespace scalar {
constexpr int W = 8, NV_MAX = 2;
struct F {
  float x[W];
};
#define JIRIKI_SCALAR_MAP(expr)                \
  F r;                                         \
  for (int i = 0; i < W; ++i) r.x[i] = (expr); \
  return r
static inline F vset1(float s) { JIRIKI_SCALAR_MAP(s); }
static inline F vzero() { return vset1(0.0f); }
static inline F vload(const float* p) { JIRIKI_SCALAR_MAP(p[i]); }
static inline void vstore(float* p, F a) {
  for (int i = 0; i < W; ++i) p[i] = a.x[i];
}
static inline F vadd(F a, F b) { JIRIKI_SCALAR_MAP(a.x[i] + b.x[i]); }
static inline F vsub(F a, F b) { JIRIKI_SCALAR_MAP(a.x[i] - b.x[i]); }
static inline F vmul(F a, F b) { JIRIKI_SCALAR_MAP(a.x[i] * b.x[i]); }
static inline F vdiv(F a, F b) { JIRIKI_SCALAR_MAP(a.x[i] / b.x[i]); }
static inline F vmax(F a, F b) { JIRIKI_SCALAR_MAP(a.x[i] > b.x[i] ? a.x[i] : b.x[i]); }
static inline F vmin(F a, F b) { JIRIKI_SCALAR_MAP(a.x[i] < b.x[i] ? a.x[i] : b.x[i]); }
static inline F vfma(F a, F b, F c) { JIRIKI_SCALAR_MAP(std::fma(a.x[i], b.x[i], c.x[i])); }
static inline F vround(F a) { JIRIKI_SCALAR_MAP(std::nearbyint(a.x[i])); }
static inline F vpow2i(F n) { JIRIKI_SCALAR_MAP(std::bit_cast<float>(uint32_t(int32_t(n.x[i]) + 127) << 23)); }
#undef JIRIKI_SCALAR_MAP
#define JIRIKI_KERNELS_BF16 0
#include "nn/cpu_kernels_body.h"
#undef JIRIKI_KERNELS_BF16
}  // namespace scalar

#if JIRIKI_KERNELS_X86
// The vector operations of one x86 width, with the names the kernels' body (nn/cpu_kernels_body.h)
// uses: BITS 256 (AVX2 + FMA) or 512 (AVX-512F), NV the most vectors a row of the kernels holds,
// ROUND the width's round-to-nearest intrinsic (the one name the widths do not share).
#define JIRIKI_X86_VECTOR(BITS, NV, ROUND)                                                                           \
  constexpr int W = BITS / 32, NV_MAX = NV;                                                                          \
  using F = __m##BITS;                                                                                               \
  static inline F vzero() { return _mm##BITS##_setzero_ps(); }                                                       \
  static inline F vset1(float s) { return _mm##BITS##_set1_ps(s); }                                                  \
  static inline F vload(const float* p) { return _mm##BITS##_loadu_ps(p); }                                          \
  static inline void vstore(float* p, F a) { _mm##BITS##_storeu_ps(p, a); }                                          \
  static inline F vadd(F a, F b) { return _mm##BITS##_add_ps(a, b); }                                                \
  static inline F vsub(F a, F b) { return _mm##BITS##_sub_ps(a, b); }                                                \
  static inline F vmul(F a, F b) { return _mm##BITS##_mul_ps(a, b); }                                                \
  static inline F vdiv(F a, F b) { return _mm##BITS##_div_ps(a, b); }                                                \
  static inline F vmax(F a, F b) { return _mm##BITS##_max_ps(a, b); }                                                \
  static inline F vmin(F a, F b) { return _mm##BITS##_min_ps(a, b); }                                                \
  static inline F vfma(F a, F b, F c) { return _mm##BITS##_fmadd_ps(a, b, c); }                                      \
  static inline F vround(F a) { return ROUND(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }                    \
  static inline F vpow2i(F n) {                                                                                      \
    return _mm##BITS##_castsi##BITS##_ps(                                                                            \
        _mm##BITS##_slli_epi32(_mm##BITS##_add_epi32(_mm##BITS##_cvtps_epi32(n), _mm##BITS##_set1_epi32(127)), 23)); \
  }
#define JIRIKI_AVX2_VECTOR JIRIKI_X86_VECTOR(256, 2, _mm256_round_ps)
#define JIRIKI_AVX512_VECTOR JIRIKI_X86_VECTOR(512, 4, _mm512_roundscale_ps)

// ---- AVX2 + FMA: 8 floats a vector ---------------------------------------------------------------
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif
namespace avx2 {
JIRIKI_AVX2_VECTOR
#define JIRIKI_KERNELS_BF16 0
#include "nn/cpu_kernels_body.h"
#undef JIRIKI_KERNELS_BF16
}  // namespace avx2
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

// ---- AVX-512F: 16 floats a vector, and with AVX-512 BF16 the bf16 convolution ----------------------
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f"))), apply_to = function)
#else
// GCC 12's AVX-512 intrinsics start from a deliberately undefined vector, which it then reports.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC push_options
#pragma GCC target("avx512f")
#endif
namespace avx512 {
JIRIKI_AVX512_VECTOR
#define JIRIKI_KERNELS_BF16 0
#include "nn/cpu_kernels_body.h"
#undef JIRIKI_KERNELS_BF16
}  // namespace avx512
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16")
#endif
namespace avx512_bf16 {
JIRIKI_AVX512_VECTOR
// Round to nearest even, as nn's host conversion (common/bf16.h).
static inline void store_bf16(uint16_t* p, F a) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), (__m256i)_mm512_cvtneps_pbh(a));
}
static inline F vdot_bf16(F acc, F w, int32_t pair) {
  return _mm512_dpbf16_ps(acc, (__m512bh)w, (__m512bh)_mm512_set1_epi32(pair));
}
#define JIRIKI_KERNELS_BF16 1
#include "nn/cpu_kernels_body.h"
#undef JIRIKI_KERNELS_BF16
}  // namespace avx512_bf16
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

// ---- The int8 convolutions: `vpdpbusd` on 512-bit (AVX-512 VNNI) or 256-bit (AVX-VNNI) vectors, ---
// ---- or its AVX2 equivalent ---------------------------------------------------------------------
#undef JIRIKI_KERNELS_INT8
#define JIRIKI_KERNELS_INT8 1
#define JIRIKI_KERNELS_BF16 0
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni")
#endif
namespace avx512_vnni {
JIRIKI_AVX512_VECTOR
using I = __m512i;
static inline I izero() { return _mm512_setzero_si512(); }
static inline I iload(const void* p) { return _mm512_loadu_si512(p); }
// In assembly, the accumulator tied to its register: GCC otherwise copies each of a tile's accumulators
// through another register at every step (and spills), which halves the kernel's speed.
static inline I vdot_u8s8(I acc, I w, int32_t quad) {
  asm("vpdpbusd %1, %2, %0" : "+v"(acc) : "v"(w), "v"(_mm512_set1_epi32(quad)));
  return acc;
}
static inline F vcvt(I a) { return _mm512_cvtepi32_ps(a); }
static inline F vload_u8(const uint8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
// Negative values to 0 (they come only before an activation), rounded to nearest even, 255 at most.
static inline void store_u8(uint8_t* p, F x) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtusepi32_epi8(_mm512_cvtps_epi32(vmax(x, vzero()))));
}
#include "nn/cpu_kernels_body.h"
}  // namespace avx512_vnni
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,avxvnni"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,avxvnni")
#endif
// The int8 body's helpers on 256-bit vectors, shared by AVX-VNNI's kernel and AVX2's.
#define JIRIKI_AVX2_INT8                                                                                   \
  JIRIKI_AVX2_VECTOR                                                                                       \
  using I = __m256i;                                                                                       \
  static inline I izero() { return _mm256_setzero_si256(); }                                               \
  static inline I iload(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }      \
  static inline F vcvt(I a) { return _mm256_cvtepi32_ps(a); }                                              \
  static inline F vload_u8(const uint8_t* p) {                                                             \
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))); \
  }                                                                                                        \
  /* As avx512_vnni's: the int32s packed with unsigned saturation to u16, then to u8. */                   \
  static inline void store_u8(uint8_t* p, F x) {                                                           \
    const __m256i i = _mm256_cvtps_epi32(vmax(x, vzero()));                                                \
    const __m128i u16 = _mm_packus_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));       \
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packus_epi16(u16, u16));                           \
  }
namespace avx_vnni {
JIRIKI_AVX2_INT8
static inline I vdot_u8s8(I acc, I w, int32_t quad) { return _mm256_dpbusd_avx_epi32(acc, _mm256_set1_epi32(quad), w); }
#include "nn/cpu_kernels_body.h"
}  // namespace avx_vnni
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

// ---- AVX2 alone: `vpdpbusd` as `vpmaddubsw` (u8 x s8 pairs summed to s16) and `vpmaddwd` (the s16
// pairs to s32). The 16-bit sum of two products saturates at 32,767 where two products can reach
// 64,770: the trunk's scales put the largest activation of the calibration games at 255 and each
// output channel's largest weight at 127, and ordinary positions stay clear of it (as oneDNN's
// kernels on such processors, which compute the same way; docs/performance.md).
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif
namespace avx2_int8 {
JIRIKI_AVX2_INT8
static inline I vdot_u8s8(I acc, I w, int32_t quad) {
  const I pairs = _mm256_maddubs_epi16(_mm256_set1_epi32(quad), w);
  return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
}
#include "nn/cpu_kernels_body.h"
}  // namespace avx2_int8
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#undef JIRIKI_AVX2_INT8
#undef JIRIKI_KERNELS_BF16
#undef JIRIKI_KERNELS_INT8
#define JIRIKI_KERNELS_INT8 0

#undef JIRIKI_AVX512_VECTOR
#undef JIRIKI_AVX2_VECTOR
#undef JIRIKI_X86_VECTOR
#endif  // JIRIKI_KERNELS_X86

constexpr int DENSE_POSITIONS = 4;  // as the body's dense tile

const KernelSet SCALAR_SET{Isa::SCALAR, scalar::BLOCK, scalar::convolve, nullptr, scalar::dense};
#if JIRIKI_KERNELS_X86
const KernelSet AVX2_SET{Isa::AVX2, avx2::BLOCK, avx2::convolve, nullptr, avx2::dense};
const KernelSet AVX512_SET{Isa::AVX512, avx512::BLOCK, avx512::convolve, nullptr, avx512::dense};
const KernelSet AVX512_BF16_SET{Isa::AVX512_BF16, avx512::BLOCK, avx512::convolve, avx512_bf16::convolve,
                                avx512::dense};
static_assert(avx512::BLOCK == avx512_bf16::BLOCK, "the fp32 and bf16 weights share a block");
const Int8Kernels AVX512_VNNI_INT8{"avx512-vnni", 512, avx512_vnni::BLOCK, avx512_vnni::convolve};
const Int8Kernels AVX_VNNI_INT8{"avx-vnni", 256, avx_vnni::BLOCK, avx_vnni::convolve};
const Int8Kernels AVX2_INT8{"avx2-int8", 256, avx2_int8::BLOCK, avx2_int8::convolve};
#endif

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::SCALAR: return "scalar";
    case Isa::AVX2: return "avx2";
    case Isa::AVX512: return "avx512";
    case Isa::AVX512_BF16: return "avx512-bf16";
  }
  return "?";
}

bool cpu_supports(Isa isa) {
#if JIRIKI_KERNELS_X86
  // __builtin_cpu_supports also asks the operating system (XGETBV) whether it saves the registers.
  switch (isa) {
    case Isa::SCALAR: return true;
    case Isa::AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::AVX512: return __builtin_cpu_supports("avx512f");
    case Isa::AVX512_BF16:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
  }
  return false;
#else
  return isa == Isa::SCALAR;
#endif
}

Isa best_isa() {
  for (Isa isa : {Isa::AVX512_BF16, Isa::AVX512, Isa::AVX2})
    if (cpu_supports(isa)) return isa;
  return Isa::SCALAR;
}

const KernelSet& kernel_set(Isa isa) {
  if (!cpu_supports(isa)) throw std::runtime_error(std::string("this processor lacks ") + isa_name(isa));
#if JIRIKI_KERNELS_X86
  switch (isa) {
    case Isa::SCALAR: break;
    case Isa::AVX2: return AVX2_SET;
    case Isa::AVX512: return AVX512_SET;
    case Isa::AVX512_BF16: return AVX512_BF16_SET;
  }
#endif
  return SCALAR_SET;
}

std::vector<const Int8Kernels*> int8_kernels_here() {
  std::vector<const Int8Kernels*> out;
#if JIRIKI_KERNELS_X86
  if (cpu_supports(Isa::AVX512) && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512vnni"))
    out.push_back(&AVX512_VNNI_INT8);
  // AVX-VNNI is CPUID leaf 7, subleaf 1, EAX bit 4 (clang's __builtin_cpu_supports does not know it);
  // cpu_supports(AVX2) has asked the operating system for the 256-bit registers.
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (cpu_supports(Isa::AVX2) && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 4 & 1)) out.push_back(&AVX_VNNI_INT8);
  if (cpu_supports(Isa::AVX2)) out.push_back(&AVX2_INT8);
#endif
  return out;
}

const Int8Kernels* int8_kernels(Isa cap) {
  if (cap == Isa::SCALAR) return nullptr;
  for (const Int8Kernels* k : int8_kernels_here())
    if (k->bits == 256 || cap == Isa::AVX512 || cap == Isa::AVX512_BF16) return k;
  return nullptr;
}

namespace {
// Eight bytes at a time: a byte of ~w is zero exactly where w's is 255, and (y & 0x7f..) + 0x7f..
// sets each byte's top bit unless that byte is zero.
int count_saturated_words(const uint8_t* a, size_t bytes) {
  constexpr uint64_t LOW7 = 0x7f7f7f7f7f7f7f7full;
  int count = 0;
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w;
    std::memcpy(&w, a + i, 8);
    const uint64_t y = ~w;
    count += std::popcount(~(((y & LOW7) + LOW7) | y | LOW7));
  }
  for (; i < bytes; ++i) count += a[i] == 255;
  return count;
}
#if JIRIKI_KERNELS_X86
__attribute__((target("avx512f,avx512bw"))) int count_saturated_avx512(const uint8_t* a, size_t bytes) {
  const __m512i full = _mm512_set1_epi8(char(0xff));
  int count = 0;
  size_t i = 0;
  for (; i + 64 <= bytes; i += 64)
    count += std::popcount(uint64_t(_mm512_cmpeq_epi8_mask(_mm512_loadu_si512(a + i), full)));
  return count + count_saturated_words(a + i, bytes - i);
}
__attribute__((target("avx2"))) int count_saturated_avx2(const uint8_t* a, size_t bytes) {
  const __m256i full = _mm256_set1_epi8(char(0xff));
  int count = 0;
  size_t i = 0;
  for (; i + 32 <= bytes; i += 32) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
    count += std::popcount(uint32_t(_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, full))));
  }
  return count + count_saturated_words(a + i, bytes - i);
}
#endif
}  // namespace

int count_saturated(const uint8_t* a, size_t bytes) {
#if JIRIKI_KERNELS_X86
  static const auto best = cpu_supports(Isa::AVX512) && __builtin_cpu_supports("avx512bw") ? count_saturated_avx512
                           : cpu_supports(Isa::AVX2)                                       ? count_saturated_avx2
                                                                                           : count_saturated_words;
  return best(a, bytes);
#else
  return count_saturated_words(a, bytes);
#endif
}

int64_t KernelSet::conv_items(int n, int cout) const { return int64_t(n) * 9 * ((cout + block - 1) / block); }
int64_t Int8Kernels::conv_items(int n, int cout) const { return int64_t(n) * 9 * ((cout + block - 1) / block); }
int64_t KernelSet::dense_items(int n, int out) const {
  return int64_t((n + DENSE_POSITIONS - 1) / DENSE_POSITIONS) * (out / block);
}

namespace {

// Calls put(index, value, co) for every weight in the packed order: blocks of `block` output
// channels, each [tap][ci / step][channel of the block][step] (step 2 for bf16 pairs, 4 for s8).
template <class Put>
void pack(const float* oihw, int cout, int cin, int kernel, int cout_padded, int cin_padded, int block, int step,
          Put put) {
  const int taps = kernel * kernel;
  int64_t index = 0;
  for (int co0 = 0; co0 < cout_padded; co0 += block) {
    const int width = std::min(block, cout_padded - co0);
    for (int t = 0; t < taps; ++t)
      for (int ci0 = 0; ci0 < cin_padded; ci0 += step)
        for (int co = co0; co < co0 + width; ++co)
          for (int ci = ci0; ci < ci0 + step; ++ci, ++index)
            put(index, co < cout && ci < cin ? oihw[(int64_t(co) * cin + ci) * taps + t] : 0.0f, co);
  }
}

}  // namespace

std::vector<float> pack_conv_weights(const float* oihw, int cout, int cin, int kernel, int cout_padded, int cin_padded,
                                     const KernelSet& set) {
  std::vector<float> out(size_t(cout_padded) * cin_padded * kernel * kernel);
  pack(oihw, cout, cin, kernel, cout_padded, cin_padded, set.block, 1, [&](int64_t i, float w, int) { out[i] = w; });
  return out;
}

std::vector<uint16_t> pack_conv_weights_bf16(const float* oihw, int cout, int cin, int kernel, int cout_padded,
                                             int cin_padded, const KernelSet& set) {
  if (cin_padded % 2) throw std::invalid_argument("bf16 weights need an even number of input channels");
  std::vector<uint16_t> out(size_t(cout_padded) * cin_padded * kernel * kernel);
  pack(oihw, cout, cin, kernel, cout_padded, cin_padded, set.block, 2,
       [&](int64_t i, float w, int) { out[i] = to_bf16(w); });
  return out;
}

std::vector<int8_t> pack_conv_weights_s8(const float* oihw, int cout, int cin, int kernel, int cout_padded,
                                         int cin_padded, int block, std::vector<float>& scales) {
  if (cin_padded % 4) throw std::invalid_argument("s8 weights need a multiple of 4 input channels");
  const int64_t per_output = int64_t(cin) * kernel * kernel;
  scales.assign(cout_padded, 1.0f);
  for (int co = 0; co < cout; ++co) {
    float largest = 0;
    for (int64_t i = 0; i < per_output; ++i) largest = std::max(largest, std::abs(oihw[co * per_output + i]));
    if (largest > 0) scales[co] = 127.0f / largest;
  }
  std::vector<int8_t> out(size_t(cout_padded) * cin_padded * kernel * kernel);
  pack(oihw, cout, cin, kernel, cout_padded, cin_padded, block, 4,
       [&](int64_t i, float w, int co) { out[i] = int8_t(std::lround(w * scales[co])); });
  return out;
}

}  // namespace jiriki::nn::kernels
