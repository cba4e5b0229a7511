// The GPU trainer's kernels (declarations, layouts and formulas in training/cuda/train_kernels.h).
// All are memory-bound next to the convolutions. The elementwise ones move 8 bf16 values (16 bytes)
// per access where the channel count allows it; the reductions over the batch are two-stage (a
// partial sum per block, then the blocks' partials summed in double in a fixed order), so that they
// are deterministic and need no atomics or zeroed accumulators.
#include <cuda_bf16.h>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cstdint>
#include <initializer_list>

#include "nn/cuda/activation.cuh"
#include "nn/cuda/cuda_util.h"
#include "nn/cuda/kernels.h"
#include "training/cuda/train_kernels.h"

namespace jiriki::training::cuda {

using nn::Activation;
using nn::POLICY_LABELS;
using nn::POLICY_SIZE;
using nn::SQUARES;
using nn::VALUE_CHANNELS;
using nn::VALUE_HIDDEN;

namespace {

using bf16 = __nv_bfloat16;
static_assert(sizeof(bf16) == sizeof(uint16_t));

using nn::cuda::HEAD_OUTPUTS;  // the heads' GEMM: policy and value 1x1 convolutions, one row per square
constexpr int THREADS = 256;
constexpr int MAX_REDUCE_BLOCKS = 512;  // partial sums per channel reduction
constexpr int MAX_COLUMN_CHUNKS = 64;
constexpr int NORM_BLOCKS = 512;
static_assert(NORM_BLOCKS <= SUM_OF_SQUARES_SCRATCH);

const bf16* as_bf16(const uint16_t* p) { return reinterpret_cast<const bf16*>(p); }
bf16* as_bf16(uint16_t* p) { return reinterpret_cast<bf16*>(p); }

int grid_for(int64_t count, int threads = THREADS) {
  return int(std::clamp<int64_t>((count + threads - 1) / threads, 1, 4 * 132 * 8));  // a few waves at most
}

// ---- device helpers ------------------------------------------------------------------------

using nn::cuda::activate;  // nn/cuda/activation.cuh: the one definition, also the inference kernels'

// act'(z): ReLU' = [z > 0] (0 at the kink, as PyTorch), Swish' = s (1 + z (1 - s)), s = sigmoid(z).
__device__ __forceinline__ float activate_grad(float z, Activation act) {
  if (act == Activation::RELU) return z > 0.0f ? 1.0f : 0.0f;
  const float s = 1.0f / (1.0f + expf(-z));
  return s * (1.0f + z * (1.0f - s));
}

// The batch norm's output before the activation. One definition for the forward pass and for the
// backward pass's recomputation, so that both see the same z (ReLU's kink must fall alike).
__device__ __forceinline__ float pre_activation(float x, float scale, float shift, float residual) {
  return fmaf(x, scale, shift) + residual;
}

// V consecutive bf16 values as loaded (one 16-byte access when V == 8), kept packed until used:
// half the registers of floats, which lets the batch-norm kernels keep two rows in flight.
template <int V>
struct Raw {
  bf16 h[V];
};
template <>
struct Raw<8> {
  uint4 u;
};

template <int V>
__device__ __forceinline__ Raw<V> load_raw(const bf16* p) {
  Raw<V> r;
  if constexpr (V == 8) r.u = *reinterpret_cast<const uint4*>(p);
  else
#pragma unroll
    for (int k = 0; k < V; ++k) r.h[k] = p[k];
  return r;
}

template <int V>
__device__ __forceinline__ void unpack(const Raw<V>& r, float (&f)[V]) {
  if constexpr (V == 8) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&r.u);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 t = __bfloat1622float2(h[k]);
      f[2 * k] = t.x;
      f[2 * k + 1] = t.y;
    }
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) f[k] = __bfloat162float(r.h[k]);
  }
}

template <int V>
__device__ __forceinline__ void store(bf16* p, const float (&f)[V]) {
  if constexpr (V == 8) {
    uint4 u;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
    for (int k = 0; k < 4; ++k) h[k] = __floats2bfloat162_rn(f[2 * k], f[2 * k + 1]);
    *reinterpret_cast<uint4*>(p) = u;
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) p[k] = __float2bfloat16_rn(f[k]);
  }
}

// V consecutive floats (per-channel constants) into registers: two 16-byte loads when V == 8 (the
// launchers check the alignment).
template <int V>
__device__ __forceinline__ void load_floats(const float* p, float (&f)[V]) {
  if constexpr (V == 8) {
    const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) f[k] = p[k];
  }
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
template <class T>
__device__ T block_sum(T v) {
  __shared__ T warp_sums[32];
  __syncthreads();  // warp_sums may still be read by a previous call
  for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  T total = 0;
  for (int w = 0; w < warps; ++w) total += warp_sums[w];  // the same order in every thread
  return total;
}

// The largest value over the block and its smallest index (std::max_element's first maximum).
__device__ void block_argmax(float& v, int& index) {
  __shared__ float values[32];
  __shared__ int indices[32];
  __syncthreads();
  for (int o = 16; o > 0; o /= 2) {
    const float ov = __shfl_down_sync(0xffffffffu, v, o);
    const int oi = __shfl_down_sync(0xffffffffu, index, o);
    if (ov > v || (ov == v && oi < index)) v = ov, index = oi;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  if (lane == 0) values[warp] = v, indices[warp] = index;
  __syncthreads();
  v = values[0], index = indices[0];
  for (int w = 1; w < warps; ++w)
    if (values[w] > v || (values[w] == v && indices[w] < index)) v = values[w], index = indices[w];
}

// ---- inputs (features_to_nhwc: nn/cuda/kernels.h, one kernel for inference and training) --------

__global__ void fill_random_kernel(bf16* x, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 0x9e3779b9u ^ seed;
    h ^= h >> 16, h *= 0x85ebca6bu, h ^= h >> 13, h *= 0xc2b2ae35u, h ^= h >> 16;
    x[i] = __float2bfloat16_rn(float(h >> 8) * (2.0f / 16777216.0f) - 1.0f);
  }
}

// ---- batch-norm thread layout ----------------------------------------------------------------
// Every batch-norm kernel gives each thread V channels (a group) for its whole life and a lane of
// rows: the per-channel constants are read once into registers instead of at every element (those
// scalar loads, eight per 16-byte access and constant, made the kernels 2-3x slower than their
// bytes). A block is (channels / V) groups x `lanes` lanes; a row's groups are adjacent threads, so
// the accesses of a block cover whole rows, contiguous in memory. The grids stay within what the
// GPU holds at once, so that each thread walks several rows and its constants pay off; the loops
// take two rows per iteration, issuing both rows' loads before using either.

// The saved statistics of V channels from c0: saved = [4][channels] of mean, invstd, scale, shift.
template <int V>
struct BnConstants {
  float mean[V], invstd[V], scale[V], shift[V];
  __device__ void load(const float* saved, int channels, int c0) {
    load_floats<V>(saved + c0, mean);
    load_floats<V>(saved + channels + c0, invstd);
    load_floats<V>(saved + 2 * channels + c0, scale);
    load_floats<V>(saved + 3 * channels + c0, shift);
  }
};

// The backward pass through act(x * scale + shift [+ residual]) for V channels of one row, from
// the packed loads: dz = dy act'(z), z recomputed; x as floats too, for the caller's xhat.
template <int V>
__device__ __forceinline__ void bn_act_grad(const Raw<V>& dy, const Raw<V>& x_raw, bool has_residual,
                                            const Raw<V>& residual, const BnConstants<V>& k, Activation act,
                                            float (&x)[V], float (&dz)[V]) {
  float d[V], r[V] = {};
  unpack(dy, d);
  unpack(x_raw, x);
  if (has_residual) unpack(residual, r);
#pragma unroll
  for (int j = 0; j < V; ++j) dz[j] = d[j] * activate_grad(pre_activation(x[j], k.scale[j], k.shift[j], r[j]), act);
}

// ---- per-channel sums over the rows of a [rows][channels] matrix --------------------------------
// Each thread owns V channels and a lane of rows; the block's lanes are summed in shared memory and
// each block writes partial[block][2][channels] (two sums per channel). `blockDim.x` is
// (channels / V) x lanes.

struct ReduceShape {
  int vector, groups, lanes, blocks;
  int64_t rows_per_block;
  size_t shared_bytes(int channels) const { return size_t(lanes) * 2 * channels * sizeof(float); }
};

// `constants`: the per-channel float arrays the kernels will read 8 at a time.
ReduceShape reduce_shape(int64_t rows, int channels, std::initializer_list<const float*> constants = {}) {
  ReduceShape s;
  s.vector = channels % 8 == 0 ? 8 : 1;
  for (const float* p : constants)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) s.vector = 1;
  s.groups = channels / s.vector;
  if (s.groups > 1024) throw std::invalid_argument("GPU trainer: too many channels for the batch-norm kernels");
  s.lanes = std::max(1, THREADS / s.groups);
  // 8 rows per thread or more (4 made the sums and the finalize that adds the partials slower).
  s.blocks = int(std::clamp<int64_t>((rows + 8 * s.lanes - 1) / (8 * s.lanes), 1, MAX_REDUCE_BLOCKS));
  s.rows_per_block = (rows + s.blocks - 1) / s.blocks;
  return s;
}

template <int V, class Term>
__global__ void channel_sums_kernel(Term term, int64_t rows, int channels, int64_t rows_per_block, float* partial) {
  extern __shared__ float sums[];  // [lanes][2][channels]
  const int groups = channels / V, lanes = blockDim.x / groups;
  const int g = threadIdx.x % groups, lane = threadIdx.x / groups;
  float sa[V], sb[V];
#pragma unroll
  for (int k = 0; k < V; ++k) sa[k] = sb[k] = 0.0f;
  Term t = term;
  t.setup(g * V);  // this thread's channels' constants, into registers once
  const int64_t r0 = blockIdx.x * rows_per_block, r1 = min(rows, r0 + rows_per_block);
  for (int64_t r = r0 + lane; r < r1; r += 2 * lanes) {
    float a[2][V], b[2][V];
    t.load(r * channels + g * V, 0);
    const bool second = r + lanes < r1;
    if (second) t.load((r + lanes) * channels + g * V, 1);
    t.terms(0, a[0], b[0]);
#pragma unroll
    for (int k = 0; k < V; ++k) sa[k] += a[0][k], sb[k] += b[0][k];
    if (second) {
      t.terms(1, a[1], b[1]);
#pragma unroll
      for (int k = 0; k < V; ++k) sa[k] += a[1][k], sb[k] += b[1][k];
    }
  }
#pragma unroll
  for (int k = 0; k < V; ++k) {
    sums[(2 * lane) * channels + g * V + k] = sa[k];
    sums[(2 * lane + 1) * channels + g * V + k] = sb[k];
  }
  __syncthreads();
  for (int c = threadIdx.x; c < channels; c += blockDim.x) {
    float a = 0.0f, b = 0.0f;
    for (int l = 0; l < lanes; ++l) a += sums[(2 * l) * channels + c], b += sums[(2 * l + 1) * channels + c];
    partial[(size_t(blockIdx.x) * 2) * channels + c] = a;
    partial[(size_t(blockIdx.x) * 2 + 1) * channels + c] = b;
  }
}

template <class Term>
void launch_channel_sums(const Term& term8, const auto& term1, int64_t rows, int channels, float* partial,
                         cudaStream_t stream, ReduceShape s) {
  const int threads = s.groups * s.lanes;
  if (s.vector == 8)
    channel_sums_kernel<8>
        <<<s.blocks, threads, s.shared_bytes(channels), stream>>>(term8, rows, channels, s.rows_per_block, partial);
  else
    channel_sums_kernel<1>
        <<<s.blocks, threads, s.shared_bytes(channels), stream>>>(term1, rows, channels, s.rows_per_block, partial);
  JIRIKI_CUDA_CHECK_LAUNCH();
}

// The terms summed per channel. A Term loads a row's values into one of two slots (load), then
// turns a slot into the row's two terms (terms), so that two rows' loads are in flight together.

// x and x^2, for the statistics.
template <int V>
struct MomentTerm {
  const bf16* x;
  Raw<V> v[2];
  __device__ void setup(int) {}
  __device__ void load(int64_t e, int slot) { v[slot] = load_raw<V>(x + e); }
  __device__ void terms(int slot, float (&a)[V], float (&b)[V]) const {
    unpack(v[slot], a);
#pragma unroll
    for (int k = 0; k < V; ++k) b[k] = a[k] * a[k];
  }
};

// dz and dz * xhat, for the backward pass.
template <int V>
struct BackwardTerm {
  const bf16 *dy, *x, *residual;
  const float* saved;
  int channels;
  Activation act;
  BnConstants<V> k;
  Raw<V> d[2], xv[2], r[2];
  __device__ void setup(int c0) { k.load(saved, channels, c0); }
  __device__ void load(int64_t e, int slot) {
    d[slot] = load_raw<V>(dy + e);
    xv[slot] = load_raw<V>(x + e);
    if (residual) r[slot] = load_raw<V>(residual + e);
  }
  __device__ void terms(int slot, float (&a)[V], float (&b)[V]) const {
    float xf[V];
    bn_act_grad(d[slot], xv[slot], residual != nullptr, r[slot], k, act, xf, a);
#pragma unroll
    for (int j = 0; j < V; ++j) b[j] = a[j] * (xf[j] - k.mean[j]) * k.invstd[j];
  }
};

// ---- batch norm ------------------------------------------------------------------------------

// The finalize kernels sum the reduction's per-block partials for FINALIZE_CHANNELS channels per
// block: FINALIZE_SLICES rows of threads each add every FINALIZE_SLICES-th partial in double, then
// one row adds the slices in a fixed order (deterministic). One thread per channel walking all
// partials in sequence took tens of microseconds per call, a large share of a batch norm at batch
// 256, since 42 such calls run per training step of a 10-block network; each thread's loads are
// issued FINALIZE_UNROLL at a time, since a loop waiting out one L2 round trip per partial made
// the call 4-6 us (ncu).
constexpr int FINALIZE_CHANNELS = 32, FINALIZE_SLICES = 32, FINALIZE_UNROLL = 8;

// Channel `c`'s two sums over the `blocks` partials; true in the one thread per channel that holds
// the result.
__device__ bool sum_partials(const float* partial, int blocks, int channels, int& c, double& a, double& b) {
  __shared__ double slices[2][FINALIZE_SLICES][FINALIZE_CHANNELS];
  const int lc = threadIdx.x % FINALIZE_CHANNELS, slice = threadIdx.x / FINALIZE_CHANNELS;
  c = blockIdx.x * FINALIZE_CHANNELS + lc;
  a = b = 0;
  if (c < channels)
    for (int k0 = slice; k0 < blocks; k0 += FINALIZE_SLICES * FINALIZE_UNROLL) {
      float pa[FINALIZE_UNROLL], pb[FINALIZE_UNROLL];
#pragma unroll
      for (int u = 0; u < FINALIZE_UNROLL; ++u) {
        const int k = k0 + u * FINALIZE_SLICES;
        pa[u] = k < blocks ? partial[(2 * k) * channels + c] : 0.0f;
        pb[u] = k < blocks ? partial[(2 * k + 1) * channels + c] : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < FINALIZE_UNROLL; ++u) a += pa[u], b += pb[u];
    }
  slices[0][slice][lc] = a;
  slices[1][slice][lc] = b;
  __syncthreads();
  if (slice != 0 || c >= channels) return false;
  a = b = 0;
  for (int k = 0; k < FINALIZE_SLICES; ++k) a += slices[0][k][lc], b += slices[1][k][lc];
  return true;
}

void launch_finalize(auto kernel, int channels, cudaStream_t stream, auto... args) {
  kernel<<<(channels + FINALIZE_CHANNELS - 1) / FINALIZE_CHANNELS, FINALIZE_CHANNELS * FINALIZE_SLICES, 0, stream>>>(
      args...);
  JIRIKI_CUDA_CHECK_LAUNCH();
}

__global__ void bn_train_finalize_kernel(const float* partial, int blocks, int channels, double count,
                                         const float* gamma, const float* beta, float* running_mean, float* running_var,
                                         float eps, const StepParams* params, float* saved) {
  int c;
  double s, ss;
  if (!sum_partials(partial, blocks, channels, c, s, ss)) return;
  const double mean = s / count, var = fmax(ss / count - mean * mean, 0.0);
  const float m = float(mean), invstd = float(1.0 / sqrt(var + double(eps)));
  const float scale = invstd * gamma[c];
  saved[c] = m;
  saved[channels + c] = invstd;
  saved[2 * channels + c] = scale;
  saved[3 * channels + c] = beta[c] - m * scale;
  const double momentum = params->bn_momentum;
  running_mean[c] = float((1.0 - momentum) * running_mean[c] + momentum * mean);
  running_var[c] = float((1.0 - momentum) * running_var[c] + momentum * var * (count > 1 ? count / (count - 1) : 1.0));
}

__global__ void bn_eval_kernel(int channels, const float* gamma, const float* beta, const float* running_mean,
                               const float* running_var, float eps, float* saved) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  const float invstd = float(1.0 / sqrt(double(running_var[c]) + double(eps)));
  const float scale = invstd * gamma[c];
  saved[c] = running_mean[c];
  saved[channels + c] = invstd;
  saved[2 * channels + c] = scale;
  saved[3 * channels + c] = beta[c] - running_mean[c] * scale;
}

template <int V>
__global__ void __launch_bounds__(THREADS, 4)
    bn_act_forward_kernel(const bf16* x, const float* saved, const bf16* residual, bf16* out, int64_t rows,
                          int channels, Activation act) {
  const int groups = channels / V, lanes = blockDim.x / groups;
  const int g = threadIdx.x % groups, lane = threadIdx.x / groups;
  BnConstants<V> k;
  k.load(saved, channels, g * V);
  const int64_t stride = int64_t(gridDim.x) * lanes;
  for (int64_t row = int64_t(blockIdx.x) * lanes + lane; row < rows; row += 2 * stride) {
    const int64_t e[2] = {row * channels + g * V, (row + stride) * channels + g * V};
    const int n = row + stride < rows ? 2 : 1;
    Raw<V> xr[2], rr[2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
      if (i < n) {
        xr[i] = load_raw<V>(x + e[i]);
        if (residual) rr[i] = load_raw<V>(residual + e[i]);
      }
#pragma unroll
    for (int i = 0; i < 2; ++i)
      if (i < n) {
        float v[V], r[V] = {};
        unpack(xr[i], v);
        if (residual) unpack(rr[i], r);
#pragma unroll
        for (int j = 0; j < V; ++j) v[j] = activate(pre_activation(v[j], k.scale[j], k.shift[j], r[j]), act);
        store<V>(out + e[i], v);
      }
  }
}

// Parameter gradients and the coefficients of the input gradient, coeff = [3][channels] of
//   gain = gamma invstd,  p = -gain invstd mean(dz xhat),  q = gain (mean invstd mean(dz xhat) - mean(dz)),
// so that dx = gain (dz - mean(dz) - xhat mean(dz xhat)) = gain dz + p x + q: five constants per
// channel in the apply kernel instead of seven.
__global__ void bn_backward_finalize_kernel(const float* partial, int blocks, int channels, double count,
                                            const float* saved, const float* gamma, float* dgamma, float* dbeta,
                                            float* coeff) {
  int c;
  double s, sx;
  if (!sum_partials(partial, blocks, channels, c, s, sx)) return;
  dbeta[c] = float(s);
  dgamma[c] = float(sx);
  const double mean = saved[c], invstd = saved[channels + c], gain = double(gamma[c]) * invstd;
  const double mean_dz = s / count, mean_dz_xhat = sx / count;
  coeff[c] = float(gain);
  coeff[channels + c] = float(-gain * invstd * mean_dz_xhat);
  coeff[2 * channels + c] = float(gain * (mean * invstd * mean_dz_xhat - mean_dz));
}

template <int V>
__global__ void bn_act_backward_kernel(const bf16* dy, const bf16* x, const bf16* residual, const float* saved,
                                       const float* coeff, bf16* dx, bf16* dresidual, int64_t rows, int channels,
                                       Activation act) {
  const int groups = channels / V, lanes = blockDim.x / groups;
  const int g = threadIdx.x % groups, lane = threadIdx.x / groups, c0 = g * V;
  BnConstants<V> k;
  k.load(saved, channels, c0);
  float gain[V], p[V], q[V];
  load_floats<V>(coeff + c0, gain);
  load_floats<V>(coeff + channels + c0, p);
  load_floats<V>(coeff + 2 * channels + c0, q);
  const int64_t stride = int64_t(gridDim.x) * lanes;
  for (int64_t row = int64_t(blockIdx.x) * lanes + lane; row < rows; row += 2 * stride) {
    const int64_t e[2] = {row * channels + c0, (row + stride) * channels + c0};
    const int n = row + stride < rows ? 2 : 1;
    Raw<V> dr[2], xr[2], rr[2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
      if (i < n) {
        dr[i] = load_raw<V>(dy + e[i]);
        xr[i] = load_raw<V>(x + e[i]);
        if (residual) rr[i] = load_raw<V>(residual + e[i]);
      }
#pragma unroll
    for (int i = 0; i < 2; ++i)
      if (i < n) {
        float xv[V], dz[V], out[V];
        bn_act_grad(dr[i], xr[i], residual != nullptr, rr[i], k, act, xv, dz);
#pragma unroll
        for (int j = 0; j < V; ++j) out[j] = fmaf(gain[j], dz[j], fmaf(p[j], xv[j], q[j]));
        store<V>(dx + e[i], out);
        if (dresidual) store<V>(dresidual + e[i], dz);
      }
  }
}

// ---- heads and loss ------------------------------------------------------------------------------

// One block per position; the 81 x 54 head outputs are staged in shared memory so that the policy,
// written label-major, is read without strided global loads.
__global__ void heads_split_kernel(const float* heads, const float* policy_bias, float* policy, bf16* value_conv) {
  __shared__ float tile[SQUARES * HEAD_OUTPUTS];
  const float* in = heads + int64_t(blockIdx.x) * SQUARES * HEAD_OUTPUTS;
  for (int i = threadIdx.x; i < SQUARES * HEAD_OUTPUTS; i += blockDim.x) tile[i] = in[i];
  __syncthreads();
  float* p = policy + int64_t(blockIdx.x) * POLICY_SIZE;
  for (int i = threadIdx.x; i < POLICY_SIZE; i += blockDim.x) {
    const int label = i / SQUARES, sq = i % SQUARES;
    p[i] = tile[sq * HEAD_OUTPUTS + label] + policy_bias[i];
  }
  bf16* v = value_conv + int64_t(blockIdx.x) * SQUARES * VALUE_CHANNELS;
  for (int i = threadIdx.x; i < SQUARES * VALUE_CHANNELS; i += blockDim.x) {
    const int sq = i / VALUE_CHANNELS, c = i % VALUE_CHANNELS;
    v[i] = __float2bfloat16_rn(tile[sq * HEAD_OUTPUTS + POLICY_LABELS + c]);
  }
}

// One warp per position.
__global__ void value_forward_kernel(const float* fc1, const float* fc1_bias, const float* fc2_weight,
                                     const float* fc2_bias, Activation act, float* value_logit, int n) {
  const int pos = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (pos >= n) return;
  const float* h = fc1 + int64_t(pos) * VALUE_HIDDEN;
  float sum = 0.0f;
  for (int j = lane; j < VALUE_HIDDEN; j += 32) sum += fc2_weight[j] * activate(h[j] + fc1_bias[j], act);
  for (int o = 16; o > 0; o /= 2) sum += __shfl_down_sync(0xffffffffu, sum, o);
  if (lane == 0) value_logit[pos] = sum + fc2_bias[0];
}

// Binary cross-entropy of sigmoid(y) against t without overflow: max(y, 0) - y t + log(1 + e^-|y|).
__device__ float bce_with_logit(float y, float t) { return fmaxf(y, 0.0f) - y * t + log1pf(expf(-fabsf(y))); }

// One block per position.
__global__ void loss_kernel(const float* policy, const float* value_logit, const float* policy_target,
                            const float* value_result, const float* value_eval, const StepParams* params,
                            float* dpolicy, bf16* dpolicy_nhwc, float* dvalue, float* records) {
  const int n = blockIdx.x;
  const float* z = policy + int64_t(n) * POLICY_SIZE;
  const float* t = policy_target + int64_t(n) * POLICY_SIZE;
  float zmax = -FLT_MAX, tmax = -FLT_MAX;
  int zi = INT_MAX, ti = INT_MAX;
  for (int k = threadIdx.x; k < POLICY_SIZE; k += blockDim.x) {  // k rises: each thread keeps its first maximum
    if (z[k] > zmax) zmax = z[k], zi = k;
    if (t[k] > tmax) tmax = t[k], ti = k;
  }
  block_argmax(zmax, zi);
  block_argmax(tmax, ti);
  float sum = 0.0f;
  for (int k = threadIdx.x; k < POLICY_SIZE; k += blockDim.x) sum += expf(z[k] - zmax);
  const float lse = zmax + logf(block_sum(sum));  // log sum exp z
  float ce = 0.0f;
  const float scale = params->grad_scale;
  for (int k = threadIdx.x; k < POLICY_SIZE; k += blockDim.x) {
    if (t[k] != 0.0f) ce -= t[k] * (z[k] - lse);
    if (dpolicy) {
      const float g = scale * (expf(z[k] - lse) - t[k]);
      dpolicy[int64_t(n) * POLICY_SIZE + k] = g;
      const int label = k / SQUARES, sq = k % SQUARES;
      dpolicy_nhwc[(int64_t(n) * SQUARES + sq) * POLICY_LABELS + label] = __float2bfloat16_rn(g);
    }
  }
  ce = block_sum(ce);
  if (threadIdx.x == 0) {
    const float y = value_logit[n], r = value_result[n], e = value_eval[n];
    if (dvalue) {
      const float target = (1.0f - params->val_lambda) * r + params->val_lambda * e;
      dvalue[n] = scale * (1.0f / (1.0f + expf(-y)) - target);
    }
    float* rec = records + int64_t(n) * LOSS_RECORD;
    rec[0] = ce;
    rec[1] = bce_with_logit(y, r);
    rec[2] = bce_with_logit(y, e);
    rec[3] = zi == ti ? 1.0f : 0.0f;
    rec[4] = r != 0.5f ? 1.0f : 0.0f;
    rec[5] = r != 0.5f && (y > 0.0f) == (r > 0.5f) ? 1.0f : 0.0f;
  }
}

__global__ void value_backward_kernel(const float* fc1, const float* fc1_bias, const float* fc2_weight,
                                      const float* dvalue, Activation act, float* dfc1, bf16* dfc1_bf16,
                                      float* fc2_terms, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    const int j = int(i % VALUE_HIDDEN);
    const float dv = dvalue[i / VALUE_HIDDEN];
    const float z = fc1[i] + fc1_bias[j];
    const float g = dv * fc2_weight[j] * activate_grad(z, act);
    dfc1[i] = g;
    dfc1_bf16[i] = __float2bfloat16_rn(g);
    fc2_terms[i] = dv * activate(z, act);
  }
}

int column_chunks(int64_t rows) { return int(std::clamp<int64_t>((rows + 15) / 16, 1, MAX_COLUMN_CHUNKS)); }

__global__ void column_partial_kernel(const float* in, int64_t rows, int cols, int64_t rows_per_chunk, float* partial) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  const int64_t r0 = blockIdx.y * rows_per_chunk, r1 = min(rows, r0 + rows_per_chunk);
  float s = 0.0f;
  for (int64_t r = r0; r < r1; ++r) s += in[r * cols + c];
  partial[int64_t(blockIdx.y) * cols + c] = s;
}

__global__ void column_finalize_kernel(const float* partial, int chunks, int cols, float* out) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  double s = 0;
  for (int k = 0; k < chunks; ++k) s += partial[int64_t(k) * cols + c];
  out[c] = float(s);
}

// ---- gradients and optimizer ---------------------------------------------------------------

__global__ void bf16_to_f32_kernel(const bf16* in, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __bfloat162float(in[i]);
}

__global__ void f32_to_bf16_kernel(const float* in, bf16* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16_rn(in[i]);
}

__global__ void squares_partial_kernel(const float* g, int64_t n, double* partial) {
  float s = 0.0f;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    s += g[i] * g[i];
  const double total = block_sum(double(s));
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

__global__ void squares_finalize_kernel(const double* partial, int blocks, float* norm) {
  double s = 0;
  for (int b = threadIdx.x; b < blocks; b += blockDim.x) s += partial[b];
  s = block_sum(s);
  if (threadIdx.x == 0) norm[0] = float(sqrt(s));
}

__device__ __forceinline__ float clip_scale(const StepParams* p, const float* norm) {
  return p->clip > 0.0f && norm[0] > p->clip ? p->clip / norm[0] : 1.0f;
}

__global__ void sgd_kernel(float* w, const float* g, float* buf, bf16* w_bf16, int64_t n, float weight_decay,
                           float momentum, bool nesterov, const StepParams* params, const float* norm) {
  const float lr = params->lr, s = clip_scale(params, norm);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float gi = g[i] * s + weight_decay * w[i];
    const float m = momentum * buf[i] + gi;
    buf[i] = m;
    const float wi = w[i] - lr * (nesterov ? gi + momentum * m : m);
    w[i] = wi;
    if (w_bf16) w_bf16[i] = __float2bfloat16_rn(wi);
  }
}

// The (1 - beta)s come computed in double: 1 - 0.999f is 1.3e-5 away from 0.001 relative, which the
// second moment would carry.
__global__ void adamw_kernel(float* w, const float* g, float* m, float* v, bf16* w_bf16, int64_t n, float weight_decay,
                             float beta1, float one_minus_beta1, float beta2, float one_minus_beta2, float eps,
                             const StepParams* params, const float* norm) {
  const float lr = params->lr, s = clip_scale(params, norm);
  const float bc1 = params->bias_correction1, bc2 = params->bias_correction2;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float gi = g[i] * s;
    const float mi = beta1 * m[i] + one_minus_beta1 * gi;
    const float vi = beta2 * v[i] + one_minus_beta2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float wi = w[i] * (1.0f - lr * weight_decay) - lr * (mi / bc1) / (sqrtf(vi / bc2) + eps);
    w[i] = wi;
    if (w_bf16) w_bf16[i] = __float2bfloat16_rn(wi);
  }
}

}  // namespace

size_t channel_sums_scratch(int channels) { return size_t(MAX_REDUCE_BLOCKS) * 2 * channels; }
size_t column_sums_scratch(int cols) { return size_t(MAX_COLUMN_CHUNKS) * cols; }

// Blocks of `kernel` (with `threads` threads) that the current GPU holds at once.
int resident_blocks(const void* kernel, int threads) {
  int device = 0, sms = 0, per_sm = 0;
  JIRIKI_CUDA_CHECK(cudaGetDevice(&device));
  JIRIKI_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  JIRIKI_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
  return sms * std::max(1, per_sm);
}

// Blocks for a batch-norm apply kernel over `rows` rows: one wave at most (see the thread layout).
int apply_blocks(const void* kernel, int64_t rows, const ReduceShape& s) {
  return int(std::clamp<int64_t>((rows + s.lanes - 1) / s.lanes, 1, resident_blocks(kernel, s.groups * s.lanes)));
}

void launch_fill_random(uint16_t* x, int64_t n, uint32_t seed, cudaStream_t stream) {
  fill_random_kernel<<<grid_for(n), THREADS, 0, stream>>>(as_bf16(x), n, seed);
  JIRIKI_CUDA_CHECK_LAUNCH();
}

void launch_bn_train_statistics(const uint16_t* x, int64_t rows, int channels, const float* gamma, const float* beta,
                                float* running_mean, float* running_var, float eps, const StepParams* params,
                                float* saved, float* scratch, cudaStream_t stream) {
  const ReduceShape s = reduce_shape(rows, channels);
  launch_channel_sums(MomentTerm<8>{as_bf16(x)}, MomentTerm<1>{as_bf16(x)}, rows, channels, scratch, stream, s);
  launch_finalize(bn_train_finalize_kernel, channels, stream, (const float*)scratch, s.blocks, channels, double(rows),
                  gamma, beta, running_mean, running_var, eps, params, saved);
}

void launch_bn_eval_statistics(int channels, const float* gamma, const float* beta, const float* running_mean,
                               const float* running_var, float eps, float* saved, cudaStream_t stream) {
  bn_eval_kernel<<<(channels + 127) / 128, 128, 0, stream>>>(channels, gamma, beta, running_mean, running_var, eps,
                                                             saved);
  JIRIKI_CUDA_CHECK_LAUNCH();
}

void launch_bn_act_forward(const uint16_t* x, const float* saved, const uint16_t* residual, uint16_t* out, int64_t rows,
                           int channels, Activation act, cudaStream_t stream) {
  const ReduceShape s = reduce_shape(rows, channels, {saved});
  const int threads = s.groups * s.lanes;
  if (s.vector == 8)
    bn_act_forward_kernel<8><<<apply_blocks((const void*)bn_act_forward_kernel<8>, rows, s), threads, 0, stream>>>(
        as_bf16(x), saved, as_bf16(residual), as_bf16(out), rows, channels, act);
  else
    bn_act_forward_kernel<1><<<apply_blocks((const void*)bn_act_forward_kernel<1>, rows, s), threads, 0, stream>>>(
        as_bf16(x), saved, as_bf16(residual), as_bf16(out), rows, channels, act);
  JIRIKI_CUDA_CHECK_LAUNCH();
}

void launch_bn_act_backward(const uint16_t* dy, const uint16_t* x, const uint16_t* residual, const float* saved,
                            const float* gamma, float* dgamma, float* dbeta, uint16_t* dx, uint16_t* dresidual,
                            int64_t rows, int channels, Activation act, float* scratch, cudaStream_t stream) {
  const ReduceShape s = reduce_shape(rows, channels, {saved, scratch + channel_sums_scratch(channels)});
  const bf16 *d = as_bf16(dy), *xv = as_bf16(x), *r = as_bf16(residual);
  launch_channel_sums(BackwardTerm<8>{d, xv, r, saved, channels, act}, BackwardTerm<1>{d, xv, r, saved, channels, act},
                      rows, channels, scratch, stream, s);
  float* coeff = scratch + channel_sums_scratch(channels);
  launch_finalize(bn_backward_finalize_kernel, channels, stream, (const float*)scratch, s.blocks, channels,
                  double(rows), saved, gamma, dgamma, dbeta, coeff);
  const int threads = s.groups * s.lanes;
  if (s.vector == 8)
    bn_act_backward_kernel<8><<<apply_blocks((const void*)bn_act_backward_kernel<8>, rows, s), threads, 0, stream>>>(
        d, xv, r, saved, coeff, as_bf16(dx), as_bf16(dresidual), rows, channels, act);
  else
    bn_act_backward_kernel<1><<<apply_blocks((const void*)bn_act_backward_kernel<1>, rows, s), threads, 0, stream>>>(
        d, xv, r, saved, coeff, as_bf16(dx), as_bf16(dresidual), rows, channels, act);
  JIRIKI_CUDA_CHECK_LAUNCH();
}

void launch_heads_split(const float* heads, const float* policy_bias, float* policy, uint16_t* value_conv, int n,
                        cudaStream_t stream) {
  heads_split_kernel<<<n, THREADS, 0, stream>>>(heads, policy_bias, policy, as_bf16(value_conv));
  JIRIKI_CUDA_CHECK_LAUNCH();
}

void launch_value_forward(const float* fc1, const float* fc1_bias, const float* fc2_weight, const float* fc2_bias,
                          Activation act, float* value_logit, int n, cudaStream_t stream) {
  constexpr int WARPS = 8;
  value_forward_kernel<<<(n + WARPS - 1) / WARPS, WARPS * 32, 0, stream>>>(fc1, fc1_bias, fc2_weight, fc2_bias, act,
                                                                           value_logit, n);
  JIRIKI_CUDA_CHECK_LAUNCH();
}

void launch_loss(const float* policy, const float* value_logit, const float* policy_target, const float* value_result,
                 const float* value_eval, const StepParams* params, float* dpolicy, uint16_t* dpolicy_nhwc,
                 float* dvalue, float* records, int n, cudaStream_t stream) {
  loss_kernel<<<n, THREADS, 0, stream>>>(policy, value_logit, policy_target, value_result, value_eval, params, dpolicy,
                                         as_bf16(dpolicy_nhwc), dvalue, records);
  JIRIKI_CUDA_CHECK_LAUNCH();
}

void launch_value_backward(const float* fc1, const float* fc1_bias, const float* fc2_weight, const float* dvalue,
                           Activation act, float* dfc1, uint16_t* dfc1_bf16, float* fc2_terms, int n,
                           cudaStream_t stream) {
  const int64_t count = int64_t(n) * VALUE_HIDDEN;
  value_backward_kernel<<<grid_for(count), THREADS, 0, stream>>>(fc1, fc1_bias, fc2_weight, dvalue, act, dfc1,
                                                                 as_bf16(dfc1_bf16), fc2_terms, count);
  JIRIKI_CUDA_CHECK_LAUNCH();
}

void launch_column_sums(const float* in, int64_t rows, int cols, float* out, float* scratch, cudaStream_t stream) {
  const int chunks = column_chunks(rows);
  const int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  column_partial_kernel<<<dim3((cols + 127) / 128, chunks), 128, 0, stream>>>(in, rows, cols, rows_per_chunk, scratch);
  JIRIKI_CUDA_CHECK_LAUNCH();
  column_finalize_kernel<<<(cols + 127) / 128, 128, 0, stream>>>(scratch, chunks, cols, out);
  JIRIKI_CUDA_CHECK_LAUNCH();
}

void launch_bf16_to_f32(const uint16_t* in, float* out, int64_t n, cudaStream_t stream) {
  bf16_to_f32_kernel<<<grid_for(n), THREADS, 0, stream>>>(as_bf16(in), out, n);
  JIRIKI_CUDA_CHECK_LAUNCH();
}

void launch_f32_to_bf16(const float* in, uint16_t* out, int64_t n, cudaStream_t stream) {
  f32_to_bf16_kernel<<<grid_for(n), THREADS, 0, stream>>>(in, as_bf16(out), n);
  JIRIKI_CUDA_CHECK_LAUNCH();
}

void launch_norm(const float* g, int64_t n, float* norm, double* scratch, cudaStream_t stream) {
  squares_partial_kernel<<<NORM_BLOCKS, THREADS, 0, stream>>>(g, n, scratch);
  JIRIKI_CUDA_CHECK_LAUNCH();
  squares_finalize_kernel<<<1, THREADS, 0, stream>>>(scratch, NORM_BLOCKS, norm);
  JIRIKI_CUDA_CHECK_LAUNCH();
}

void launch_sgd(float* w, const float* g, float* momentum_buf, uint16_t* w_bf16, int64_t n, float weight_decay,
                float momentum, bool nesterov, const StepParams* params, const float* norm, cudaStream_t stream) {
  if (n == 0) return;
  sgd_kernel<<<grid_for(n), THREADS, 0, stream>>>(w, g, momentum_buf, as_bf16(w_bf16), n, weight_decay, momentum,
                                                  nesterov, params, norm);
  JIRIKI_CUDA_CHECK_LAUNCH();
}

void launch_adamw(float* w, const float* g, float* m, float* v, uint16_t* w_bf16, int64_t n, float weight_decay,
                  double beta1, double beta2, float eps, const StepParams* params, const float* norm,
                  cudaStream_t stream) {
  if (n == 0) return;
  adamw_kernel<<<grid_for(n), THREADS, 0, stream>>>(w, g, m, v, as_bf16(w_bf16), n, weight_decay, float(beta1),
                                                    float(1.0 - beta1), float(beta2), float(1.0 - beta2), eps, params,
                                                    norm);
  JIRIKI_CUDA_CHECK_LAUNCH();
}

}  // namespace jiriki::training::cuda
