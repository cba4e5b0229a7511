// The GPU trainer's choices among its ways to compute each convolution pass, kept from set-up to
// set-up. A trainer times, at every set-up, the graph API's bare convolution against the same
// convolution through an identity, and both against cuDNN's legacy algorithm (itself chosen by
// cudnnFind's timings): choices by timing, which can come out differently from one set-up to the
// next where two are close, and then two runs of one seed round differently (a run of `--batch auto`
// on two H200s did: bench/results/batch_size/h200x2_host_2). Kept here, the first set-up of a shape
// on a machine times them and every later one (the next run, a batch the tuner moves back to, the
// other replicas) takes its answer without timing: the same arithmetic, and about 0.3 s less set-up.
//
// Kept in the file of cuDNN's engine choices (nn/cuda/fused_conv.cpp; JIRIKI_CUDNN_CACHE), one line
// a shape: "jiriki-train-conv-1", the key, the six passes' routes, then the legacy algorithms and
// their math types. Of two lines for one key the later wins; a line that does not parse is skipped
// (and the engine choices' reader skips these lines). The process remembers its own answers too, so
// with no file ("" or JIRIKI_CUDNN_CACHE=off) a process still chooses once per shape.
#pragma once
#include <array>
#include <optional>
#include <string>

namespace jiriki::training {

// How one convolution pass is computed.
enum class ConvRoute : int { LEGACY = 0, BARE = 1, IDENTITY = 2 };

// The passes in the order kept: the stem's forward and weight gradient, then the blocks' forward,
// weight gradient, data gradient, and data gradient adding the skip connection's.
enum ConvPassIndex : int { STEM_FORWARD, STEM_FILTER, BLOCK_FORWARD, BLOCK_FILTER, BLOCK_DATA, BLOCK_DATA_ADD, PASSES };

// The legacy algorithms of one convolution (cuDNN's enum values) and each pass's math type.
struct LegacyConvAlgorithms {
  int forward = 0, data = 0, filter = 0;
  int forward_math = 0, data_math = 0, filter_math = 0;
  bool operator==(const LegacyConvAlgorithms&) const = default;
};

struct TrainConvChoices {
  std::array<ConvRoute, PASSES> route{};
  LegacyConvAlgorithms stem, block;
  bool operator==(const TrainConvChoices&) const = default;
};

// One line of the file for `key` (no spaces in it), without the line break.
std::string format_conv_choices(const std::string& key, const TrainConvChoices& c);
// The choices of a line if it is one for `key`.
std::optional<TrainConvChoices> parse_conv_choices(const std::string& line, const std::string& key);

// The choices this process made or read for `key`, else the last line for it in `path` ("": none).
std::optional<TrainConvChoices> kept_conv_choices(const std::string& path, const std::string& key);
// Remembers `c` for `key` in this process and appends it to `path` (creating its directory; "":
// none); false when the file cannot be written (the process still remembers).
bool keep_conv_choices(const std::string& path, const std::string& key, const TrainConvChoices& c);
// Forgets what this process made or read, so that the next set-up reads the file again (tests).
void forget_conv_choices();

}  // namespace jiriki::training
