// The network's activations on the device: the one definition that the inference kernels
// (kernels.cu), the square-major convolution's epilogue (square_conv_sm90a.cu) and the GPU trainer
// (training/cuda/train_kernels.cu) all use, so that a tower's result does not depend on which kernel
// ran it.
//
// Swish uses expf, not the fast intrinsic __expf: expf is accurate to 2 ulp over the whole range,
// __expf's error grows with |x| (and it is what made the square-major tower and the others differ);
// the activation is a few instructions in an epilogue next to a convolution's thousands of
// multiply-adds per output, so the accurate one costs nothing measurable.
#pragma once
#include "nn/model.h"

namespace jiriki::nn::cuda {

__device__ __forceinline__ float relu(float x) { return fmaxf(x, 0.0f); }

// Swish as x / (1 + e^-x): exact limits at both ends (e^-x overflowing to inf gives -0, not NaN).
__device__ __forceinline__ float swish(float x) { return x / (1.0f + expf(-x)); }

__device__ __forceinline__ float activate(float x, Activation act) {
  return act == Activation::RELU ? relu(x) : swish(x);
}

}  // namespace jiriki::nn::cuda
