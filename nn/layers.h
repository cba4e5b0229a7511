// The layers of the network as plain functions on float buffers (llm.c style): NCHW activations
// on the 9x9 board, OIHW weights. Direct loops, written to be obviously right rather than fast:
// the reference evaluator is built from them, and the trainer adds a *_backward beside each
// *_forward here, so that there is one definition of every layer.
#pragma once
#include "nn/model.h"

namespace jiriki::nn {

// out[n][o][sq] = bias[o] + sum_{i,kh,kw} weight[o][i][kh][kw] * in[n][i][sq shifted by (kh-k/2, kw-k/2)]
// on the 9x9 board with zero padding (k = 1 or 3). bias may be null.
void conv_forward(float* out, const float* in, const float* weight, const float* bias, int batch, int in_channels,
                  int out_channels, int kernel);

// Batch norm with fixed statistics (inference): out = (in - mean) / sqrt(var + eps) * gamma + beta,
// per channel over a [batch][channels][81] tensor. out may equal in.
void batchnorm_forward(float* out, const float* in, const BatchNorm& bn, float eps, int batch, int channels);

// out = act(in), elementwise over n values. out may equal in.
void activation_forward(float* out, const float* in, int64_t n, Activation act);

// out += in, elementwise (the residual skip).
void add_forward(float* out, const float* in, int64_t n);

// out[b][o] = bias[o] + sum_i weight[o][i] * in[b][i]   (fully connected; bias may be null)
void linear_forward(float* out, const float* in, const float* weight, const float* bias, int batch, int in_features,
                    int out_features);

// The scalar activations and the logistic function, shared by every backend's host code.
inline float relu(float x) { return x > 0.0f ? x : 0.0f; }
float sigmoid(float x);
inline float swish(float x) { return x * sigmoid(x); }

}  // namespace jiriki::nn
