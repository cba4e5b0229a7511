// Self-play at scale (issue 5). For each GPU: one evaluation queue with `evaluators` network
// calls in flight, and `threads` worker threads that each own `concurrent / threads` games. A
// worker steps every game it owns by a leaf or a few (selfplay/game.h), gathers the leaves of all
// of them into one batch, evaluates it through the queue and lands it; with several workers per
// GPU the CPU prepares the next batches while the GPU runs the current ones. Finished games go
// to the RecordWriter (hcpe3, optionally CSA); the main thread prints progress and appends a JSON
// line per report to NAME.stats.jsonl in the output directory.
#pragma once
#include <atomic>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "engine/network_setup.h"
#include "selfplay/game.h"
#include "selfplay/stats.h"

namespace jiriki::selfplay {

struct SelfPlayConfig {
  // The network and its backend: model file, backend (resolved by the command), batch (positions per
  // network call), evaluators (network calls in flight per GPU), CPU threads per evaluator (0: the
  // cores the workers leave, shared), precision, CUDA settings. Its `gpu` is replaced by each of `gpus`.
  engine::NetworkSetup network;
  std::string out_dir;            // records and stats go here
  std::string name = "selfplay";  // file name prefix
  int64_t games = 0;              // games to play (0: no limit)
  int64_t positions = 0;  // or: no new game once this many training positions are played (caps auto concurrency)
  double seconds = 0;     // or: stop after this long, dropping the games in progress
  GameSettings game;
  std::vector<int> gpus = {0};  // one queue per entry (the CPU backend takes one entry)
  int threads = 0;        // worker threads per GPU (0: on cuda 3/4 of the cores shared by the GPUs, at most 12 each;
                          // 1 on the CPU: set by `jiriki selfplay`)
  int concurrent = 0;     // games per GPU; 0: enough to fill every batch
  size_t hash_bytes = 0;  // node memory of all games together; 0: 8 MiB per game
  bool csa = false;       // also write CSA files
  int games_per_file = 100;
  double flush_seconds = 60;
  double report_seconds = 10;
};

struct SelfPlayResult {
  Snapshot totals;
  int64_t files = 0;          // hcpe3 files written
  int64_t games_written = 0;  // games in them
  bool stopped = false;       // ended by `stop` or the time limit rather than the quota
  std::string error;          // what failed (the network, a write), empty when nothing did
};

// Training positions a game is expected to make before any has finished: about 100 (games average
// about 100 plies), full_probability of them under the playout cap.
double expected_positions_per_game(const SelfPlayConfig& config);

// The training positions the running games are expected to add before they end (at least half a
// game each), from the finished games' count, positions and sum of squared positions, and the running
// games' count and positions so far; usual_game (expected_positions_per_game) stands in while fewer
// games have finished than run. Self-play under --positions starts a game only while the positions
// made and these fall short of the target.
double expected_remaining_positions(int64_t finished, int64_t recorded, int64_t recorded_squared, int64_t running,
                                    int64_t running_positions, double usual_game);

// The games per GPU `concurrent` = 0 stands for: enough that every worker fills its batches, or
// about one per 100 training positions a game makes (100 full_probability under the playout cap) of
// a --positions target when that is fewer.
int auto_concurrent(const SelfPlayConfig& config);

// Plays until the quota is met, `stop` is set (Ctrl-C), the time runs out or something fails.
// Games finished before then are always written. Progress lines go to `log`. Throws
// std::runtime_error for a bad configuration or model file.
SelfPlayResult run_selfplay(const SelfPlayConfig& config, const std::atomic<bool>& stop, std::ostream& log);

}  // namespace jiriki::selfplay
