// The whole network's backward pass for training, layer by layer, in reverse order of the forward
// pass of nn/forward.h (whose buffers it reads; each buffer's gradient lives in the same place of a
// second Activations). The weights are the fp32 nn::Model itself (the master weights); their
// gradients live in a second nn::Model of the same architecture, so that the optimizer, the
// checkpoint and the gradient buckets of data parallelism all walk the same named list,
// Model::tensors().
#pragma once
#include <vector>

#include "common/thread_pool.h"
#include "nn/forward.h"
#include "nn/layers_backward.h"
#include "nn/model.h"
#include "training/batch.h"

namespace jiriki::training {

// The forward pass and its buffers (nn/forward.h), under the names the trainer uses.
using nn::Activations;
using nn::BlockActs;
using nn::ConvBNActs;
using nn::forward;
using nn::Mode;

// Everything a forward and backward pass needs besides the weights. Data parallelism gives each
// replica one of these (and its own slice of the global batch).
struct Workspace {
  Activations acts, grads_acts;
  nn::Model grads;  // d(loss)/d(tensor) for every trainable tensor of the model (running stats unused)
  Workspace(const nn::Architecture& arch, int capacity);
};

// Backward pass after forward(TRAIN) on the same batch. grads_acts.policy and
// grads_acts.value_logit hold the loss's gradients, every other buffer of grads_acts is zero.
// Adds d(loss)/d(weights) into `grads`.
void backward(const nn::Model& model, const Activations& acts, Activations& grads_acts, nn::Model& grads,
              const float* features, int batch, ThreadPool& pool);

// Sets every tensor of a gradient model to zero.
void zero_tensors(nn::Model& m);

// One training batch's gradients: zeroes the workspace's gradients, then forward (TRAIN), the fused
// loss and backward. The parameter gradients are left in ws.grads, averaged over `grad_scale`'s
// batch (grad_scale = 1 / global batch size). Returns the batch's loss totals.
nn::LossTotals compute_gradients(nn::Model& model, Workspace& ws, const Batch& batch, float val_lambda,
                                 float bn_momentum, float grad_scale, ThreadPool& pool);

// The loss totals of a batch in EVAL mode (held-out metrics); nothing is updated.
nn::LossTotals evaluate_batch(nn::Model& model, Activations& acts, const Batch& batch, float val_lambda,
                              ThreadPool& pool);

}  // namespace jiriki::training
