// `jiriki loop`: the overnight training loop. Generation 0 is a fresh network (step init), a model
// file (init_model) or one trained on a teacher's games (teacher_games, teacher_train); then
// generation after generation: selfplay with the best network, holdout positions, train on a
// sliding window of the newest positions (each network of the config: the main one, self-play's,
// and the other shapes of `networks`, each fine-tuning its best or training afresh, or both), gate
// (each candidate against its network's best; the better one that passes is chosen), eval_first
// (against generation 0), eval_anchor (against fixed outside references: the anchor and `anchors`),
// promote, record (metrics, TensorBoard, plots). Every phase is a child process; RUN/state.json
// (written atomically) names the step in flight, so a loop started again redoes only that step.
#pragma once
#include <atomic>
#include <iosfwd>
#include <string>
#include <vector>

#include "loop/config.h"

namespace jiriki::loop {

// Runs (or continues) the loop in `run_dir` until `generations` are done or `stop` is set (Ctrl-C:
// the phase in flight is interrupted, and redone by the next start). The config is RUN/config.json,
// written by the first start. Returns the exit code: 0 done, 130 stopped. Throws
// std::runtime_error on a failed phase (naming its log) or a bad run directory.
int run_loop(const std::string& run_dir, const std::atomic<bool>& stop, std::ostream& out);

// `jiriki loop eval`: plays the matches against generation 0 and against the anchors that the run's
// finished generations lack (a run made with none, to be evaluated on other machines' idle cores),
// with `overrides` (config keys such as eval_first_games, anchor, backend, gate_concurrency) laid
// over RUN/config.json for these matches only. Returns 0, or 130 when stopped.
int evaluate_run(const std::string& run_dir, const nlohmann::json& overrides, const std::atomic<bool>& stop,
                 std::ostream& out);

// `jiriki loop worker`: self-play with the run's current best network into
// RUN/selfplay/workers/NAME, round after round of worker_positions, until the run's generations
// are done or `stop` is set. `selfplay_extra` is passed to jiriki selfplay (e.g. "--gpus 1").
int run_worker(const std::string& run_dir, const std::string& name, const std::string& selfplay_extra,
               const std::atomic<bool>& stop, std::ostream& out);

// Writes RUN/config.json (atomically) for a new run or a changed one.
void write_config(const std::string& run_dir, const Config& c);
// RUN/config.json, or the defaults when there is none yet.
Config read_config(const std::string& run_dir);

// `total` positions shared out over `parts` self-play processes (at least one): equal shares, the
// first ones one more where it does not divide; they add up to total (0 each for total <= 0).
std::vector<int64_t> split_positions(int64_t total, int parts);

// Training positions (moves with search targets) in every .hcpe3 file under `path` (a file or a
// directory, searched recursively; 0 when it does not exist). Each file is read once: its count is
// remembered by path, size and time, as record files are written whole and never changed (not thread-safe).
int64_t count_positions(const std::string& path);

}  // namespace jiriki::loop
