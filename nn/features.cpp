// dlshogi's input encoding and move labels (see nn/features.h for the layout).
#include "nn/features.h"

#include <algorithm>

namespace jiriki::nn {

void encode_features(const Position& pos, float* planes) {
  std::fill(planes, planes + INPUT_SIZE, 0.0f);
  const Color us = pos.side_to_move();
  const Bitboard occ = pos.pieces();
  // View square: White's board is rotated so that the side to move always plays "up".
  auto view = [us](Square s) { return us == BLACK ? s : rotate180(s); };
  auto plane = [planes](int p) { return planes + p * SQUARES; };

  for (Color c : {BLACK, WHITE}) {
    const int side = c == us ? 0 : 1;
    const int base = side * PLANES_PER_SIDE;
    // attackers[v]: how many pieces of c attack view square v (the popcount of attackers_to).
    int attackers[SQ_NB] = {};
    for (Bitboard b = pos.pieces(c); b;) {
      Square s = b.pop_lsb();
      Piece p = pos.piece_on(s);
      plane(base + PIECE_PLANE + type_of(p) - 1)[view(s)] = 1.0f;
      float* attacked = plane(base + ATTACK_PLANE + type_of(p) - 1);
      for (Bitboard a = bb::attacks(p, s, occ); a;) {
        Square v = view(a.pop_lsb());
        attacked[v] = 1.0f;
        ++attackers[v];
      }
    }
    for (Square v = 0; v < SQ_NB; ++v)
      for (int k = 0; k < std::min(MAX_ATTACK_COUNT, attackers[v]); ++k) plane(base + ATTACK_COUNT_PLANE + k)[v] = 1.0f;
    const Hand& hand = pos.hand(c);
    for (int i = 0; i < 7; ++i) {
      int n = std::min(hand[HAND_ORDER[i]], HAND_CAP[i]);
      float* first = plane(HAND_PLANE + side * HAND_PLANES_PER_SIDE + HAND_GROUP_START[i]);
      std::fill(first, first + n * SQUARES, 1.0f);
    }
  }
  if (pos.in_check()) std::fill(plane(CHECK_PLANE), plane(CHECK_PLANE) + SQUARES, 1.0f);
}

int move_to_label(Move m, Color us) {
  auto view = [us](Square s) { return us == BLACK ? s : rotate180(s); };
  const Square to = view(move_to(m));
  if (is_drop(m)) return SQUARES * (DROP_LABEL + drop_type(m) - 1) + to;

  const Square from = view(move_from(m));
  // df > 0: towards file 9 (left for the side to move); dr < 0: towards rank a (up).
  const int df = file_of(to) - file_of(from);
  const int dr = rank_of(to) - rank_of(from);
  int label;
  if (dr == -2 && (df == 1 || df == -1)) label = df == 1 ? 8 : 9;  // knight-left, knight-right
  else if (dr < 0) label = df == 0 ? 0 : df > 0 ? 1 : 2;           // up, up-left, up-right
  else if (dr == 0) label = df > 0 ? 3 : 4;                        // left, right
  else label = df == 0 ? 5 : df > 0 ? 6 : 7;                       // down, down-left, down-right
  if (is_promotion(m)) label += NUM_DIRECTION_LABELS;
  return SQUARES * label + to;
}

}  // namespace jiriki::nn
