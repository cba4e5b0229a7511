// Time allocation per move (see time_manager.h).
#include "engine/search/time_manager.h"

#include <algorithm>

namespace jiriki::search {

TimeBudget allocate_time(const GoClock& clock, Color us, int game_ply, const TimeOptions& o) {
  TimeBudget b;
  b.network_delay = o.network_delay;
  // A GUI may send any 64-bit figure; beyond 2^40 ms (35 years) the sums below could overflow.
  const auto real = [](int64_t ms) { return std::clamp<int64_t>(ms, 0, int64_t(1) << 40); };
  if (clock.movetime > 0) {
    b.minimum = b.optimum = b.maximum = std::max<int64_t>(real(clock.movetime) - o.network_delay, 1);
    return b;
  }
  b.round_to_seconds = true;
  const int64_t time = real(clock.time[us]);
  const int64_t inc = real(clock.inc[us]);
  const int64_t byoyomi = real(clock.byoyomi[us]);
  // The increment is added to the clock for this move (as YaneuraOu reads binc and winc): with no
  // main time left, `btime 0 binc 2000` still gives two seconds.
  const int64_t remain = time + inc + byoyomi;
  // Never past this: NetworkDelay2 stays in hand; on a clock shorter than that, 30% of what is left.
  // A byoyomi period cannot be saved for later, so under byoyomi the margin shrinks to a tenth of the
  // period (never below NetworkDelay): at 1 s byoyomi the engine thinks 880 ms, not 30% of it.
  const int64_t margin =
      byoyomi > 0 ? std::min(o.network_delay2, std::max(o.network_delay, byoyomi / 10)) : o.network_delay2;
  const int64_t hard = std::max(remain - margin, remain * 3 / 10);
  // Our moves still to come, guessed from the move number: 40 at the start, never fewer than 20.
  const int64_t moves_left = std::clamp<int64_t>((160 - game_ply) / 2, 20, 40);
  // This move's fair share of the clock and of the increments still to come, this one's included.
  const int64_t share = (time + inc * moves_left) / moves_left;
  b.minimum = std::min(std::max<int64_t>(o.minimum_thinking_time, 0), hard);
  b.optimum = std::clamp(share * o.slow_mover / 100 + byoyomi, b.minimum, hard);
  // Room to think longer when the best move is unsettled, but never a quarter of the clock.
  b.maximum = std::clamp(std::min(share * 5, (time + inc) / 4) + byoyomi, b.optimum, hard);
  return b;
}

int64_t stop_time(const TimeBudget& b, int64_t elapsed) {
  if (elapsed >= b.maximum) return b.maximum;
  if (!b.round_to_seconds) return elapsed;
  int64_t end_of_second = (elapsed + b.network_delay + 999) / 1000 * 1000 - b.network_delay;
  return std::clamp(end_of_second, elapsed, b.maximum);
}

}  // namespace jiriki::search
