// What a person watches while the loop runs: RUN/metrics.jsonl (one object per generation),
// TensorBoard event files in RUN/tensorboard and PNG plots in RUN/plots. All are rebuilt from the
// loop's state and the training logs, so redoing a generation's record after a kill rewrites
// them whole (atomically) rather than appending twice.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loop/tensorboard.h"

namespace jiriki::loop {

// The records of a `jiriki train` JSON-lines log of the given type ("train", "test", "done"),
// one per step: a step logged twice (a run resumed from an older checkpoint) keeps its last record.
std::vector<nlohmann::json> read_train_log(const std::string& path, const std::string& type);

// The generation's scalars: its record's figures at step = generation, and the training log's per
// step at the run's global training step (train_step_base + step).
std::vector<Scalar> generation_scalars(const nlohmann::json& record, const std::vector<nlohmann::json>& train_log,
                                       int64_t train_step_base);

// RUN/metrics.jsonl from every generation's record, written atomically.
void write_metrics(const std::string& run_dir, const nlohmann::json& history);
// RUN/tensorboard/events.out.tfevents.GGGGGGGGGG.jiriki for generation `record`.
void write_tensorboard(const std::string& run_dir, const nlohmann::json& record,
                       const std::vector<nlohmann::json>& train_log, int64_t train_step_base);
// RUN/plots/{loss,heldout,elo,positions_per_hour}.png with gnuplot. Returns "" or a warning
// (gnuplot missing or failing is not an error of the loop).
std::string draw_plots(const std::string& run_dir, const nlohmann::json& history);
// The plots of a run again, from RUN/state.json (e.g. a run copied from a machine without gnuplot).
// Throws when the state cannot be read; returns draw_plots' warning.
std::string redraw_plots(const std::string& run_dir);

}  // namespace jiriki::loop
