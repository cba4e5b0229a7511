// The training runs of the tests: small networks, quiet, at a constant learning rate.
#pragma once
#include <string>

#include "training/trainer.h"

namespace jiriki::training::testing {

// A run on `data` exporting to `out`: a network of `blocks` x `channels`, `batch` positions a
// step, `optimizer` at the constant learning rate `lr` with no weight decay, no progress lines.
// Each test sets what it measures on top.
inline TrainConfig small_train_config(const std::string& data, const std::string& out, int blocks, int channels,
                                      int batch, OptimizerKind optimizer, double lr) {
  TrainConfig c;
  c.data = {data};
  c.model_out = out;
  c.arch.blocks = blocks;
  c.arch.channels = channels;
  c.batch = batch;
  c.quiet = true;
  c.optimizer.kind = optimizer;
  c.optimizer.weight_decay = 0;
  c.schedule.kind = Schedule::CONSTANT;
  c.schedule.lr = lr;
  return c;
}

}  // namespace jiriki::training::testing
