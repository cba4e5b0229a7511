// The whole network's forward and backward pass for training, layer by layer, with an explicit
// buffer for every intermediate tensor (llm.c style). The weights are the fp32 nn::Model itself
// (the master weights); their gradients live in a second nn::Model of the same architecture, so
// that the optimizer, the checkpoint and (later) the gradient buckets of data parallelism all walk
// the same named list, Model::tensors().
//
// Forward (B positions, C channels, act = ReLU or Swish; names are the buffers below):
//   stem.conv = conv3x3(features)     stem.bn = BN(stem.conv)     stem_out = act(stem.bn)
//   block i (input h = stem_out or the previous block's out):
//     conv1.conv = conv3x3(h)  conv1.bn = BN(..)  act1 = act(conv1.bn)
//     conv2.conv = conv3x3(act1)  conv2.bn = BN(..)  sum = h + conv2.bn  out = act(sum)
//   policy = conv1x1(trunk) + policy_bias                        (trunk = the last block's out)
//   value.conv = conv1x1(trunk)  value.bn = BN(..)  value_act = act(value.bn)
//   fc1 = value_act W1 + b1   fc1_act = act(fc1)   value_logit = fc1_act W2 + b2
// Backward runs the same list in reverse; each buffer's gradient lives in the same place of a
// second Activations.
#pragma once
#include <vector>

#include "nn/layers_backward.h"
#include "nn/model.h"
#include "training/batch.h"
#include "training/thread_pool.h"

namespace jiriki::training {

// The saved tensors of one convolution followed by batch norm.
struct ConvBNActs {
  std::vector<float> conv;          // convolution output = BN input   [B][C][81]
  std::vector<float> bn;            // BN output                       [B][C][81]
  std::vector<float> mean, invstd;  // this batch's statistics          [C] (TRAIN mode)
};

struct BlockActs {
  ConvBNActs conv1;
  std::vector<float> act1;  // act(conv1.bn), conv2's input
  ConvBNActs conv2;
  std::vector<float> sum;  // block input + conv2.bn
  std::vector<float> out;  // act(sum), the block's output
};

// Every intermediate tensor of a forward pass over up to `capacity` positions. A second instance
// holds their gradients during the backward pass (its mean and invstd are unused).
struct Activations {
  int capacity = 0;
  ConvBNActs stem;
  std::vector<float> stem_out;  // act(stem.bn)
  std::vector<BlockActs> blocks;
  std::vector<float> policy;       // [B][2187] policy logits
  ConvBNActs value;                // the value head's 1x1 convolution (27 channels)
  std::vector<float> value_act;    // [B][2187] act(value.bn), fc1's input
  std::vector<float> fc1;          // [B][256]
  std::vector<float> fc1_act;      // [B][256]
  std::vector<float> value_logit;  // [B] sigmoid of it is the win probability

  Activations() = default;
  Activations(const nn::Architecture& arch, int capacity);
  void zero();
  // The trunk's output, which feeds both heads.
  std::vector<float>& trunk() { return blocks.empty() ? stem_out : blocks.back().out; }
  const std::vector<float>& trunk() const { return blocks.empty() ? stem_out : blocks.back().out; }
};

// Everything a forward and backward pass needs besides the weights. Data parallelism gives each
// replica one of these (and its own slice of the global batch).
struct Workspace {
  Activations acts, grads_acts;
  nn::Model grads;  // d(loss)/d(tensor) for every trainable tensor of the model (running stats unused)
  Workspace(const nn::Architecture& arch, int capacity);
};

enum class Mode {
  TRAIN,  // batch norm with this batch's statistics; the running statistics are updated
  EVAL,   // batch norm with the running statistics (as the exported, folded model computes)
};

// Forward pass over `batch` <= acts.capacity positions. In TRAIN mode each batch norm's running
// statistics in `model` move towards the batch's by `bn_momentum` (0 leaves them unchanged).
void forward(nn::Model& model, Activations& acts, const float* features, int batch, Mode mode, float bn_momentum,
             ThreadPool& pool);

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
