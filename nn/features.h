// The network's input planes and policy labels: dlshogi's encoding (FeatureSet::DLSHOGI_119), so
// that dlshogi's data and ours mean the same thing. Everything is seen from the side to move:
// when White moves, colours are swapped and squares rotated by 180 degrees (sq -> 80 - sq).
//
// Planes (each 81 floats, index = Square of the side-to-move view; 1.0 or 0.0):
//   side s = 0 (side to move) or 1 (opponent), board planes at 31 * s +
//     0..13   pieces of type P, L, N, S, B, R, G, K, +P, +L, +N, +S, +B, +R (PieceType - 1)
//     14..27  squares attacked by the pieces of that type (same order)
//     28..30  squares attacked by >= 1, >= 2, >= 3 of this side's pieces
//   hand planes at 62 + 28 * s: thermometer code of the pieces in hand in the order P(8), L(4),
//     N(4), S(4), G(4), B(2), R(2) (cap in brackets): k pieces fill the first min(k, cap) planes
//     of that piece's group with ones
//   118       all ones when the side to move is in check
//
// Policy index = 81 * label + to, with `to` in the side-to-move view and label:
//   0..9    board move without promotion, by direction from the side to move's view: up, up-left,
//           up-right, left, right, down, down-left, down-right, knight-left, knight-right
//           (left = towards file 9 for Black)
//   10..19  the same with promotion
//   20..26  drops of P, L, N, S, B, R, G (PieceType - 1)
#pragma once
#include <cstdint>

#include "nn/model.h"
#include "shogi/position.h"

namespace jiriki::nn {

// Plane numbers, for code that reads or writes planes directly (tests, the trainer's data loader).
constexpr int PIECE_PLANE = 0;          // + PieceType - 1
constexpr int ATTACK_PLANE = 14;        // + PieceType - 1
constexpr int ATTACK_COUNT_PLANE = 28;  // + k for ">= k + 1 attackers"
constexpr int PLANES_PER_SIDE = 31;     // board planes per side; opponent's start at 31
constexpr int MAX_ATTACK_COUNT = 3;
constexpr int HAND_PLANE = BOARD_PLANES;  // 62; opponent's hand starts at 62 + 28
constexpr int HAND_PLANES_PER_SIDE = 28;
constexpr int CHECK_PLANE = INPUT_PLANES - 1;  // 118
// Hand piece types in plane order, their caps, and the first plane of each group within a side.
constexpr PieceType HAND_ORDER[7] = {PAWN, LANCE, KNIGHT, SILVER, GOLD, BISHOP, ROOK};
constexpr int HAND_CAP[7] = {8, 4, 4, 4, 4, 2, 2};
constexpr int HAND_GROUP_START[7] = {0, 8, 12, 16, 20, 24, 26};

constexpr int NUM_DIRECTION_LABELS = 10;  // labels per promotion state of a board move
constexpr int DROP_LABEL = 20;            // + PieceType - 1

// Writes the INPUT_SIZE (119 x 81) floats of pos, NCHW for one position.
void encode_features(const Position& pos, float* planes);

// The same planes as bits, for the engine's and self-play's path to the network: every plane is 0
// or 1, so bit i (byte i / 8, bit i % 8) holds planes[i], in PACKED_INPUT_BYTES (nn/model.h; pad
// bits zero). A GPU backend copies and expands these on the device: 16x fewer bytes over PCIe than
// bf16 planes, and no host conversion.
void encode_packed_features(const Position& pos, uint8_t* bits);
// Expands n positions of packed planes into n x INPUT_SIZE floats.
void unpack_features(const uint8_t* bits, int n, float* planes);

// Policy index (0..2186) of a move (board move or drop) made by side `us`.
int move_to_label(Move m, Color us);

// Left-right mirror images, a data augmentation: shogi's rules are symmetric under file f -> 10 - f
// (only the start position is not), so the mirror image of a position has the mirrored value and
// policy. mirror_square maps a square to its image; mirror_policy_index maps a policy index to the
// index of the mirrored move (left and right swapped, drops unchanged); mirror_features flips every
// plane of one position's INPUT_SIZE floats in place (hand and check planes are uniform).
constexpr Square mirror_square(Square s) { return make_square(8 - file_of(s), rank_of(s)); }
int mirror_policy_index(int index);
void mirror_features(float* planes);

}  // namespace jiriki::nn
