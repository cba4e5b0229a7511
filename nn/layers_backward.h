// Training-mode layers: the backward pass of every layer of nn/layers.h, batch norm with batch
// statistics, and the fused loss (llm.c style: plain functions on float buffers, one beside the
// other). The CPU trainer (training/) is built from them, and they are the oracle the cuDNN
// trainer's gradients are compared with. Each function mirrors one library call of the GPU path
// (cudnnConvolutionBackwardData / BackwardFilter, cudnnBatchNormalizationForwardTraining /
// Backward, cuBLAS GEMMs), so that the two trainers have the same structure.
//
// Conventions:
//  - Every backward function ADDS into its gradient outputs (input gradient and parameter
//    gradients), as llm.c does: a buffer reached by two paths (the residual stream, the trunk output
//    that feeds both heads, a weight used by every sample) needs no special case. The caller zeroes
//    the gradient buffers once per step.
//  - Layouts are those of nn/layers.h: NCHW activations on the 9x9 board, OIHW conv weights,
//    [out][in] fully connected weights.
//  - Functions that reduce over the batch (weight gradients) take a range of output channels or
//    features [o_begin, o_end): each output of the range is summed over the batch in a fixed order,
//    so results are bit-identical however a caller splits the range among threads. Functions that
//    work sample by sample are split by the caller through pointer offsets.
#pragma once
#include <cstdint>

#include "nn/model.h"

namespace jiriki::nn {

// ---- the trainer's forward products --------------------------------------------------------
// conv_forward of nn/layers.h without a bias, computed as products over the input's columns
// (columns[j][sq]: the value weight column j = (i * k + kh) * k + kw multiplies at output square
// sq), out[n][o][:] = sum over j of weight[o][j] * columns[j][:], summed in float in the order of j
// with a contiguous loop over the 81 squares that the compiler vectorises. The reference loop sums
// in double, element by element; the two agree to float rounding, and this one is ~30 times faster.
void conv_forward_columns(float* out, const float* in, const float* weight, int batch, int in_channels,
                          int out_channels, int kernel);
// linear_forward of nn/layers.h, summed in float: eight interleaved partial sums (one vector
// register), added in a fixed order. Results do not depend on how a caller splits the batch.
void linear_forward_lanes(float* out, const float* in, const float* weight, const float* bias, int batch,
                          int in_features, int out_features);

// ---- convolution (3x3 pad 1, or 1x1; no bias: batch norm follows every convolution) ----------
// din[n][i][sq] += d(loss)/d(in) for out = conv_forward(in, weight), given dout = d(loss)/d(out).
void conv_backward_data(float* din, const float* dout, const float* weight, int batch, int in_channels,
                        int out_channels, int kernel);
// dweight[o][i][kh][kw] += sum over the batch, for output channels o in [o_begin, o_end).
void conv_backward_weight(float* dweight, const float* dout, const float* in, int batch, int in_channels,
                          int out_channels, int kernel, int o_begin, int o_end);

// ---- batch norm in training mode -----------------------------------------------------------
// Normalises each channel of a [batch][channels][81] tensor with the statistics of this batch
// (mean and biased variance over batch x 81 values): out = (in - mean) * invstd * gamma + beta with
// invstd = 1 / sqrt(var + eps). Saves mean and invstd per channel for the backward pass. When
// running_mean / running_var are not null they are updated as cuDNN and PyTorch do:
// running = (1 - momentum) * running + momentum * batch value, with the unbiased variance
// (var * M / (M - 1), M = batch x 81). out must not alias in.
void batchnorm_train_forward(float* out, float* save_mean, float* save_invstd, float* running_mean, float* running_var,
                             float momentum, const float* in, const float* gamma, const float* beta, float eps,
                             int batch, int channels);
// Gradients of batchnorm_train_forward (the batch statistics depend on the input, so every input
// gradient has a share of the whole channel): with xhat = (in - mean) * invstd and M = batch x 81,
//   dbeta += sum dout,  dgamma += sum dout * xhat,
//   din   += gamma * invstd * (dout - sum(dout) / M - xhat * sum(dout * xhat) / M).
void batchnorm_backward(float* din, float* dgamma, float* dbeta, const float* dout, const float* in,
                        const float* save_mean, const float* save_invstd, const float* gamma, int batch, int channels);

// ---- elementwise ---------------------------------------------------------------------------
// din += dout * act'(in), where in is the activation's input: ReLU' = [in > 0] (0 at the kink, as
// PyTorch), Swish' = s * (1 + in * (1 - s)) with s = sigmoid(in).
void activation_backward(float* din, const float* dout, const float* in, int64_t n, Activation act);
// The gradient of out += in with respect to in: din += dout. (The gradient that flows on through
// `out` is dout itself.)
void add_backward(float* din, const float* dout, int64_t n);

// ---- fully connected -----------------------------------------------------------------------
// din[b][i] += sum_o dout[b][o] * weight[o][i]
void linear_backward_data(float* din, const float* dout, const float* weight, int batch, int in_features,
                          int out_features);
// dweight[o][i] += sum_b dout[b][o] * in[b][i] and dbias[o] += sum_b dout[b][o] (dbias may be null),
// for o in [o_begin, o_end).
void linear_backward_weight(float* dweight, float* dbias, const float* dout, const float* in, int batch,
                            int in_features, int out_features, int o_begin, int o_end);

// ---- the loss (dlshogi's) ------------------------------------------------------------------
// dlshogi's scale of evaluations: the win probability of an eval is sigmoid(eval / EVAL_SCALE).
constexpr double EVAL_SCALE = 756.0864962951762;
float eval_to_win_probability(float eval);

// Sums over the samples seen, for losses and accuracies averaged later.
struct LossTotals {
  double policy = 0;        // soft cross-entropy of the policy against its target (nats)
  double value_result = 0;  // binary cross-entropy of the value against the game result
  double value_eval = 0;    // binary cross-entropy of the value against sigmoid(eval / EVAL_SCALE)
  int64_t samples = 0;
  int64_t policy_correct = 0;  // argmax of the logits == argmax of the target
  int64_t value_decisive = 0;  // samples whose game was won or lost (not drawn)
  int64_t value_correct = 0;   // of those, the value was on the winner's side of 1/2
  void add(const LossTotals& o);
};

// The fused loss of a batch, forward and backward in one pass:
//   loss = policy + (1 - val_lambda) * value_result + val_lambda * value_eval     (per sample)
// policy_target: [batch][2187] distributions (each sums to 1: a one-hot recorded move, or visit
// counts divided by their sum); value_result: [batch] 1 / 0 / 0.5 for a win / loss / draw of the
// side to move; value_eval: [batch] win probabilities from the evaluations. Since the binary
// cross-entropy is linear in its target, the two value terms are one cross-entropy against the
// blended target t = (1 - val_lambda) * result + val_lambda * eval, so
//   dpolicy[b][k] += grad_scale * (softmax(logits[b])[k] - target[b][k]),
//   dvalue[b]     += grad_scale * (sigmoid(value_logit[b]) - t[b]).
// grad_scale is 1 / (samples in the global batch) for a mean loss. dpolicy and dvalue may both be
// null (evaluation only). Adds each sample's terms and accuracies to `totals`.
void loss_forward_backward(float* dpolicy, float* dvalue, LossTotals& totals, const float* policy_logits,
                           const float* value_logit, const float* policy_target, const float* value_result,
                           const float* value_eval, float val_lambda, int batch, float grad_scale);

}  // namespace jiriki::nn
