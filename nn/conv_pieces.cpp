#include "nn/conv_pieces.h"

#include <algorithm>
#include <stdexcept>

namespace jiriki::nn {

PieceGeometry piece_geometry(BoardPiece piece, int kernel) {
  if (kernel != 3 && piece != BoardPiece::WHOLE)
    throw std::invalid_argument("board pieces other than WHOLE are for 3x3 convolutions");
  PieceGeometry g{};
  // Output rectangle and kernel taps; the input window and the padding follow from them.
  auto set = [&](int r, int rs, int c, int cs, int tr, int trs, int tc, int tcs) {
    g.out_row = r, g.out_rows = rs, g.out_col = c, g.out_cols = cs;
    g.tap_row = tr, g.tap_rows = trs, g.tap_col = tc, g.tap_cols = tcs;
  };
  switch (piece) {
    case BoardPiece::WHOLE: set(0, 9, 0, 9, 0, kernel, 0, kernel); break;
    case BoardPiece::INTERIOR: set(1, 7, 1, 7, 0, 3, 0, 3); break;
    case BoardPiece::TOP: set(0, 1, 0, 9, 1, 2, 0, 3); break;
    case BoardPiece::BOTTOM: set(8, 1, 0, 9, 0, 2, 0, 3); break;
    case BoardPiece::LEFT: set(1, 7, 0, 1, 0, 3, 1, 2); break;
    case BoardPiece::RIGHT: set(1, 7, 8, 1, 0, 3, 0, 2); break;
  }
  // Along one axis: output squares [o, o + n) read input squares [o + t - k/2, o + n - 1 + t + ts - 1 - k/2];
  // what falls off the board is padding.
  auto axis = [&](int o, int n, int t, int ts, int& in, int& ins, int& pad_lo, int& pad_hi) {
    const int lo = o + t - kernel / 2, hi = o + n - 1 + t + ts - 1 - kernel / 2;
    in = std::max(lo, 0);
    ins = std::min(hi, 8) - in + 1;
    pad_lo = in - lo;
    pad_hi = hi - std::min(hi, 8);
  };
  axis(g.out_row, g.out_rows, g.tap_row, g.tap_rows, g.in_row, g.in_rows, g.pad_top, g.pad_bottom);
  axis(g.out_col, g.out_cols, g.tap_col, g.tap_cols, g.in_col, g.in_cols, g.pad_left, g.pad_right);
  return g;
}

const char* piece_name(BoardPiece piece) {
  switch (piece) {
    case BoardPiece::WHOLE: return "whole";
    case BoardPiece::INTERIOR: return "interior";
    case BoardPiece::TOP: return "top";
    case BoardPiece::BOTTOM: return "bottom";
    case BoardPiece::LEFT: return "left";
    case BoardPiece::RIGHT: return "right";
  }
  return "?";
}

}  // namespace jiriki::nn
