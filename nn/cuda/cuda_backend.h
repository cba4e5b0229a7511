// What the CUDA backend offers beyond the Evaluator interface (nn/backend.h declares its factory).
#pragma once
#include "nn/backend.h"

namespace jiriki::nn {

// Seconds per forward pass of a CUDA evaluator at batch n with its inputs and outputs already on
// the GPU: the captured graph replayed `reps` times, timed with CUDA events. This is the figure to
// hold against frameworks' GPU-only timings; evaluate() adds the host conversion and the copies.
// Throws std::invalid_argument if `e` is not a CUDA evaluator or n is out of range.
double cuda_device_seconds_per_batch(Evaluator& e, int n, int reps);

// Whether batch n runs its tower with the square-major Hopper convolution (nn/cuda/square_conv.h)
// rather than cuDNN; builds n's bucket if it is not built yet. Throws like the function above.
bool cuda_uses_square_conv(Evaluator& e, int n);

}  // namespace jiriki::nn
