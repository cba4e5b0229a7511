// 81-square bitboards (one bit per square in a 128-bit integer, bit index = square) and the
// attack tables. Sliding attacks use rays: for each direction the nearest blocker is found with
// one bit scan, and the ray behind it is removed.
#pragma once
#include <bit>
#include <cstdint>

#include "shogi/types.h"

namespace jiriki {

struct Bitboard {
  unsigned __int128 v = 0;

  constexpr Bitboard() = default;
  constexpr explicit Bitboard(unsigned __int128 x) : v(x) {}
  static constexpr Bitboard square(Square s) { return Bitboard((unsigned __int128)1 << s); }

  constexpr explicit operator bool() const { return v != 0; }
  constexpr bool test(Square s) const { return (v >> s) & 1; }
  constexpr Bitboard operator&(Bitboard o) const { return Bitboard(v & o.v); }
  constexpr Bitboard operator|(Bitboard o) const { return Bitboard(v | o.v); }
  constexpr Bitboard operator^(Bitboard o) const { return Bitboard(v ^ o.v); }
  constexpr Bitboard operator~() const { return Bitboard(~v & ALL_MASK); }
  constexpr Bitboard& operator&=(Bitboard o) {
    v &= o.v;
    return *this;
  }
  constexpr Bitboard& operator|=(Bitboard o) {
    v |= o.v;
    return *this;
  }
  constexpr Bitboard& operator^=(Bitboard o) {
    v ^= o.v;
    return *this;
  }
  constexpr bool operator==(const Bitboard&) const = default;
  Bitboard andnot(Bitboard o) const { return Bitboard(v & ~o.v); }

  uint64_t lo() const { return uint64_t(v); }
  uint64_t hi() const { return uint64_t(v >> 64); }
  int popcount() const { return std::popcount(lo()) + std::popcount(hi()); }
  bool more_than_one() const { return (v & (v - 1)) != 0; }
  Square lsb() const { return lo() ? std::countr_zero(lo()) : 64 + std::countr_zero(hi()); }
  Square msb() const { return hi() ? 127 - std::countl_zero(hi()) : 63 - std::countl_zero(lo()); }
  Square pop_lsb() {
    Square s = lsb();
    v &= v - 1;
    return s;
  }

  static constexpr unsigned __int128 ALL_MASK = ((unsigned __int128)1 << 81) - 1;
};

constexpr Bitboard ALL_SQUARES{Bitboard::ALL_MASK};

namespace bb {
// Direction indices for rays. Squares grow with rank (towards White's side) and with file.
enum Dir { UP, DOWN, RIGHT, LEFT, UP_RIGHT, DOWN_LEFT, UP_LEFT, DOWN_RIGHT, DIR_NB };  // d ^ 1 is the opposite of d
// UP = towards rank a (Black's forward), RIGHT = towards file 1.

extern Bitboard RAY[DIR_NB][SQ_NB];
extern Bitboard STEP_ATTACKS[PIECE_NB][SQ_NB];  // non-sliding attacks by piece (colour-aware)
extern Bitboard BETWEEN[SQ_NB][SQ_NB];          // squares strictly between two aligned squares
extern Bitboard LINE[SQ_NB][SQ_NB];             // the whole line through two aligned squares
extern Bitboard FILE_BB[9];
extern Bitboard RANK_BB[9];
extern Bitboard ZONE[COLOR_NB];                 // promotion zone of each colour
extern Bitboard LANCE_PSEUDO[COLOR_NB][SQ_NB];  // lance attacks on an empty board
extern Bitboard BISHOP_PSEUDO[SQ_NB];
extern Bitboard ROOK_PSEUDO[SQ_NB];

void init();  // fills the tables; called once from Position::init()

// Rays whose square index increases from the origin scan with lsb, the others with msb.
constexpr bool positive(Dir d) { return d == DOWN || d == LEFT || d == UP_LEFT || d == DOWN_LEFT; }

template <Dir D>
inline Bitboard ray_attacks(Square s, Bitboard occ) {
  Bitboard ray = RAY[D][s];
  Bitboard blockers = ray & occ;
  if (!blockers) return ray;
  Square b = positive(D) ? blockers.lsb() : blockers.msb();
  return ray ^ RAY[D][b];
}

inline Bitboard lance_attacks(Color c, Square s, Bitboard occ) {
  return c == BLACK ? ray_attacks<UP>(s, occ) : ray_attacks<DOWN>(s, occ);
}
inline Bitboard bishop_attacks(Square s, Bitboard occ) {
  return ray_attacks<UP_RIGHT>(s, occ) | ray_attacks<UP_LEFT>(s, occ) | ray_attacks<DOWN_RIGHT>(s, occ) |
         ray_attacks<DOWN_LEFT>(s, occ);
}
inline Bitboard rook_attacks(Square s, Bitboard occ) {
  return ray_attacks<UP>(s, occ) | ray_attacks<DOWN>(s, occ) | ray_attacks<RIGHT>(s, occ) | ray_attacks<LEFT>(s, occ);
}
inline Bitboard step_attacks(Piece p, Square s) { return STEP_ATTACKS[p][s]; }
inline Bitboard king_attacks(Square s) { return STEP_ATTACKS[make_piece(BLACK, KING)][s]; }

// Attacks of any piece standing on s with the given occupancy.
inline Bitboard attacks(Piece p, Square s, Bitboard occ) {
  switch (type_of(p)) {
    case LANCE: return lance_attacks(color_of(p), s, occ);
    case BISHOP: return bishop_attacks(s, occ);
    case ROOK: return rook_attacks(s, occ);
    case HORSE: return bishop_attacks(s, occ) | king_attacks(s);
    case DRAGON: return rook_attacks(s, occ) | king_attacks(s);
    default: return STEP_ATTACKS[p][s];
  }
}

inline bool aligned(Square a, Square b, Square c) { return LINE[a][b].test(c); }
}  // namespace bb

}  // namespace jiriki
