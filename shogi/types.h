// Basic shogi types: colours, squares, pieces, hands and the 16-bit move.
// Square and piece numbering follow Apery/dlshogi so that move16, hcpe and the network's
// encoding mean the same thing as the community's data.
#pragma once
#include <array>
#include <cstdint>
#include <string>

namespace jiriki {

enum Color : int { BLACK = 0, WHITE = 1, COLOR_NB = 2 };
constexpr Color operator~(Color c) { return Color(c ^ 1); }

// Square index: sq = (file - 1) * 9 + (rank - 1); file 1..9, rank a..i = 1..9.
// So 1a = 0, 1i = 8, 2a = 9, ..., 9i = 80.
using Square = int;
constexpr Square SQ_NB = 81;
constexpr Square SQ_NONE = 81;
constexpr int file_of(Square s) { return s / 9; }  // 0 = file 1
constexpr int rank_of(Square s) { return s % 9; }  // 0 = rank a (White's back rank)
constexpr Square make_square(int file, int rank) { return file * 9 + rank; }
constexpr bool on_board(int file, int rank) { return file >= 0 && file < 9 && rank >= 0 && rank < 9; }
constexpr Square rotate180(Square s) { return 80 - s; }
// Relative rank: 0 is the far rank for colour c (rank a for Black, rank i for White).
constexpr int relative_rank(Color c, int rank) { return c == BLACK ? rank : 8 - rank; }
constexpr bool in_promotion_zone(Color c, Square s) { return relative_rank(c, rank_of(s)) < 3; }

enum PieceType : int {
  NO_PIECE_TYPE = 0,
  PAWN = 1,
  LANCE,
  KNIGHT,
  SILVER,
  BISHOP,
  ROOK,
  GOLD,
  KING,
  PRO_PAWN,
  PRO_LANCE,
  PRO_KNIGHT,
  PRO_SILVER,
  HORSE,
  DRAGON,
  PIECE_TYPE_NB = 15,
  PROMOTED = 8,      // added to an unpromoted type to promote it
  HAND_TYPE_NB = 8,  // hand pieces are PAWN..GOLD (1..7)
};
constexpr bool can_promote(PieceType pt) { return pt >= PAWN && pt <= ROOK; }
constexpr PieceType promoted(PieceType pt) { return PieceType(pt + PROMOTED); }
// The type a piece returns to when captured.
constexpr PieceType unpromoted(PieceType pt) { return pt > KING ? PieceType(pt - PROMOTED) : pt; }

// Piece = type | colour << 4. NO_PIECE = 0.
enum Piece : int { NO_PIECE = 0, PIECE_NB = 32 };
constexpr Piece make_piece(Color c, PieceType pt) { return Piece(pt | (c << 4)); }
constexpr PieceType type_of(Piece p) { return PieceType(p & 15); }
constexpr Color color_of(Piece p) { return Color(p >> 4); }

// Pieces in hand, one count per hand type PAWN..GOLD (index 0 unused).
struct Hand {
  std::array<uint8_t, HAND_TYPE_NB> count{};
  int operator[](PieceType pt) const { return count[pt]; }
  bool empty() const { return (count[1] | count[2] | count[3] | count[4] | count[5] | count[6] | count[7]) == 0; }
  bool operator==(const Hand&) const = default;
};
// Number of pieces of each hand type in a full set (both sides together).
constexpr std::array<int, HAND_TYPE_NB> MAX_PIECES = {0, 18, 4, 4, 4, 2, 2, 4};

// A move in dlshogi/cshogi's move16 layout: bits 0-6 destination, bits 7-13 origin
// (for a drop: 81 + piece type - 1), bit 14 promotion. 0 is no move.
enum Move : uint16_t { MOVE_NONE = 0 };
constexpr Move make_move(Square from, Square to, bool promote = false) {
  return Move(to | (from << 7) | (promote ? 1 << 14 : 0));
}
constexpr Move make_drop(PieceType pt, Square to) { return Move(to | ((SQ_NB + pt - 1) << 7)); }
constexpr Square move_to(Move m) { return m & 0x7f; }
constexpr Square move_from(Move m) { return (m >> 7) & 0x7f; }
constexpr bool is_drop(Move m) { return move_from(m) >= SQ_NB; }
constexpr bool is_promotion(Move m) { return (m >> 14) & 1; }
constexpr PieceType drop_type(Move m) { return PieceType(move_from(m) - SQ_NB + 1); }

// Characters used by SFEN for each unpromoted type (upper case = Black).
constexpr const char* PIECE_CHARS = " PLNSBRGK";

// Square name in USI notation, e.g. "7g".
inline std::string square_to_usi(Square s) { return std::string{char('1' + file_of(s)), char('a' + rank_of(s))}; }

}  // namespace jiriki
