// The network's forward pass in its training form (convolution, then batch norm), layer by layer,
// with an explicit buffer for every intermediate tensor (llm.c style): the one implementation that
// the trainer (training/network.h adds the backward pass) and the reference evaluator, the tests'
// oracle (nn/reference.cpp), both run, so that the two cannot drift apart.
//
// Forward (B positions, C channels, act = ReLU or Swish; names are the buffers below):
//   stem.conv = conv3x3(features)     stem.bn = BN(stem.conv)     stem_out = act(stem.bn)
//   block i (input h = stem_out or the previous block's out):
//     conv1.conv = conv3x3(h)  conv1.bn = BN(..)  act1 = act(conv1.bn)
//     conv2.conv = conv3x3(act1)  conv2.bn = BN(..)  sum = h + conv2.bn  out = act(sum)
//   policy = conv1x1(trunk) + policy_bias                        (trunk = the last block's out)
//   value.conv = conv1x1(trunk)  value.bn = BN(..)  value_act = act(value.bn)
//   fc1 = value_act W1 + b1   fc1_act = act(fc1)   value_logit = fc1_act W2 + b2
//
// Parallelism: every layer is split among the pool's threads along a dimension it does not sum over
// (samples, elements), so every float is computed by one thread in a fixed order and the results are
// bit-identical for any number of threads.
#pragma once
#include <vector>

#include "common/thread_pool.h"
#include "nn/model.h"

namespace jiriki::nn {

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
  Activations(const Architecture& arch, int capacity);
  void zero();
  // The trunk's output, which feeds both heads.
  std::vector<float>& trunk() { return blocks.empty() ? stem_out : blocks.back().out; }
  const std::vector<float>& trunk() const { return blocks.empty() ? stem_out : blocks.back().out; }
};

// The shape of one of the network's convolutions: its batch, input and output channels, kernel size.
struct LayerShape {
  int batch, cin, cout, kernel;
};

enum class Mode {
  TRAIN,  // batch norm with this batch's statistics; the running statistics are updated
  EVAL,   // batch norm with the running statistics (as the exported, folded model computes)
};

// Forward pass over `batch` <= acts.capacity positions. In TRAIN mode each batch norm's running
// statistics in `model` move towards the batch's by `bn_momentum` (0 leaves them unchanged).
void forward(Model& model, Activations& acts, const float* features, int batch, Mode mode, float bn_momentum,
             ThreadPool& pool);

}  // namespace jiriki::nn
