// The batch tuner's measured step-time models kept on disk from run to run, as the cuDNN choices are
// (nn/cuda/fused_conv.cpp): timing two batches costs a run of `--batch auto` a device set up for a
// batch it may never use and a few seconds before its first step (2.9 s on two H200s), which a later
// run on the same machine, network and replicas need not pay again.
//
// One line a setting, tab-separated: "jiriki-tuner-1", the key, then alpha_c, beta_c, t_n (seconds)
// and gamma. Of two lines for one key the later wins; a line that does not parse is skipped, and a
// file that cannot be read or written only costs the timing. Where: $JIRIKI_TUNER_CACHE, else
// ~/.cache/jiriki/batch-tuner.txt (common/platform.h: user_cache_file); JIRIKI_TUNER_CACHE=off keeps
// nothing. Delete the file (or the key's lines) to time again, after changing the hardware, say.
#pragma once
#include <optional>
#include <string>

#include "training/batch_tuner.h"

namespace jiriki::training {

// The file the trainer uses ("" : none).
std::string tuner_file_path();

// The model last kept for `key` in `path`, if any (key: any text without tabs or line breaks).
std::optional<StepTimeModel> read_step_time_model(const std::string& path, const std::string& key);

// Appends the model for `key` (creating the directory); false when the file cannot be written.
bool keep_step_time_model(const std::string& path, const std::string& key, const StepTimeModel& model);

}  // namespace jiriki::training
