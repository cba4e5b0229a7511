// The GPU trainer's own kernels: everything between cuDNN's convolutions and cuBLAS's matrix
// products (training/cuda/gpu_trainer.cpp says what runs when). Host-side launchers, so that the
// .cpp files need no CUDA compiler.
//
// Layouts: activations NHWC, a [rows][channels] matrix with rows = positions x 81, stored in bf16
// (uint16_t on the host side, the bit pattern of a bfloat16); parameters, their gradients and the
// optimizer state fp32; all arithmetic fp32, sums over the batch in a fixed order (two-stage
// reductions, the second in double), so that a step gives the same bits every time.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "nn/model.h"

namespace jiriki::training::cuda {

// The scalars that may change from one step to the next. Kernels read them from device memory, so
// that one captured CUDA graph serves every step; the host writes them before each launch.
struct StepParams {
  float lr = 0;                // learning rate of this step
  float bias_correction1 = 1;  // AdamW: 1 - beta1^t
  float bias_correction2 = 1;  // AdamW: 1 - beta2^t
  float clip = 0;              // clip the global gradient norm to this (0: no clipping)
  float val_lambda = 0;        // weight of the eval target in the value loss
  float bn_momentum = 0;       // batch-norm running statistics
  float grad_scale = 0;        // 1 / (positions in the global batch): the loss is a mean
};

// Per-sample loss terms written by launch_loss (summed on the host into nn::LossTotals):
// policy cross-entropy, value BCE against the result, value BCE against the eval, then 1 or 0 for
// policy argmax correct, game decisive, value on the winner's side.
constexpr int LOSS_RECORD = 6;

// Scratch sizes, in floats, that the two-stage reductions below need.
size_t channel_sums_scratch(int channels);       // launch_bn_*: partial sums of up to MAX blocks
size_t column_sums_scratch(int cols);            // launch_column_sums
constexpr size_t SUM_OF_SQUARES_SCRATCH = 1024;  // doubles, launch_norm

// ---- inputs ----------------------------------------------------------------------------------
// (features -> x [n][81][128] bf16: nn::cuda::launch_features_to_nhwc, nn/cuda/kernels.h.)
// Fills n bf16 values with a hash of (seed, index) in [-1, 1): inputs for timing cuDNN's algorithms.
void launch_fill_random(uint16_t* x, int64_t n, uint32_t seed, cudaStream_t stream);

// ---- batch norm followed by the activation ------------------------------------------------
// Each batch norm keeps `saved` = [4][channels] fp32: mean, invstd, scale = gamma * invstd,
// shift = beta - mean * scale. Its output is out = act(x * scale + shift [+ residual]).

// TRAIN: statistics of x [rows][channels] (mean, biased variance) into saved; the running statistics
// move towards the batch's by params->bn_momentum, with the unbiased variance (as cuDNN and PyTorch).
void launch_bn_train_statistics(const uint16_t* x, int64_t rows, int channels, const float* gamma, const float* beta,
                                float* running_mean, float* running_var, float eps, const StepParams* params,
                                float* saved, float* scratch, cudaStream_t stream);
// EVAL: saved from the running statistics.
void launch_bn_eval_statistics(int channels, const float* gamma, const float* beta, const float* running_mean,
                               const float* running_var, float eps, float* saved, cudaStream_t stream);
// out = act(x * scale + shift [+ residual]); residual may be null.
void launch_bn_act_forward(const uint16_t* x, const float* saved, const uint16_t* residual, uint16_t* out, int64_t rows,
                           int channels, nn::Activation act, cudaStream_t stream);
// The backward pass of launch_bn_act_forward after launch_bn_train_statistics, given dy = d(loss)/d(out):
// with z the pre-activation (recomputed), dz = dy * act'(z) and xhat = (x - mean) * invstd,
//   dbeta = sum dz,  dgamma = sum dz xhat   (written, not added),
//   dx = gamma invstd (dz - mean(dz) - xhat mean(dz xhat))   (bf16, written),
//   dresidual = dz when residual is given (bf16, written).
// scratch: channel_sums_scratch(channels) floats, plus 3 x channels more.
void launch_bn_act_backward(const uint16_t* dy, const uint16_t* x, const uint16_t* residual, const float* saved,
                            const float* gamma, float* dgamma, float* dbeta, uint16_t* dx, uint16_t* dresidual,
                            int64_t rows, int channels, nn::Activation act, float* scratch, cudaStream_t stream);

// ---- the heads -----------------------------------------------------------------------------
// heads [n][81][54] fp32 (the policy's 27 and the value's 27 1x1-convolution outputs) ->
//   policy[n][81 * label + sq] = heads[n][sq][label] + policy_bias[81 * label + sq]   (fp32)
//   value_conv[n][sq][c] = heads[n][sq][27 + c]                                       (bf16)
void launch_heads_split(const float* heads, const float* policy_bias, float* policy, uint16_t* value_conv, int n,
                        cudaStream_t stream);
// value_logit[n] = fc2_bias + sum_j fc2_weight[j] act(fc1[n][j] + fc1_bias[j]).
void launch_value_forward(const float* fc1, const float* fc1_bias, const float* fc2_weight, const float* fc2_bias,
                          nn::Activation act, float* value_logit, int n, cudaStream_t stream);
// The fused loss of nn::loss_forward_backward for n positions: per-sample records (LOSS_RECORD
// floats each) and, unless dpolicy is null, the gradients of the mean loss:
//   dpolicy [n][2187] fp32 and the same values as dpolicy_nhwc [n][81][27] bf16, dvalue [n] fp32.
void launch_loss(const float* policy, const float* value_logit, const float* policy_target, const float* value_result,
                 const float* value_eval, const StepParams* params, float* dpolicy, uint16_t* dpolicy_nhwc,
                 float* dvalue, float* records, int n, cudaStream_t stream);
// From dvalue to fc1's output, elementwise over [n][256] with z = fc1 + fc1_bias:
//   dfc1 = dvalue fc2_weight act'(z) (fp32, and bf16 in dfc1_bf16),  fc2_terms = dvalue act(z).
void launch_value_backward(const float* fc1, const float* fc1_bias, const float* fc2_weight, const float* dvalue,
                           nn::Activation act, float* dfc1, uint16_t* dfc1_bf16, float* fc2_terms, int n,
                           cudaStream_t stream);
// out[c] = sum_r in[r][c] over a [rows][cols] fp32 matrix (bias gradients). scratch:
// column_sums_scratch(cols) floats.
void launch_column_sums(const float* in, int64_t rows, int cols, float* out, float* scratch, cudaStream_t stream);

// ---- gradients and the optimizer ---------------------------------------------------------------
void launch_bf16_to_f32(const uint16_t* in, float* out, int64_t n, cudaStream_t stream);
void launch_f32_to_bf16(const float* in, uint16_t* out, int64_t n, cudaStream_t stream);
// norm[0] = sqrt(sum of g^2) over n floats. scratch: SUM_OF_SQUARES_SCRATCH doubles.
void launch_norm(const float* g, int64_t n, float* norm, double* scratch, cudaStream_t stream);

// The optimizers of training/optimizer.h over n parameters, the gradient first scaled by
// min(1, clip / norm[0]) when params->clip > 0. w_bf16, when not null, receives the new weights in
// bf16 (the copy the convolutions and matrix products read).
void launch_sgd(float* w, const float* g, float* momentum_buf, uint16_t* w_bf16, int64_t n, float weight_decay,
                float momentum, bool nesterov, const StepParams* params, const float* norm, cudaStream_t stream);
void launch_adamw(float* w, const float* g, float* m, float* v, uint16_t* w_bf16, int64_t n, float weight_decay,
                  double beta1, double beta2, float eps, const StepParams* params, const float* norm,
                  cudaStream_t stream);

}  // namespace jiriki::training::cuda
