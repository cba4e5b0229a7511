// dlshogi's input encoding and move labels (see nn/features.h for the layout).
#include "nn/features.h"

#include <algorithm>

namespace jiriki::nn {

namespace {

// Computes the planes of pos and marks each element that is 1 with set(first, count): `count`
// consecutive elements from index `first`. Every other element is 0. One definition for the float
// and the packed encodings.
template <class Set>
void encode(const Position& pos, Set set) {
  const Color us = pos.side_to_move();
  const Bitboard occ = pos.pieces();
  // View square: White's board is rotated so that the side to move always plays "up".
  auto view = [us](Square s) { return us == BLACK ? s : rotate180(s); };
  auto plane = [](int p) { return p * SQUARES; };

  for (Color c : {BLACK, WHITE}) {
    const int side = c == us ? 0 : 1;
    const int base = side * PLANES_PER_SIDE;
    // attackers[v]: how many pieces of c attack view square v (the popcount of attackers_to).
    int attackers[SQ_NB] = {};
    for (Bitboard b = pos.pieces(c); b;) {
      Square s = b.pop_lsb();
      Piece p = pos.piece_on(s);
      set(plane(base + PIECE_PLANE + type_of(p) - 1) + view(s), 1);
      const int attacked = plane(base + ATTACK_PLANE + type_of(p) - 1);
      for (Bitboard a = bb::attacks(p, s, occ); a;) {
        Square v = view(a.pop_lsb());
        set(attacked + v, 1);
        ++attackers[v];
      }
    }
    for (Square v = 0; v < SQ_NB; ++v)
      for (int k = 0; k < std::min(MAX_ATTACK_COUNT, attackers[v]); ++k)
        set(plane(base + ATTACK_COUNT_PLANE + k) + v, 1);
    const Hand& hand = pos.hand(c);
    for (int i = 0; i < 7; ++i) {
      int n = std::min(hand[HAND_ORDER[i]], HAND_CAP[i]);
      set(plane(HAND_PLANE + side * HAND_PLANES_PER_SIDE + HAND_GROUP_START[i]), n * SQUARES);
    }
  }
  if (pos.in_check()) set(plane(CHECK_PLANE), SQUARES);
}

}  // namespace

void encode_features(const Position& pos, float* planes) {
  std::fill(planes, planes + INPUT_SIZE, 0.0f);
  encode(pos, [planes](int first, int count) { std::fill(planes + first, planes + first + count, 1.0f); });
}

void encode_packed_features(const Position& pos, uint8_t* bits) {
  std::fill(bits, bits + PACKED_INPUT_BYTES, uint8_t(0));
  encode(pos, [bits](int first, int count) {
    for (int i = first; i < first + count; ++i) bits[i >> 3] |= uint8_t(1u << (i & 7));
  });
}

void unpack_features(const uint8_t* bits, int n, float* planes) {
  for (int p = 0; p < n; ++p, bits += PACKED_INPUT_BYTES, planes += INPUT_SIZE)
    for (int i = 0; i < INPUT_SIZE; ++i) planes[i] = float((bits[i >> 3] >> (i & 7)) & 1);
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

int mirror_policy_index(int index) {
  // Directions by label: up, up-left, up-right, left, right, down, down-left, down-right,
  // knight-left, knight-right; the image of each.
  static constexpr int MIRRORED_DIRECTION[NUM_DIRECTION_LABELS] = {0, 2, 1, 4, 3, 5, 7, 6, 9, 8};
  int label = index / SQUARES;
  const Square to = Square(index % SQUARES);
  if (label < DROP_LABEL)
    label = label - label % NUM_DIRECTION_LABELS + MIRRORED_DIRECTION[label % NUM_DIRECTION_LABELS];
  return SQUARES * label + mirror_square(to);
}

void mirror_features(float* planes) {
  for (int p = 0; p < INPUT_PLANES; ++p) {
    float* plane = planes + p * SQUARES;
    for (int file = 0; file < 4; ++file)
      for (int rank = 0; rank < 9; ++rank)
        std::swap(plane[make_square(file, rank)], plane[make_square(8 - file, rank)]);
  }
}

}  // namespace jiriki::nn
