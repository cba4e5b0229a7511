// Backward passes and training-mode layers (see nn/layers_backward.h).
//
// The convolutions go through the input's columns or patches (im2col): columns[j][sq] (patches
// are the same transposed, [sq][j]) holds, for output square sq, the input value that weight column
// j = (i * k + kh) * k + kw multiplies (0 off the board). The forward pass and the data gradient are
// then products of rows of 81 contiguous squares, the weight gradient a product over the squares
// with 24 weight columns of 4 rows held in registers: loops the compiler vectorises. Sums are in
// float in a fixed order; statistics (batch norm, the loss) in double.
#include "nn/layers_backward.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace jiriki::nn {

namespace {

constexpr int BOARD = 9;

// A scratch buffer per thread, reused between calls (patches of the stem are 81 x 1071 floats:
// allocating them per call would fault fresh pages in every time).
float* scratch(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

void im2col(float* patches, const float* x, int in_channels, int kernel) {
  const int pad = kernel / 2, cols = in_channels * kernel * kernel;
  for (int h = 0; h < BOARD; ++h)
    for (int w = 0; w < BOARD; ++w) {
      float* p = patches + (h * BOARD + w) * cols;
      for (int i = 0; i < in_channels; ++i)
        for (int kh = 0; kh < kernel; ++kh)
          for (int kw = 0; kw < kernel; ++kw) {
            int hh = h + kh - pad, ww = w + kw - pad;
            bool inside = hh >= 0 && hh < BOARD && ww >= 0 && ww < BOARD;
            *p++ = inside ? x[i * SQUARES + hh * BOARD + ww] : 0.0f;
          }
    }
}

// a * b + c, rounded once on a processor with FMA (every x86-64-v3 build): written out rather than
// left to the compiler, which fuses some vectorised variants of a loop and not others, so that a
// sum comes out the same in every tiling of the loops below (and so for any number of threads).
inline float mul_add(float a, float b, float c) {
#ifdef __FMA__
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

// y[0..n) += a * x[0..n)
inline void axpy(float* y, float a, const float* x, int n) {
  for (int j = 0; j < n; ++j) y[j] += a * x[j];
}

// im2col's patches transposed: columns[j][sq], so that a product runs over contiguous squares.
void im2col_columns(float* columns, const float* x, int in_channels, int kernel) {
  const int pad = kernel / 2;
  for (int i = 0; i < in_channels; ++i)
    for (int kh = 0; kh < kernel; ++kh)
      for (int kw = 0; kw < kernel; ++kw) {
        float* c = columns + ((i * kernel + kh) * kernel + kw) * SQUARES;
        for (int h = 0; h < BOARD; ++h)
          for (int w = 0; w < BOARD; ++w) {
            const int hh = h + kh - pad, ww = w + kw - pad;
            const bool inside = hh >= 0 && hh < BOARD && ww >= 0 && ww < BOARD;
            c[h * BOARD + w] = inside ? x[i * SQUARES + hh * BOARD + ww] : 0.0f;
          }
      }
}

// Rows y[r][0..81) = sum over k of a(r, k) * c[k][0..81), a(r, k) = coef[r * row_step + k * k_step],
// for R rows at once, squares [sq0, sq0 + S) held in registers through the whole sum over k. The
// sums run in the order of k whatever R and S are.
template <int R, int S>
void product_squares(float* __restrict y, const float* __restrict coef, int64_t row_step, int64_t k_step,
                     const float* __restrict c, int ks, int sq0) {
  float acc[R][S] = {};
  for (int k = 0; k < ks; ++k) {
    const float* __restrict ck = c + int64_t(k) * SQUARES + sq0;
    for (int r = 0; r < R; ++r) {
      const float a = coef[r * row_step + k * k_step];
      for (int q = 0; q < S; ++q) acc[r][q] = mul_add(a, ck[q], acc[r][q]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < S; ++q) y[r * SQUARES + sq0 + q] = acc[r][q];
}

// The 81 squares as three chunks of 24 (three vector registers a row) and one of 9.
template <int R>
void product_rows(float* y, const float* coef, int64_t row_step, int64_t k_step, const float* c, int ks) {
  static_assert(SQUARES == 3 * 24 + 9);
  for (int sq0 = 0; sq0 < 72; sq0 += 24) product_squares<R, 24>(y, coef, row_step, k_step, c, ks, sq0);
  product_squares<R, 9>(y, coef, row_step, k_step, c, ks, 72);
}

// The adjoint of im2col_columns: dx[i][square] += every column entry that was read from it.
void columns_add(float* dx, const float* columns, int in_channels, int kernel) {
  const int pad = kernel / 2;
  for (int i = 0; i < in_channels; ++i)
    for (int kh = 0; kh < kernel; ++kh)
      for (int kw = 0; kw < kernel; ++kw) {
        const float* c = columns + ((i * kernel + kh) * kernel + kw) * SQUARES;
        float* d = dx + i * SQUARES;
        for (int h = 0; h < BOARD; ++h) {
          const int hh = h + kh - pad;
          if (hh < 0 || hh >= BOARD) continue;
          for (int w = 0; w < BOARD; ++w) {
            const int ww = w + kw - pad;
            if (ww >= 0 && ww < BOARD) d[hh * BOARD + ww] += c[h * BOARD + w];
          }
        }
      }
}

// dw[r][j0 + c] += sum over squares of g[r][sq] * patches[sq][j0 + c] for R rows and J columns held in
// registers through the 81 squares (the sums run in the order of the squares). Four rows of 24
// columns fill AVX2's 16 vector registers (12 sums, 3 columns, 1 broadcast) without spilling; four
// rows of 16 spilled two sums to the stack and ran at half the speed.
template <int R, int J>
void weight_columns(float* __restrict dw, const float* __restrict g, const float* __restrict patches, int cols,
                    int j0) {
  float acc[R][J];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < J; ++c) acc[r][c] = dw[int64_t(r) * cols + j0 + c];
  for (int sq = 0; sq < SQUARES; ++sq) {
    const float* __restrict p = patches + int64_t(sq) * cols + j0;
    for (int r = 0; r < R; ++r) {
      const float gv = g[r * SQUARES + sq];
      for (int c = 0; c < J; ++c) acc[r][c] = mul_add(gv, p[c], acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < J; ++c) dw[int64_t(r) * cols + j0 + c] = acc[r][c];
}

// All columns of R rows: 24 at a time, then 8, then one (the stem's 1,071 and the heads' 64 leave
// tails).
template <int R>
void weight_rows(float* dw, const float* g, const float* patches, int cols) {
  int j0 = 0;
  for (; j0 + 24 <= cols; j0 += 24) weight_columns<R, 24>(dw, g, patches, cols, j0);
  for (; j0 + 8 <= cols; j0 += 8) weight_columns<R, 8>(dw, g, patches, cols, j0);
  for (; j0 < cols; ++j0) weight_columns<R, 1>(dw, g, patches, cols, j0);
}

}  // namespace

void conv_forward_columns(float* out, const float* in, const float* weight, int batch, int in_channels,
                          int out_channels, int kernel) {
  const int cols = in_channels * kernel * kernel;
  float* columns = kernel == 1 ? nullptr : scratch(size_t(SQUARES) * cols);
  for (int n = 0; n < batch; ++n) {
    const float* x = in + int64_t(n) * in_channels * SQUARES;
    const float* c = x;  // a 1x1 convolution's columns are the input's planes
    if (kernel != 1) im2col_columns(columns, x, in_channels, kernel), c = columns;
    float* y = out + int64_t(n) * out_channels * SQUARES;
    int o = 0;
    for (; o + 4 <= out_channels; o += 4)
      product_rows<4>(y + o * SQUARES, weight + int64_t(o) * cols, cols, 1, c, cols);
    for (; o < out_channels; ++o) product_rows<1>(y + o * SQUARES, weight + int64_t(o) * cols, cols, 1, c, cols);
  }
}

void linear_forward_lanes(float* out, const float* in, const float* weight, const float* bias, int batch,
                          int in_features, int out_features) {
  constexpr int LANES = 8;
  for (int b = 0; b < batch; ++b) {
    const float* __restrict x = in + int64_t(b) * in_features;
    for (int o = 0; o < out_features; ++o) {
      const float* __restrict w = weight + int64_t(o) * in_features;
      float lane[LANES] = {};
      int i = 0;
      for (; i + LANES <= in_features; i += LANES)
        for (int l = 0; l < LANES; ++l) lane[l] = mul_add(w[i + l], x[i + l], lane[l]);
      float tail = 0.0f;
      for (; i < in_features; ++i) tail = mul_add(w[i], x[i], tail);
      const float sum = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
      out[int64_t(b) * out_features + o] = (bias ? bias[o] : 0.0f) + (sum + tail);
    }
  }
}

void conv_backward_data(float* din, const float* dout, const float* weight, int batch, int in_channels,
                        int out_channels, int kernel) {
  // The forward product transposed: dcolumns[j][:] = sum over o of weight[o][j] * dout[o][:], then
  // each column entry back to the input square it was read from.
  const int cols = in_channels * kernel * kernel;
  float* dcolumns = scratch(size_t(SQUARES) * cols);
  for (int n = 0; n < batch; ++n) {
    const float* g = dout + int64_t(n) * out_channels * SQUARES;
    int j = 0;
    for (; j + 4 <= cols; j += 4) product_rows<4>(dcolumns + j * SQUARES, weight + j, 1, cols, g, out_channels);
    for (; j < cols; ++j) product_rows<1>(dcolumns + j * SQUARES, weight + j, 1, cols, g, out_channels);
    columns_add(din + int64_t(n) * in_channels * SQUARES, dcolumns, in_channels, kernel);
  }
}

void conv_backward_weight(float* dweight, const float* dout, const float* in, int batch, int in_channels,
                          int out_channels, int kernel, int o_begin, int o_end) {
  const int cols = in_channels * kernel * kernel;
  float* patches = scratch(size_t(SQUARES) * cols);
  for (int n = 0; n < batch; ++n) {
    im2col(patches, in + int64_t(n) * in_channels * SQUARES, in_channels, kernel);
    const float* g = dout + int64_t(n) * out_channels * SQUARES;
    int o = o_begin;
    for (; o + 4 <= o_end; o += 4) weight_rows<4>(dweight + int64_t(o) * cols, g + o * SQUARES, patches, cols);
    for (; o < o_end; ++o) weight_rows<1>(dweight + int64_t(o) * cols, g + o * SQUARES, patches, cols);
  }
}

void batchnorm_train_forward(float* out, float* save_mean, float* save_invstd, float* running_mean, float* running_var,
                             float momentum, const float* in, const float* gamma, const float* beta, float eps,
                             int batch, int channels) {
  const double m = double(batch) * SQUARES;
  for (int c = 0; c < channels; ++c) {
    double sum = 0;
    for (int n = 0; n < batch; ++n) {
      const float* x = in + (int64_t(n) * channels + c) * SQUARES;
      for (int s = 0; s < SQUARES; ++s) sum += x[s];
    }
    const double mean = sum / m;
    double sq = 0;  // two passes: no cancellation when the mean is large against the spread
    for (int n = 0; n < batch; ++n) {
      const float* x = in + (int64_t(n) * channels + c) * SQUARES;
      for (int s = 0; s < SQUARES; ++s) sq += (x[s] - mean) * (x[s] - mean);
    }
    const double var = sq / m;
    const double invstd = 1.0 / std::sqrt(var + eps);
    save_mean[c] = float(mean);
    save_invstd[c] = float(invstd);
    if (running_mean && running_var) {
      running_mean[c] = float((1.0 - momentum) * running_mean[c] + momentum * mean);
      running_var[c] = float((1.0 - momentum) * running_var[c] + momentum * var * (m > 1 ? m / (m - 1) : 1.0));
    }
    // Normalise with the rounded statistics that the backward pass will read.
    const float scale = float(save_invstd[c] * double(gamma[c]));
    for (int n = 0; n < batch; ++n) {
      const int64_t base = (int64_t(n) * channels + c) * SQUARES;
      for (int s = 0; s < SQUARES; ++s) out[base + s] = (in[base + s] - save_mean[c]) * scale + beta[c];
    }
  }
}

void batchnorm_backward(float* din, float* dgamma, float* dbeta, const float* dout, const float* in,
                        const float* save_mean, const float* save_invstd, const float* gamma, int batch, int channels) {
  const double m = double(batch) * SQUARES;
  for (int c = 0; c < channels; ++c) {
    const float mean = save_mean[c], invstd = save_invstd[c];
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int n = 0; n < batch; ++n) {
      const int64_t base = (int64_t(n) * channels + c) * SQUARES;
      for (int s = 0; s < SQUARES; ++s) {
        sum_dy += dout[base + s];
        sum_dy_xhat += double(dout[base + s]) * ((in[base + s] - mean) * invstd);
      }
    }
    dbeta[c] += float(sum_dy);
    dgamma[c] += float(sum_dy_xhat);
    const float k = gamma[c] * invstd, mean_dy = float(sum_dy / m), mean_dy_xhat = float(sum_dy_xhat / m);
    for (int n = 0; n < batch; ++n) {
      const int64_t base = (int64_t(n) * channels + c) * SQUARES;
      for (int s = 0; s < SQUARES; ++s) {
        float xhat = (in[base + s] - mean) * invstd;
        din[base + s] += k * (dout[base + s] - mean_dy - xhat * mean_dy_xhat);
      }
    }
  }
}

void activation_backward(float* din, const float* dout, const float* in, int64_t n, Activation act) {
  if (act == Activation::RELU) {
    for (int64_t i = 0; i < n; ++i) din[i] += in[i] > 0.0f ? dout[i] : 0.0f;
  } else {
    for (int64_t i = 0; i < n; ++i) {
      float s = 1.0f / (1.0f + std::exp(-in[i]));
      din[i] += dout[i] * s * (1.0f + in[i] * (1.0f - s));
    }
  }
}

void add_backward(float* din, const float* dout, int64_t n) {
  for (int64_t i = 0; i < n; ++i) din[i] += dout[i];
}

void linear_backward_data(float* din, const float* dout, const float* weight, int batch, int in_features,
                          int out_features) {
  for (int b = 0; b < batch; ++b)
    for (int o = 0; o < out_features; ++o) {
      float g = dout[int64_t(b) * out_features + o];
      if (g != 0.0f) axpy(din + int64_t(b) * in_features, g, weight + int64_t(o) * in_features, in_features);
    }
}

void linear_backward_weight(float* dweight, float* dbias, const float* dout, const float* in, int batch,
                            int in_features, int out_features, int o_begin, int o_end) {
  for (int o = o_begin; o < o_end; ++o)
    for (int b = 0; b < batch; ++b) {
      float g = dout[int64_t(b) * out_features + o];
      if (g == 0.0f) continue;
      axpy(dweight + int64_t(o) * in_features, g, in + int64_t(b) * in_features, in_features);
      if (dbias) dbias[o] += g;
    }
}

float eval_to_win_probability(float eval) { return float(1.0 / (1.0 + std::exp(-double(eval) / EVAL_SCALE))); }

void LossTotals::add(const LossTotals& o) {
  policy += o.policy;
  value_result += o.value_result;
  value_eval += o.value_eval;
  samples += o.samples;
  policy_correct += o.policy_correct;
  value_decisive += o.value_decisive;
  value_correct += o.value_correct;
}

// Binary cross-entropy of sigmoid(y) against target t, computed without overflow for any y:
// -t log s(y) - (1 - t) log(1 - s(y)) = max(y, 0) - y t + log(1 + exp(-|y|)).
static double bce_with_logit(double y, double t) {
  return std::max(y, 0.0) - y * t + std::log1p(std::exp(-std::abs(y)));
}

void loss_forward_backward(float* dpolicy, float* dvalue, LossTotals& totals, const float* policy_logits,
                           const float* value_logit, const float* policy_target, const float* value_result,
                           const float* value_eval, float val_lambda, int batch, float grad_scale) {
  for (int b = 0; b < batch; ++b) {
    const float* z = policy_logits + int64_t(b) * POLICY_SIZE;
    const float* t = policy_target + int64_t(b) * POLICY_SIZE;
    const int zmax = int(std::max_element(z, z + POLICY_SIZE) - z);
    const int tmax = int(std::max_element(t, t + POLICY_SIZE) - t);
    double sum = 0;
    for (int k = 0; k < POLICY_SIZE; ++k) sum += std::exp(double(z[k]) - z[zmax]);
    const double lse = z[zmax] + std::log(sum);  // log sum exp z
    double ce = 0;
    for (int k = 0; k < POLICY_SIZE; ++k)
      if (t[k] != 0.0f) ce -= t[k] * (z[k] - lse);
    if (dpolicy) {
      float* d = dpolicy + int64_t(b) * POLICY_SIZE;
      for (int k = 0; k < POLICY_SIZE; ++k) d[k] += grad_scale * float(std::exp(z[k] - lse) - t[k]);
    }

    const double y = value_logit[b], r = value_result[b], e = value_eval[b];
    if (dvalue) {
      const double target = (1.0 - val_lambda) * r + val_lambda * e;
      dvalue[b] += grad_scale * float(1.0 / (1.0 + std::exp(-y)) - target);
    }

    totals.policy += ce;
    totals.value_result += bce_with_logit(y, r);
    totals.value_eval += bce_with_logit(y, e);
    totals.samples += 1;
    totals.policy_correct += zmax == tmax;
    if (r != 0.5) {
      totals.value_decisive += 1;
      totals.value_correct += (y > 0) == (r > 0.5);
    }
  }
}

}  // namespace jiriki::nn
