// Time management: how long to think about one move under byoyomi, Fischer increments or sudden
// death, in the manner of YaneuraOu. A move gets a `minimum`, an `optimum` (where the search stops
// when the best move is settled) and a `maximum` (never passed; it keeps NetworkDelay2 in hand so
// that the move arrives before the clock runs out, but under a byoyomi shorter than ten times
// NetworkDelay2 only a tenth of the period or NetworkDelay, whichever is larger: a byoyomi cannot be
// saved, so it is used). A stop that falls inside a
// second is moved to the end of that second less NetworkDelay, since GUIs and servers charge whole
// seconds. All times are milliseconds from the moment the engine's clock started.
#pragma once
#include <cstdint>

#include "shogi/types.h"

namespace jiriki::search {

// The clock fields of a USI `go`.
struct GoClock {
  int64_t time[COLOR_NB] = {0, 0};     // btime, wtime: time left on each clock
  int64_t inc[COLOR_NB] = {0, 0};      // binc, winc: added to the clock for each move, this one's included
  int64_t byoyomi[COLOR_NB] = {0, 0};  // byoyomi (per move, after the clock runs out)
  int64_t movetime = 0;                // think exactly this long (0: not given)
};

// The USI options that shape the allocation.
struct TimeOptions {
  int64_t network_delay = 120;           // NetworkDelay: usual lag between GUI and engine
  int64_t network_delay2 = 1120;         // NetworkDelay2: the worst lag; kept in hand (see above)
  int64_t minimum_thinking_time = 2000;  // MinimumThinkingTime
  int slow_mover = 100;                  // SlowMover: percentage applied to the optimum
};

struct TimeBudget {
  int64_t minimum = 0, optimum = 0, maximum = 0;
  int64_t network_delay = 0;  // for rounding a stop to the end of a second
  bool round_to_seconds = false;
};

// The budget for the side `us` to move at SFEN move number `game_ply`.
TimeBudget allocate_time(const GoClock& clock, Color us, int game_ply, const TimeOptions& options);

// Having decided at `elapsed` that the search may stop, the time at which it actually stops: the
// end of the second being charged less NetworkDelay, but never past the maximum.
int64_t stop_time(const TimeBudget& budget, int64_t elapsed);

}  // namespace jiriki::search
