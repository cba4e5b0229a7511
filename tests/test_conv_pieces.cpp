// The board pieces (nn/conv_pieces.h) that compute a 3x3 convolution without its padded taps:
// they cover every on-board tap of every output square exactly once, and a convolution computed
// piece by piece, each on its input window with its slice of the weights, equals the padded
// convolution of nn/layers.h.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "nn/conv_pieces.h"
#include "nn/layers.h"

using namespace jiriki::nn;

TEST_CASE("board pieces: every on-board tap once, 633 taps computed of 729", "[nn][pieces]") {
  int covered[81][3][3] = {};
  int computed = 0, padded = 0;
  for (BoardPiece p : SPLIT_PIECES) {
    const PieceGeometry g = piece_geometry(p, 3);
    INFO(piece_name(p));
    // The window and its padding give back the output rectangle (stride 1).
    CHECK(g.in_rows + g.pad_top + g.pad_bottom - g.tap_rows + 1 == g.out_rows);
    CHECK(g.in_cols + g.pad_left + g.pad_right - g.tap_cols + 1 == g.out_cols);
    for (int r = g.out_row; r < g.out_row + g.out_rows; ++r)
      for (int c = g.out_col; c < g.out_col + g.out_cols; ++c)
        for (int tr = g.tap_row; tr < g.tap_row + g.tap_rows; ++tr)
          for (int tc = g.tap_col; tc < g.tap_col + g.tap_cols; ++tc) {
            ++computed;
            const int ir = r + tr - 1, ic = c + tc - 1;
            if (ir < 0 || ir > 8 || ic < 0 || ic > 8) {
              ++padded;
              continue;
            }
            // An on-board input square lies in the piece's window.
            CHECK((ir >= g.in_row && ir < g.in_row + g.in_rows && ic >= g.in_col && ic < g.in_col + g.in_cols));
            ++covered[r * 9 + c][tr][tc];
          }
  }
  // 25 on-board taps per axis: 8 + 9 + 8.
  CHECK(computed - padded == 625);
  CHECK(computed == 633);  // the corners of the top and bottom rows keep 2 padded taps each
  for (int sq = 0; sq < 81; ++sq)
    for (int tr = 0; tr < 3; ++tr)
      for (int tc = 0; tc < 3; ++tc) {
        const int ir = sq / 9 + tr - 1, ic = sq % 9 + tc - 1;
        const bool on_board = ir >= 0 && ir <= 8 && ic >= 0 && ic <= 8;
        INFO("square " << sq << " tap " << tr << "," << tc);
        CHECK(covered[sq][tr][tc] == (on_board ? 1 : 0));
      }
  const PieceGeometry whole = piece_geometry(BoardPiece::WHOLE, 3);
  CHECK((whole.in_rows == 9 && whole.pad_top == 1 && whole.pad_bottom == 1 && whole.pad_right == 1));
  const PieceGeometry one = piece_geometry(BoardPiece::WHOLE, 1);
  CHECK((one.tap_rows == 1 && one.pad_top == 0 && one.pad_left == 0 && one.in_cols == 9));
  CHECK_THROWS_AS(piece_geometry(BoardPiece::TOP, 1), std::invalid_argument);
}

TEST_CASE("board pieces: the convolution piece by piece equals the padded convolution", "[nn][pieces]") {
  const int n = 2, cin = 5, cout = 4;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> x(size_t(n) * cin * 81), w_oihw(size_t(cout) * cin * 9), bias(cout);
  for (float& v : x) v = normal(rng);
  for (float& v : w_oihw) v = normal(rng);
  for (float& v : bias) v = normal(rng);
  std::vector<float> want(size_t(n) * cout * 81);
  conv_forward(want.data(), x.data(), w_oihw.data(), bias.data(), n, cin, cout, 3);

  // KRSC weights, as the GPU backend keeps them, sliced per piece; each piece a direct loop over its
  // window (NCHW here), with the padding the geometry names.
  std::vector<float> krsc(w_oihw.size());
  for (int o = 0; o < cout; ++o)
    for (int i = 0; i < cin; ++i)
      for (int k = 0; k < 9; ++k) krsc[(size_t(o) * 9 + k) * cin + i] = w_oihw[(size_t(o) * cin + i) * 9 + k];
  std::vector<float> got(want.size(), std::nanf(""));
  for (BoardPiece p : SPLIT_PIECES) {
    const PieceGeometry g = piece_geometry(p, 3);
    const std::vector<float> pw = piece_weights(krsc, cout, cin, 3, p);
    REQUIRE(pw.size() == size_t(cout) * g.tap_rows * g.tap_cols * cin);
    for (int b = 0; b < n; ++b)
      for (int o = 0; o < cout; ++o)
        for (int r = 0; r < g.out_rows; ++r)
          for (int c = 0; c < g.out_cols; ++c) {
            double sum = bias[o];
            for (int kr = 0; kr < g.tap_rows; ++kr)
              for (int kc = 0; kc < g.tap_cols; ++kc) {
                const int wr = r + kr - g.pad_top, wc = c + kc - g.pad_left;  // in the window
                if (wr < 0 || wr >= g.in_rows || wc < 0 || wc >= g.in_cols) continue;
                const int sq = (g.in_row + wr) * 9 + g.in_col + wc;
                for (int i = 0; i < cin; ++i)
                  sum += double(pw[((size_t(o) * g.tap_rows + kr) * g.tap_cols + kc) * cin + i]) *
                         x[(size_t(b) * cin + i) * 81 + sq];
              }
            got[(size_t(b) * cout + o) * 81 + (g.out_row + r) * 9 + g.out_col + c] = float(sum);
          }
  }
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i);
    REQUIRE(std::abs(got[i] - want[i]) <= 1e-4f * (1.0f + std::abs(want[i])));
  }
}
