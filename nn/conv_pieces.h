// A 3x3 convolution on the 9x9 board, padded by one square, computes 729 taps per output channel
// and position, 104 of which read the zero padding. The border squares are 32 of 81, so those taps
// are 14% of the arithmetic, and on a GPU at its power cap they cost as much as the others: on an
// H100 at batch 1024, cuDNN (through PyTorch, scripts/pad_split_probe.py) ran the interior's
// pad-free convolution (441 taps) in 0.0697 ms against 0.1110 ms for the padded one (729 taps),
// 0.63 of the time for 0.60 of the taps, both at the 700 W cap. Cutting the board into pieces, each a
// rectangle of output squares that uses only the kernel taps that stay on the board for all of its
// squares, leaves 633 taps:
//
//   WHOLE     all 81 squares, all 3x3 taps, padding 1 on every side (729 taps)
//   INTERIOR  rows 1-7 x files 1-7, all 3x3 taps, no padding        (441)
//   TOP       row 0, all files, kernel rows 1-2, padding 1 left and right (54)
//   BOTTOM    row 8, all files, kernel rows 0-1, padding 1 left and right (54)
//   LEFT      rows 1-7, file 0, kernel files 1-2, no padding        (42)
//   RIGHT     rows 1-7, file 8, kernel files 0-1, no padding        (42)
//
// The pieces' outputs are disjoint and cover the board. Each piece is an ordinary convolution on a
// window of the NHWC board tensor (same strides, an offset pointer) with its own slice of the
// weights, which is what a backend needs to run it.
#pragma once
#include <cstddef>
#include <stdexcept>
#include <vector>

namespace jiriki::nn {

enum class BoardPiece { WHOLE, INTERIOR, TOP, BOTTOM, LEFT, RIGHT };
// The pieces that together compute a 3x3 convolution without padded taps.
constexpr BoardPiece SPLIT_PIECES[5] = {BoardPiece::INTERIOR, BoardPiece::TOP, BoardPiece::BOTTOM, BoardPiece::LEFT,
                                        BoardPiece::RIGHT};

// Where a piece sits. Rows and files are board coordinates 0..8 in the tensor's H and W order.
struct PieceGeometry {
  int out_row, out_rows, out_col, out_cols;  // output squares
  int tap_row, tap_rows, tap_col, tap_cols;  // kernel rows and columns used (0..kernel-1)
  int in_row, in_rows, in_col, in_cols;      // input squares read
  int pad_top, pad_bottom, pad_left, pad_right;
};

// The geometry of `piece` for a kernel x kernel convolution (padding kernel / 2). Pieces other than
// WHOLE exist for kernel 3 only.
PieceGeometry piece_geometry(BoardPiece piece, int kernel);

// The slice of KRSC weights [out][kernel][kernel][in] a piece uses: [out][tap_rows][tap_cols][in]
// (T: float, or a backend's 16-bit storage).
template <class T>
std::vector<T> piece_weights(const std::vector<T>& krsc, int out, int in, int kernel, BoardPiece piece) {
  if (krsc.size() != size_t(out) * kernel * kernel * in) throw std::invalid_argument("piece_weights: size mismatch");
  const PieceGeometry g = piece_geometry(piece, kernel);
  std::vector<T> w;
  w.reserve(size_t(out) * g.tap_rows * g.tap_cols * in);
  for (int o = 0; o < out; ++o)
    for (int r = g.tap_row; r < g.tap_row + g.tap_rows; ++r)
      for (int c = g.tap_col; c < g.tap_col + g.tap_cols; ++c) {
        const auto first = krsc.begin() + ((size_t(o) * kernel + r) * kernel + c) * in;
        w.insert(w.end(), first, first + in);
      }
  return w;
}

const char* piece_name(BoardPiece piece);

}  // namespace jiriki::nn
