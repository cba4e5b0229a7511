#include "shogi/bitboard.h"

namespace jiriki::bb {

Bitboard RAY[DIR_NB][SQ_NB];
Bitboard STEP_ATTACKS[PIECE_NB][SQ_NB];
Bitboard BETWEEN[SQ_NB][SQ_NB];
Bitboard LINE[SQ_NB][SQ_NB];
Bitboard FILE_BB[9];
Bitboard RANK_BB[9];
Bitboard ZONE[COLOR_NB];
Bitboard LANCE_PSEUDO[COLOR_NB][SQ_NB];
Bitboard BISHOP_PSEUDO[SQ_NB];
Bitboard ROOK_PSEUDO[SQ_NB];

namespace {
// (file delta, rank delta) of each direction; rank delta -1 is towards rank a.
constexpr int DF[DIR_NB] = {0, 0, -1, 1, -1, 1, 1, -1};
constexpr int DR[DIR_NB] = {-1, 1, 0, 0, -1, 1, -1, 1};

struct Step {
  int df, dr;
};
// Steps for Black; White's are the same with the rank delta negated.
constexpr Step PAWN_STEPS[] = {{0, -1}};
constexpr Step KNIGHT_STEPS[] = {{-1, -2}, {1, -2}};
constexpr Step SILVER_STEPS[] = {{0, -1}, {-1, -1}, {1, -1}, {-1, 1}, {1, 1}};
constexpr Step GOLD_STEPS[] = {{0, -1}, {-1, -1}, {1, -1}, {-1, 0}, {1, 0}, {0, 1}};
constexpr Step KING_STEPS[] = {{0, -1}, {-1, -1}, {1, -1}, {-1, 0}, {1, 0}, {0, 1}, {-1, 1}, {1, 1}};

template <size_t N>
Bitboard steps(Color c, Square s, const Step (&st)[N]) {
  Bitboard b;
  for (const Step& x : st) {
    int f = file_of(s) + x.df, r = rank_of(s) + (c == BLACK ? x.dr : -x.dr);
    if (on_board(f, r)) b |= Bitboard::square(make_square(f, r));
  }
  return b;
}
}  // namespace

void init() {
  for (int f = 0; f < 9; ++f)
    for (int r = 0; r < 9; ++r) {
      FILE_BB[f] |= Bitboard::square(make_square(f, r));
      RANK_BB[r] |= Bitboard::square(make_square(f, r));
    }
  ZONE[BLACK] = RANK_BB[0] | RANK_BB[1] | RANK_BB[2];
  ZONE[WHITE] = RANK_BB[6] | RANK_BB[7] | RANK_BB[8];

  for (Square s = 0; s < SQ_NB; ++s) {
    for (int d = 0; d < DIR_NB; ++d) {
      Bitboard ray;
      for (int f = file_of(s) + DF[d], r = rank_of(s) + DR[d]; on_board(f, r); f += DF[d], r += DR[d])
        ray |= Bitboard::square(make_square(f, r));
      RAY[d][s] = ray;
    }
    ROOK_PSEUDO[s] = RAY[UP][s] | RAY[DOWN][s] | RAY[RIGHT][s] | RAY[LEFT][s];
    BISHOP_PSEUDO[s] = RAY[UP_RIGHT][s] | RAY[UP_LEFT][s] | RAY[DOWN_RIGHT][s] | RAY[DOWN_LEFT][s];
    LANCE_PSEUDO[BLACK][s] = RAY[UP][s];
    LANCE_PSEUDO[WHITE][s] = RAY[DOWN][s];
    for (Color c : {BLACK, WHITE}) {
      STEP_ATTACKS[make_piece(c, PAWN)][s] = steps(c, s, PAWN_STEPS);
      STEP_ATTACKS[make_piece(c, LANCE)][s] = LANCE_PSEUDO[c][s];
      STEP_ATTACKS[make_piece(c, KNIGHT)][s] = steps(c, s, KNIGHT_STEPS);
      STEP_ATTACKS[make_piece(c, SILVER)][s] = steps(c, s, SILVER_STEPS);
      STEP_ATTACKS[make_piece(c, BISHOP)][s] = BISHOP_PSEUDO[s];
      STEP_ATTACKS[make_piece(c, ROOK)][s] = ROOK_PSEUDO[s];
      STEP_ATTACKS[make_piece(c, KING)][s] = steps(c, s, KING_STEPS);
      for (PieceType pt : {GOLD, PRO_PAWN, PRO_LANCE, PRO_KNIGHT, PRO_SILVER})
        STEP_ATTACKS[make_piece(c, pt)][s] = steps(c, s, GOLD_STEPS);
      STEP_ATTACKS[make_piece(c, HORSE)][s] = BISHOP_PSEUDO[s] | steps(c, s, KING_STEPS);
      STEP_ATTACKS[make_piece(c, DRAGON)][s] = ROOK_PSEUDO[s] | steps(c, s, KING_STEPS);
    }
  }
  for (Square a = 0; a < SQ_NB; ++a)
    for (int d = 0; d < DIR_NB; ++d) {
      Bitboard between;
      for (int f = file_of(a) + DF[d], r = rank_of(a) + DR[d]; on_board(f, r); f += DF[d], r += DR[d]) {
        Square b = make_square(f, r);
        BETWEEN[a][b] = between;
        // The whole line: both rays through a, plus a itself.
        LINE[a][b] = RAY[d][a] | RAY[d ^ 1][a] | Bitboard::square(a);
        between |= Bitboard::square(b);
      }
    }
}

}  // namespace jiriki::bb
