// The body of the simd backend's kernels, written once over a vector type and included by
// nn/cpu_kernels.cpp inside one namespace per instruction set (no include guard, no includes: it is
// compiled with that namespace's target options). Before including it, the namespace defines:
//   W, NV_MAX   floats a vector; vectors of output channels a register tile covers (block = W * NV_MAX)
//   F           the vector type, and vzero, vset1, vload, vstore, vadd, vsub, vmul, vdiv, vmax, vmin,
//               vfma(a, b, c) = a * b + c, vround (to nearest), vpow2i (2^n for an integral n)
//   JIRIKI_KERNELS_BF16 (defined as 1 or 0): this set has the bf16 convolution, with store_bf16(p, x)
//               and vdot_bf16(acc, w, pair) = acc + the products of the bf16 pairs of w and `pair`.
//   JIRIKI_KERNELS_INT8 (defined as 1 or 0): this set is an int8 convolution alone, with the int32
//               vector I and izero, iload, vdot_u8s8(acc, w, quad) = acc + the sums of the products
//               of four u8 in `quad` with four s8 of w, vcvt (int32 to float), vload_u8 (W u8 as
//               floats), store_u8 (W floats rounded and saturated to u8).
//
// A convolution's work item is one row of the board, one position and one block of output channels:
// two register tiles of 5 and 4 squares by NV vectors of output channels; the taps that would read the
// zero border (the first and last rows' outer rows, the edge squares' outer columns) are skipped. For each tap and
// input channel a tile loads NV weight vectors and, for each of its squares, broadcasts one input value and does NV
// fused multiply-adds: 5 * NV multiply-adds for NV + 5 loads.

constexpr int BLOCK = W * NV_MAX;
constexpr int TILE_A = 5, TILE_B = 4;  // a row of 9 squares as two tiles

// exp(x) for the swish: x = n ln 2 + r, |r| <= ln 2 / 2, e^r by its Taylor polynomial of degree 7
// (Cephes' expf coefficients); relative error about 1e-7 over [-87, 87], where x is clamped.
static inline F vexp(F x) {
  x = vmin(vmax(x, vset1(-87.0f)), vset1(87.0f));
  const F n = vround(vmul(x, vset1(1.44269504088896341f)));
  F r = vfma(n, vset1(-0.693359375f), x);
  r = vfma(n, vset1(2.12194440e-4f), r);
  F p = vset1(1.9875691500e-4f);
  p = vfma(p, r, vset1(1.3981999507e-3f));
  p = vfma(p, r, vset1(8.3334519073e-3f));
  p = vfma(p, r, vset1(4.1665795894e-2f));
  p = vfma(p, r, vset1(1.6666665459e-1f));
  p = vfma(p, r, vset1(5.0000001201e-1f));
  p = vfma(p, vmul(r, r), vadd(r, vset1(1.0f)));
  return vmul(p, vpow2i(n));
}

static inline F activate(F x, Act act) {
  if (act == Act::RELU) return vmax(x, vzero());
  if (act == Act::SWISH) return vdiv(x, vadd(vset1(1.0f), vexp(vsub(vzero(), x))));
  return x;
}

#if JIRIKI_KERNELS_INT8
using Acc = I;  // a vector of accumulators
static inline Acc acc_zero() { return izero(); }
#else
using Acc = F;
static inline Acc acc_zero() { return vzero(); }
#endif

// Adds the bias and the residual, applies the activation and writes the R x NV tile whose first
// square is `out_sq` (a padded-board index counted from position 0) and first channel co0; in int8
// the sums are scaled first and the residual and the output may be u8.
template <int R, int NV>
static inline void store_tile(const ConvArgs& a, Acc (&acc)[R][NV], int64_t out_sq, int co0) {
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      const int64_t o = (out_sq + r) * a.out_stride + co0 + v * W;
#if JIRIKI_KERNELS_INT8
      F x = vmul(vadd(vcvt(acc[r][v]), vload(a.bias + co0 + v * W)), vload(a.scale + co0 + v * W));
      if (a.residual_u8) x = vfma(vload_u8(a.residual_u8 + o), vset1(a.residual_scale), x);
#else
      F x = vadd(acc[r][v], vload(a.bias + co0 + v * W));
      if (a.residual) x = vadd(x, vload(a.residual + o));
#endif
      x = activate(x, a.act);
      if (a.out) vstore(a.out + o, x);
#if JIRIKI_KERNELS_INT8
      if (a.out_u8) store_u8(a.out_u8 + o, x);
#elif JIRIKI_KERNELS_BF16
      if (a.out_bf16) store_bf16(a.out_bf16 + o, x);
#endif
    }
}

#if JIRIKI_KERNELS_INT8 || JIRIKI_KERNELS_BF16
#if JIRIKI_KERNELS_INT8
using Value = uint8_t;  // the inputs of this set's convolution: u8, and its weights s8
constexpr int CI_STEP = 4;
using Weights = I;
static inline Weights load_weights(const Value* w) { return iload(w); }
static inline Acc vdot(Acc acc, Weights w, int32_t group) { return vdot_u8s8(acc, w, group); }
#else
using Value = uint16_t;  // the inputs of this set's convolution: bf16
constexpr int CI_STEP = 2;
using Weights = F;
static inline Weights load_weights(const Value* w) { return vload(reinterpret_cast<const float*>(w)); }
static inline Acc vdot(Acc acc, Weights w, int32_t group) { return vdot_bf16(acc, w, group); }
#endif
// acc += the products of one 32-bit group of CI_STEP input channels per square (a bf16 pair, four
// u8) with their weights.
template <int R, int NV, int RB, int RE>
static inline void accumulate_step(Acc (&acc)[R][NV], const Value* x, int64_t stride, const Value* w) {
  Weights wv[NV];
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) wv[v] = load_weights(w + CI_STEP * W * v);
#pragma GCC unroll 8
  for (int r = RB; r < RE; ++r) {
    int32_t group;
    __builtin_memcpy(&group, x + r * stride, sizeof group);
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = vdot(acc[r][v], wv[v], group);
  }
}
#else
using Value = float;
constexpr int CI_STEP = 1;
// acc += one input channel per square times its weights.
template <int R, int NV, int RB, int RE>
static inline void accumulate_step(Acc (&acc)[R][NV], const Value* x, int64_t stride, const Value* w) {
  F wv[NV];
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) wv[v] = vload(w + W * v);
#pragma GCC unroll 8
  for (int r = RB; r < RE; ++r) {
    const F b = vset1(x[r * stride]);
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = vfma(wv[v], b, acc[r][v]);
  }
}
#endif

// The squares [RB, RE) of a tile for one tap: every input channel.
template <int R, int NV, int RB, int RE>
static inline void accumulate_tap(Acc (&acc)[R][NV], const Value* x, int64_t stride, int cin, const Value* w) {
  for (int ci = 0; ci < cin; ci += CI_STEP) accumulate_step<R, NV, RB, RE>(acc, x + ci, stride, w + ci * NV * W);
}

// One register tile: R squares of a row from the padded-board index `in_sq` (the top-left of the
// first square's window) by NV vectors of output channels; weights `w` are this block's
// [tap][ci / CI_STEP][NV * W][CI_STEP]. Taps [t0, t1) only, and the tile's first square skips the
// left column of taps when it is on the board's left edge (LEFT), its last square the right column
// on the right edge (RIGHT): those read the zero border.
template <int R, int NV, bool LEFT, bool RIGHT>
static inline void conv_tile(const ConvArgs& a, const Value* in, int64_t in_sq, const int* tap_offset, int t0, int t1,
                             const Value* w, int64_t out_sq, int co0) {
  Acc acc[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = acc_zero();
  const int64_t stride = a.in_stride;
  const int64_t tap_weights = int64_t(a.cin) * NV * W;
  for (int t = t0; t < t1; ++t) {
    const Value* x = in + in_sq * stride + tap_offset[t];
    const Value* wt = w + t * tap_weights;
    const int kw = a.taps == 9 ? t % 3 : 1;
    if (LEFT && kw == 0) accumulate_tap<R, NV, 1, R>(acc, x, stride, a.cin, wt);
    else if (RIGHT && kw == 2) accumulate_tap<R, NV, 0, R - 1>(acc, x, stride, a.cin, wt);
    else accumulate_tap<R, NV, 0, R>(acc, x, stride, a.cin, wt);
  }
  store_tile<R, NV>(a, acc, out_sq, co0);
}

// A row of a position for one block of output channels, as two tiles.
template <int NV>
static void conv_row(const ConvArgs& a, const Value* in, const int* tap_offset, const Value* w, int pos, int row,
                     int co0) {
  // The 3x3 window of output square (row, w) starts at padded square (row, w); a 1x1 reads
  // (row + 1, w + 1), which tap_offset adds.
  const int64_t base = int64_t(pos) * PADDED_SQUARES + row * PADDED_BOARD;
  const int64_t out = int64_t(pos) * PADDED_SQUARES + (row + 1) * PADDED_BOARD + 1;
  // The first row's window starts on the border row, the last row's ends on it: 3 taps skipped.
  const int t0 = a.taps == 9 && row == 0 ? 3 : 0, t1 = a.taps == 9 && row == 8 ? 6 : a.taps;
  conv_tile<TILE_A, NV, true, false>(a, in, base, tap_offset, t0, t1, w, out, co0);
  conv_tile<TILE_B, NV, false, true>(a, in, base + TILE_A, tap_offset, t0, t1, w, out + TILE_A, co0);
}

template <int NV = NV_MAX>
static void conv_row_nv(int nv, const ConvArgs& a, const Value* in, const int* tap_offset, const Value* w, int pos,
                        int row, int co0) {
  if constexpr (NV > 1)
    if (nv != NV) return conv_row_nv<NV - 1>(nv, a, in, tap_offset, w, pos, row, co0);
  conv_row<NV>(a, in, tap_offset, w, pos, row, co0);
}

// Work items in the order position, block of output channels, row (KernelSet::conv_items).
static void convolve(const ConvArgs& a, int n, int64_t begin, int64_t end) {
  (void)n;
  const Value* in = static_cast<const Value*>(a.in);
  const Value* weight = static_cast<const Value*>(a.weight);
  int tap_offset[9];
  for (int t = 0; t < 9; ++t)
    tap_offset[t] = a.taps == 9 ? (t / 3 * PADDED_BOARD + t % 3) * a.in_stride : (PADDED_BOARD + 1) * a.in_stride;
  const int blocks = (a.cout + BLOCK - 1) / BLOCK;
  for (int64_t item = begin; item < end; ++item) {
    const int pos = int(item / (9 * blocks)), block = int(item / 9 % blocks), row = int(item % 9);
    const int co0 = block * BLOCK;
    const int nv = (a.cout - co0 < BLOCK ? a.cout - co0 : BLOCK) / W;
    // Blocks before this one are full: co0 output channels of taps * cin weights each.
    conv_row_nv(nv, a, in, tap_offset, weight + int64_t(co0) * a.taps * a.cin, pos, row, co0);
  }
}

#if !JIRIKI_KERNELS_BF16 && !JIRIKI_KERNELS_INT8
// P positions by NV_MAX vectors of outputs; every weight vector loaded serves P positions.
template <int P>
static void dense_tile(const DenseArgs& a, int b0, int o0) {
  F acc[P][NV_MAX];
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p)
#pragma GCC unroll 8
    for (int v = 0; v < NV_MAX; ++v) acc[p][v] = vzero();
  const float* x = a.x + int64_t(b0) * a.x_stride;
  for (int i = 0; i < a.in; ++i) {
    F wv[NV_MAX];
    const float* wi = a.wt + int64_t(i) * a.out + o0;
#pragma GCC unroll 8
    for (int v = 0; v < NV_MAX; ++v) wv[v] = vload(wi + v * W);
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) {
      const F b = vset1(x[int64_t(p) * a.x_stride + i]);
#pragma GCC unroll 8
      for (int v = 0; v < NV_MAX; ++v) acc[p][v] = vfma(wv[v], b, acc[p][v]);
    }
  }
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p)
#pragma GCC unroll 8
    for (int v = 0; v < NV_MAX; ++v) {
      const F y = activate(vadd(acc[p][v], vload(a.bias + o0 + v * W)), a.act);
      vstore(a.y + int64_t(b0 + p) * a.out + o0 + v * W, y);
    }
}

constexpr int DENSE_POSITIONS = 4;  // positions a dense tile covers

// Work items: blocks of BLOCK outputs (a.out a multiple of it) by groups of DENSE_POSITIONS
// positions, the groups inner, so that a block's weights are read from memory once and then from cache.
static void dense(const DenseArgs& a, int n, int64_t begin, int64_t end) {
  const int groups = (n + DENSE_POSITIONS - 1) / DENSE_POSITIONS;
  for (int64_t item = begin; item < end; ++item) {
    const int b0 = int(item % groups) * DENSE_POSITIONS, o0 = int(item / groups) * BLOCK;
    switch (n - b0 < DENSE_POSITIONS ? n - b0 : DENSE_POSITIONS) {
      case 1: dense_tile<1>(a, b0, o0); break;
      case 2: dense_tile<2>(a, b0, o0); break;
      case 3: dense_tile<3>(a, b0, o0); break;
      default: dense_tile<4>(a, b0, o0); break;
    }
  }
}
#endif
