// The size of the training window: KataGo's shuffler (python/shuffle.py) trains on the newest
// rows only, a window that starts at `min_rows` and grows with the rows made so far, first by
// `expand_per_row` window rows per new row, then more slowly, as a power `taper_exponent` of the
// total. Old self-play, made by weaker networks, so leaves the window ever more slowly.
#pragma once
#include <cstdint>

namespace jiriki::loop {

struct WindowConfig {
  int64_t min_rows = 50000;      // the window never holds fewer rows (while there are that many)
  double expand_per_row = 0.4;   // the window's initial growth per row beyond min_rows
  double taper_exponent = 0.65;  // asymptotically the window grows as total^taper_exponent
  double taper_scale = 0;        // rows at which the power law takes over (0: min_rows)
  int64_t max_rows = 0;          // a cap (0: none)
};

// The window for `total_rows` rows made so far:
//   s = taper_scale (min_rows when 0), x = total_rows - min_rows + s,
//   window = (x^e - s^e) / (e s^(e-1)) * expand_per_row + min_rows,
// at least min_rows, at most max_rows when set, and never more than total_rows.
int64_t window_rows(int64_t total_rows, const WindowConfig& c);

}  // namespace jiriki::loop
