// Direct-loop layers on the 9x9 board. Accumulation is in double so that the reference is the
// most accurate figure in the comparisons, not just another float32 rounding.
#include "nn/layers.h"

#include <cmath>

namespace jiriki::nn {

constexpr int BOARD = 9;  // H = W = 9

void conv_forward(float* out, const float* in, const float* weight, const float* bias, int batch, int in_channels,
                  int out_channels, int kernel) {
  const int pad = kernel / 2;
  for (int n = 0; n < batch; ++n) {
    const float* x = in + int64_t(n) * in_channels * SQUARES;
    for (int o = 0; o < out_channels; ++o) {
      float* y = out + (int64_t(n) * out_channels + o) * SQUARES;
      for (int h = 0; h < BOARD; ++h)
        for (int w = 0; w < BOARD; ++w) {
          double acc = bias ? bias[o] : 0.0;
          for (int i = 0; i < in_channels; ++i) {
            const float* wk = weight + (int64_t(o) * in_channels + i) * kernel * kernel;
            for (int kh = 0; kh < kernel; ++kh) {
              int hh = h + kh - pad;
              if (hh < 0 || hh >= BOARD) continue;
              for (int kw = 0; kw < kernel; ++kw) {
                int ww = w + kw - pad;
                if (ww < 0 || ww >= BOARD) continue;
                acc += double(wk[kh * kernel + kw]) * x[i * SQUARES + hh * BOARD + ww];
              }
            }
          }
          y[h * BOARD + w] = float(acc);
        }
    }
  }
}

void batchnorm_forward(float* out, const float* in, const BatchNorm& bn, float eps, int batch, int channels) {
  for (int n = 0; n < batch; ++n)
    for (int c = 0; c < channels; ++c) {
      double scale = bn.gamma.data[c] / std::sqrt(double(bn.var.data[c]) + eps);
      int64_t base = (int64_t(n) * channels + c) * SQUARES;
      for (int s = 0; s < SQUARES; ++s)
        out[base + s] = float((in[base + s] - double(bn.mean.data[c])) * scale + bn.beta.data[c]);
    }
}

float sigmoid(float x) { return float(1.0 / (1.0 + std::exp(-double(x)))); }

void activation_forward(float* out, const float* in, int64_t n, Activation act) {
  if (act == Activation::RELU)
    for (int64_t i = 0; i < n; ++i) out[i] = relu(in[i]);
  else
    for (int64_t i = 0; i < n; ++i) out[i] = swish(in[i]);
}

void add_forward(float* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] += in[i];
}

void linear_forward(float* out, const float* in, const float* weight, const float* bias, int batch, int in_features,
                    int out_features) {
  for (int b = 0; b < batch; ++b)
    for (int o = 0; o < out_features; ++o) {
      double acc = bias ? bias[o] : 0.0;
      const float* wrow = weight + int64_t(o) * in_features;
      const float* x = in + int64_t(b) * in_features;
      for (int i = 0; i < in_features; ++i) acc += double(wrow[i]) * x[i];
      out[int64_t(b) * out_features + o] = float(acc);
    }
}

}  // namespace jiriki::nn
