// Backward passes and training-mode layers (see nn/layers_backward.h).
//
// The convolution gradients go through "patches" (im2col): patches[sq][j] holds, for output square
// sq, the input value that weight column j = (i * k + kh) * k + kw multiplies (0 off the board).
// Both gradients are then products with a contiguous innermost loop over j, which the compiler
// vectorises: dweight[o][:] += dout[o][sq] * patches[sq][:] and dpatches[sq][:] += dout[o][sq] *
// weight[o][:]. Sums are in float in a fixed order; statistics (batch norm, the loss) in double.
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

// The adjoint of im2col: dx[i][square] += every patch entry that was read from it.
void col2im_add(float* dx, const float* dpatches, int in_channels, int kernel) {
  const int pad = kernel / 2, cols = in_channels * kernel * kernel;
  for (int h = 0; h < BOARD; ++h)
    for (int w = 0; w < BOARD; ++w) {
      const float* p = dpatches + (h * BOARD + w) * cols;
      for (int i = 0; i < in_channels; ++i)
        for (int kh = 0; kh < kernel; ++kh)
          for (int kw = 0; kw < kernel; ++kw, ++p) {
            int hh = h + kh - pad, ww = w + kw - pad;
            if (hh >= 0 && hh < BOARD && ww >= 0 && ww < BOARD) dx[i * SQUARES + hh * BOARD + ww] += *p;
          }
    }
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

// Rows y[r][0..81) = sum over j of w[r][j] * c[j][0..81), for R rows at once: each column is read
// once for R outputs. The order of the sums is j's whatever R is.
template <int R>
void product_rows(float* __restrict y, const float* __restrict w, const float* __restrict c, int cols) {
  std::fill(y, y + R * SQUARES, 0.0f);
  for (int j = 0; j < cols; ++j) {
    const float* __restrict cj = c + int64_t(j) * SQUARES;
    float a[R];
    for (int r = 0; r < R; ++r) a[r] = w[int64_t(r) * cols + j];
    for (int r = 0; r < R; ++r) {
      float* __restrict yr = y + r * SQUARES;
      for (int sq = 0; sq < SQUARES; ++sq) yr[sq] += a[r] * cj[sq];
    }
  }
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
    for (; o + 4 <= out_channels; o += 4) product_rows<4>(y + o * SQUARES, weight + int64_t(o) * cols, c, cols);
    for (; o < out_channels; ++o) product_rows<1>(y + o * SQUARES, weight + int64_t(o) * cols, c, cols);
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
        for (int l = 0; l < LANES; ++l) lane[l] += w[i + l] * x[i + l];
      float tail = 0.0f;
      for (; i < in_features; ++i) tail += w[i] * x[i];
      const float sum = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
      out[int64_t(b) * out_features + o] = (bias ? bias[o] : 0.0f) + (sum + tail);
    }
  }
}

void conv_backward_data(float* din, const float* dout, const float* weight, int batch, int in_channels,
                        int out_channels, int kernel) {
  const int cols = in_channels * kernel * kernel;
  float* dpatches = scratch(size_t(SQUARES) * cols);
  for (int n = 0; n < batch; ++n) {
    std::fill(dpatches, dpatches + size_t(SQUARES) * cols, 0.0f);
    const float* g = dout + int64_t(n) * out_channels * SQUARES;
    for (int sq = 0; sq < SQUARES; ++sq)
      for (int o = 0; o < out_channels; ++o) {
        float gv = g[o * SQUARES + sq];
        if (gv != 0.0f) axpy(dpatches + sq * cols, gv, weight + int64_t(o) * cols, cols);
      }
    col2im_add(din + int64_t(n) * in_channels * SQUARES, dpatches, in_channels, kernel);
  }
}

void conv_backward_weight(float* dweight, const float* dout, const float* in, int batch, int in_channels,
                          int out_channels, int kernel, int o_begin, int o_end) {
  const int cols = in_channels * kernel * kernel;
  float* patches = scratch(size_t(SQUARES) * cols);
  for (int n = 0; n < batch; ++n) {
    im2col(patches, in + int64_t(n) * in_channels * SQUARES, in_channels, kernel);
    for (int o = o_begin; o < o_end; ++o) {
      const float* g = dout + (int64_t(n) * out_channels + o) * SQUARES;
      float* dw = dweight + int64_t(o) * cols;
      for (int sq = 0; sq < SQUARES; ++sq)
        if (g[sq] != 0.0f) axpy(dw, g[sq], patches + sq * cols, cols);
    }
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
