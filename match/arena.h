// Matches between jiriki networks in one process (as KataGo's gatekeeper plays both networks):
// no USI processes, and every GPU of the match busy. Per GPU there is one evaluation queue per
// network; worker threads each own many games, every game holding one search tree per side. A
// worker steps each of its games by one batch of new leaves of the side to move (as one search
// thread of the engine collects them), gathers the leaves of all its games that wait on the same
// network into one network call, and lands them. Games are the tournament's own: the same
// schedule, openings, colour swaps, referee (adjudicate.h), records, tally and SPRT (tournament.h),
// so that summary.json and the exit codes are those of a match of USI engines.
//
// Each side searches as the USI engine does at `go nodes N` with one search thread: the engine's
// PUCT constants and leaf mate search, batches of BatchSize leaves (virtual loss, collisions), N
// playout attempts a move, the tree kept from move to move, no noise and no temperature. Each
// game's moves depend only on its own trees and the network's answers, so they are the same
// whichever worker, GPU or batch plays them (when the backend's answer for a position does not
// depend on the batch around it). The engine's root mate thread runs beside its search for as
// long as the search lasts; here the same df-pn searches run with fixed node budgets instead (the
// root's own mate before the search, the opponent's mate after the chosen move), so that a game
// does not depend on timing.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "engine/search/search.h"
#include "match/engine_process.h"
#include "match/tournament.h"
#include "nn/backend.h"

namespace jiriki::match {

// How the arena uses the hardware.
struct ArenaSettings {
  nn::BackendKind backend = nn::BackendKind::CPU;
  nn::Precision precision = nn::Precision::AUTO;
  nn::CudaSettings cuda;
  std::vector<int> gpus = {0};  // games are spread over these (on a CPU backend: queues of their own)
  // Worker threads per GPU; 0: 16 on a GPU, 1 on the CPU. A worker waits for its batches' network
  // calls one after another, so more of them keep more calls in flight (8 to 16 on one H200: 1.48x
  // the moves a second, docs/loop.md); their df-pn searches also run in parallel.
  int threads = 0;
  int evaluators = 2;  // network calls in flight per network per GPU
  int batch = 0;       // most positions in one network call; 0: 512 on a GPU, 64 on the CPU
};

// One side's search in the arena: the USI engine's parameters and the arena's df-pn budgets.
struct ArenaEngine {
  search::SearchParams params;        // params.batch_size: leaves a search step adds (BatchSize)
  uint64_t root_mate_nodes = 16384;   // df-pn nodes on the root's own mate before a search; 0: none
  uint64_t threat_mate_nodes = 4096;  // df-pn nodes on the opponent's mate after the chosen move; 0: none
};

// The search of a model=PATH engine: the USI engine's defaults for `backend` at `go nodes N` with one
// search thread, except that on a GPU a search step adds 32 leaves where the USI engine's BatchSize
// 0 adds 128 per thread (at a few hundred playouts a move, 128 would be most of a move's search at
// once, every leaf chosen under the others' virtual loss); changed by the spec's option.NAME=VALUE for the search
// options the USI engine has (C_init, C_base, C_fpu_reduction, C_fpu_reduction_root, Softmax_Temperature,
// DrawValueBlack, DrawValueWhite, MaxMovesToDraw, EnteringKingRule, LeafMateSearchPly, RootMateSearch,
// RootThreatSearch, BatchSize, Resign_Threshold, ResignValue), in the same units. Options that shape
// a USI engine's process or clock, not its play at a node limit, are taken and ignored (Threads: the
// arena searches each tree as one thread; USI_Hash, USI_Ponder, MultiPV, PV_Interval, NetworkDelay,
// NetworkDelay2, MinimumThinkingTime, SlowMover). An error names any other option or a bad value.
std::optional<std::string> arena_engine(const EngineSpec& spec, nn::BackendKind backend, ArenaEngine& out);

// Whether an engine of the tournament is a network (model=PATH): then run_arena plays it.
bool any_network(const TournamentConfig& config);

// An error naming a network that has no node count (nodes=N of its own, or --tc nodes=N).
std::optional<std::string> network_nodes_error(const TournamentConfig& config);

// Plays the tournament of `config` (two or more engines, at least one of them model=PATH) in this
// process. config.concurrency is the games at once in all (spread over the GPUs). Networks play at
// their node count; USI engines (cmd=PATH) are processes of their own, one per engine and game slot
// (confined under --cpus-per-game), on the match's clock or node count, each move asked on a thread
// of its own while the worker steps its other games, so that a network's searches against them
// share the GPU's calls as between networks (the loop's anchor against gpsshogi). A model file
// that cannot be loaded makes its engine resign every move (as the USI engine does), with a warning
// on stderr. Throws std::invalid_argument for a configuration the arena cannot play; a network that
// fails mid-match, or a USI engine that cannot start three times in a row, stops it with
// result.error.
TournamentResult run_arena(const TournamentConfig& config, const ArenaSettings& settings);

}  // namespace jiriki::match
