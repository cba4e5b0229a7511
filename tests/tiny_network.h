// A tiny untrained network behind an evaluation queue, for searches whose every claim the rules
// decide (mates, repetitions, declarations, the ply limit), not the network.
#pragma once
#include <memory>

#include "engine/search/eval_queue.h"
#include "nn/model.h"

namespace jiriki::testing {

// One block of 16 channels, seeded; on oneDNN's CPU backend where it is compiled in, else the
// reference one; one thread for the network, so that the search threads keep the other cores.
inline std::unique_ptr<search::EvalQueue> tiny_eval_queue(int max_batch) {
  nn::Architecture a;
  a.blocks = 1;
  a.channels = 16;
  nn::Model model(a);
  nn::init_model(model, 7);
  nn::BackendOptions o;
#if JIRIKI_HAVE_DNNL
  o.kind = nn::BackendKind::CPU;
#else
  o.kind = nn::BackendKind::REFERENCE;
#endif
  o.max_batch = max_batch;
  o.threads = 1;
  return search::make_eval_queue(model, o, 1);
}

}  // namespace jiriki::testing
