#include "loop/window.h"

#include <algorithm>
#include <cmath>

namespace jiriki::loop {

int64_t window_rows(int64_t total_rows, const WindowConfig& c) {
  const double s = c.taper_scale > 0 ? c.taper_scale : double(std::max<int64_t>(c.min_rows, 1));
  const double e = c.taper_exponent;
  const double x = double(total_rows - c.min_rows) + s;
  // Below min_rows x < s: the power law would shrink the window; min_rows holds instead.
  const double grown = x > s ? (std::pow(x, e) - std::pow(s, e)) / (e * std::pow(s, e - 1)) * c.expand_per_row : 0.0;
  int64_t w = int64_t(grown) + c.min_rows;
  if (c.max_rows > 0) w = std::min(w, c.max_rows);
  return std::clamp<int64_t>(w, 0, total_rows);
}

}  // namespace jiriki::loop
