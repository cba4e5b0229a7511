// The network in memory: its architecture and the tensors of the ResNet of issue 3, in two forms.
//
//  Model        the training form: every convolution followed by its batch norm, whose four
//               parameters (gamma, beta, running mean, running variance) are kept. This is what
//               the model file stores and what the trainer updates.
//  FoldedModel  the inference form: each batch norm folded into the convolution before it, so that
//               every convolution is weight + bias. Every inference backend runs this form.
//
// Network (x = 119 input planes of 9x9, see nn/features.h):
//   stem:    h = act(BN(conv3x3(x, 119 -> C)))
//   block i: h = act(h + BN(conv3x3(act(BN(conv3x3(h, C -> C))), C -> C)))      (N blocks)
//   policy:  logits[81*label + sq] = conv1x1(h, C -> 27)[label][sq] + policy_bias[81*label + sq]
//   value:   v = act(BN(conv1x1(h, C -> 27)));  flattened in NCHW order (index 81*channel + sq)
//            logit = fc2(act(fc1(v, 2187 -> 256)), 256 -> 1);  win probability = sigmoid(logit)
// act is ReLU or Swish (x * sigmoid(x)). Convolutions have no bias in the training form (the batch
// norm's beta plays that part); fc1 and fc2 have biases. All 3x3 convolutions pad by 1.
//
// Layouts: tensors are float32; conv weights OIHW ([out][in][kh][kw]); fc weights [out][in];
// activations NCHW with H*W = 81 and the spatial index equal to the Square of shogi/types.h
// (h = file - 1, w = rank - 1), as dlshogi lays out its planes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace jiriki::nn {

constexpr int BOARD_PLANES = 62;                          // 2 x (14 pieces + 14 attacks + 3 attack counts)
constexpr int HAND_PLANES = 57;                           // 2 x 28 hand thermometer planes + 1 in-check plane
constexpr int INPUT_PLANES = BOARD_PLANES + HAND_PLANES;  // 119
constexpr int SQUARES = 81;                               // H x W = 9 x 9
constexpr int INPUT_SIZE = INPUT_PLANES * SQUARES;        // floats per position
// Bytes per position of the planes packed as bits (nn::encode_packed_features): 1205, padded to a
// multiple of 16.
constexpr int PACKED_INPUT_BYTES = (INPUT_SIZE + 127) / 128 * 16;
constexpr int POLICY_LABELS = 27;                     // move labels (see nn/features.h)
constexpr int POLICY_SIZE = POLICY_LABELS * SQUARES;  // 2187 logits per position
constexpr int VALUE_CHANNELS = 27;                    // channels of the value head's 1x1 convolution
constexpr int VALUE_HIDDEN = 256;                     // width of the value head's hidden layer

// The input encoding a model was trained with; stored in the model file.
enum class FeatureSet : uint32_t { DLSHOGI_119 = 1 };

enum class Activation : uint32_t { RELU = 0, SWISH = 1 };
const char* activation_name(Activation a);             // "relu" / "swish"
Activation parse_activation(const std::string& name);  // throws std::invalid_argument

struct Architecture {
  int blocks = 10;
  int channels = 192;
  Activation activation = Activation::RELU;
  FeatureSet feature_set = FeatureSet::DLSHOGI_119;
  float bn_eps = 1e-5f;  // batch-norm epsilon used by every batch norm of the network
  bool operator==(const Architecture&) const = default;
};

// Multiply-adds per position (convolutions and fully connected layers), for FLOP figures.
int64_t macs_per_position(const Architecture& arch);
// Floats in all the tensors of a Model of this architecture (BN statistics included).
int64_t tensor_floats(const Architecture& arch);

// A dense float32 tensor with its shape.
struct Tensor {
  std::vector<int> shape;
  std::vector<float> data;

  Tensor() = default;
  explicit Tensor(std::vector<int> s, float fill = 0.0f);
  size_t size() const { return data.size(); }
  float* ptr() { return data.data(); }
  const float* ptr() const { return data.data(); }
};
std::string shape_string(const std::vector<int>& shape);  // "[64,64,3,3]"

// Batch norm over the channels of its input (inference uses the running statistics).
struct BatchNorm {
  Tensor gamma, beta, mean, var;  // each [channels]
};

// A bias-free convolution followed by a batch norm.
struct ConvBN {
  Tensor weight;  // OIHW
  BatchNorm bn;
};

struct ResidualBlock {
  ConvBN conv1, conv2;
};

// The training form of the network.
struct Model {
  Architecture arch;
  ConvBN stem;                        // [C,119,3,3]
  std::vector<ResidualBlock> blocks;  // each conv [C,C,3,3]
  Tensor policy_conv;                 // [27,C,1,1]
  Tensor policy_bias;                 // [2187], index 81*label + sq
  ConvBN value_conv;                  // [27,C,1,1], BN over 27 channels
  Tensor value_fc1_weight;            // [256,2187]
  Tensor value_fc1_bias;              // [256]
  Tensor value_fc2_weight;            // [1,256]
  Tensor value_fc2_bias;              // [1]

  // A network of this architecture with every tensor shaped and zero (BN gamma and var 1).
  explicit Model(const Architecture& a = Architecture{});

  // Every tensor with its stable name ("stem.conv.weight", "blocks.3.conv2.bn.var", ...), in the
  // order of the model file. `trainable` is false for BN running statistics. The file format,
  // initialisation and the trainer's optimizer all walk this one list.
  template <class T>
  struct NamedTensor {
    std::string name;
    T* tensor;
    bool trainable;
  };
  using Named = NamedTensor<Tensor>;
  std::vector<Named> tensors();
  std::vector<NamedTensor<const Tensor>> tensors() const;
};

// Deterministic initialisation for `jiriki nn init`: He-normal weights from a seeded generator
// that is the same on every platform, zero biases, BN gamma 1, beta 0, mean 0, var 1.
void init_model(Model& model, uint64_t seed);

// A convolution with batch norm folded in: out = conv(in, weight) + bias.
struct FoldedConv {
  int out_channels = 0, in_channels = 0, kernel = 0;  // kernel 3 (pad 1) or 1
  std::vector<float> weight;                          // OIHW
  std::vector<float> bias;                            // [out_channels]
};

// The inference form. Every backend evaluates exactly this.
struct FoldedModel {
  Architecture arch;
  FoldedConv stem;
  std::vector<FoldedConv> block_conv1, block_conv2;     // [blocks] each
  FoldedConv policy_conv;                               // bias all zero (the per-logit bias is separate)
  std::vector<float> policy_bias;                       // [2187]
  FoldedConv value_conv;                                // BN folded
  std::vector<float> value_fc1_weight, value_fc1_bias;  // [256][2187], [256]
  std::vector<float> value_fc2_weight, value_fc2_bias;  // [1][256], [1]
};

// Folds each batch norm into the convolution before it:
// w' = w * gamma / sqrt(var + eps),  b' = beta - mean * gamma / sqrt(var + eps).
FoldedModel fold_batch_norm(const Model& model);

}  // namespace jiriki::nn
