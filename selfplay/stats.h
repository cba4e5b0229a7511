// What self-play counts while it runs, and the two ways it reports it: a progress line for the
// terminal and a JSON line for the stats file (one object per report).
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <string>

namespace jiriki::selfplay {

// How a game ended.
enum class EndKind { MATE, RESIGN, SENNICHITE, PERPETUAL_CHECK, DECLARATION, MAX_MOVES, COUNT };
const char* end_kind_name(EndKind e);  // "mate", "resign", ...

// Counters shared by every game of the run (relaxed atomics: they only feed reports).
struct Counters {
  // While games run: moves played, of which searched with the full cap and recorded for training,
  // and the playouts of every search.
  std::atomic<int64_t> moves{0}, positions{0}, playouts{0};
  // When a game ends: games, their recorded training positions, winners (0 draw, 1 Black, 2 White,
  // as GameResult), how they ended.
  std::atomic<int64_t> games{0}, recorded_positions{0};
  // The sum of each finished game's training positions squared: with recorded_positions, the
  // length a game still running is expected to reach (selfplay.cpp, room_for_a_game).
  std::atomic<int64_t> recorded_positions_squared{0};
  std::array<std::atomic<int64_t>, 3> winners{};
  std::array<std::atomic<int64_t>, size_t(EndKind::COUNT)> ends{};
  // Games played with resignation disabled; in how many one side would have resigned; in how many
  // of those that side did not lose after all (a false resignation).
  std::atomic<int64_t> no_resign_games{0}, would_resign{0}, false_resign{0};
};

// A copy of the counters and of the network queues' figures at one moment.
struct Snapshot {
  double seconds = 0;  // since the start of the run
  int64_t moves = 0, positions = 0, playouts = 0;
  int64_t games = 0, recorded_positions = 0;
  std::array<int64_t, 3> winners{};
  std::array<int64_t, size_t(EndKind::COUNT)> ends{};
  int64_t no_resign_games = 0, would_resign = 0, false_resign = 0;
  int64_t nn_calls = 0, nn_positions = 0;  // network calls and positions evaluated, all GPUs
  int64_t nn_capacity = 0;                 // calls x the batch size: positions / this = batch fill
};

Snapshot snapshot(const Counters& c, double seconds, int64_t nn_calls, int64_t nn_positions, int64_t nn_capacity);

// One line for the terminal: totals, and rates over the interval since `prev`.
std::string progress_line(const Snapshot& now, const Snapshot& prev);
// One JSON object (no newline) with totals and interval rates.
std::string stats_json(const Snapshot& now, const Snapshot& prev);

}  // namespace jiriki::selfplay
