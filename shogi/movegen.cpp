#include "shogi/movegen.h"

namespace jiriki {

namespace {

// Pushes a board move to every square of `targets`, with promotion and non-promotion as the
// rules allow for piece type PT of colour Us.
template <Color Us, PieceType PT>
inline void push_moves(MoveList& list, Square from, Bitboard targets) {
  const bool from_zone = in_promotion_zone(Us, from);
  while (targets) {
    Square to = targets.pop_lsb();
    if constexpr (PT == PAWN || PT == LANCE || PT == KNIGHT) {
      int rr = relative_rank(Us, rank_of(to));
      if (rr < 3) list.push(make_move(from, to, true));
      if (rr >= (PT == KNIGHT ? 2 : 1)) list.push(make_move(from, to));
    } else if constexpr (PT == SILVER || PT == BISHOP || PT == ROOK) {
      if (from_zone || in_promotion_zone(Us, to)) list.push(make_move(from, to, true));
      list.push(make_move(from, to));
    } else {
      list.push(make_move(from, to));
    }
  }
}

// Board moves of every piece but the king onto `target` (pins not yet considered).
template <Color Us>
void board_moves(const Position& pos, MoveList& list, Bitboard target) {
  const Bitboard occ = pos.pieces();
  Bitboard pawns = pos.pieces(Us, PAWN);
  // A pawn never stands on its last rank, so a shift by one square stays within its file.
  Bitboard pawn_to = (Us == BLACK ? Bitboard(pawns.v >> 1) : Bitboard(pawns.v << 1)) & target;
  while (pawn_to) {
    Square to = pawn_to.pop_lsb();
    Square from = Us == BLACK ? to + 1 : to - 1;
    int rr = relative_rank(Us, rank_of(to));
    if (rr < 3) list.push(make_move(from, to, true));
    if (rr >= 1) list.push(make_move(from, to));
  }
  for (Bitboard b = pos.pieces(Us, LANCE); b;) {
    Square from = b.pop_lsb();
    push_moves<Us, LANCE>(list, from, bb::lance_attacks(Us, from, occ) & target);
  }
  for (Bitboard b = pos.pieces(Us, KNIGHT); b;) {
    Square from = b.pop_lsb();
    push_moves<Us, KNIGHT>(list, from, bb::STEP_ATTACKS[make_piece(Us, KNIGHT)][from] & target);
  }
  for (Bitboard b = pos.pieces(Us, SILVER); b;) {
    Square from = b.pop_lsb();
    push_moves<Us, SILVER>(list, from, bb::STEP_ATTACKS[make_piece(Us, SILVER)][from] & target);
  }
  for (Bitboard b = pos.pieces(Us, BISHOP); b;) {
    Square from = b.pop_lsb();
    push_moves<Us, BISHOP>(list, from, bb::bishop_attacks(from, occ) & target);
  }
  for (Bitboard b = pos.pieces(Us, ROOK); b;) {
    Square from = b.pop_lsb();
    push_moves<Us, ROOK>(list, from, bb::rook_attacks(from, occ) & target);
  }
  for (Bitboard b = pos.golds() & pos.pieces(Us); b;) {
    Square from = b.pop_lsb();
    push_moves<Us, GOLD>(list, from, bb::STEP_ATTACKS[make_piece(Us, GOLD)][from] & target);
  }
  for (Bitboard b = pos.pieces(Us, HORSE); b;) {
    Square from = b.pop_lsb();
    push_moves<Us, HORSE>(list, from, (bb::bishop_attacks(from, occ) | bb::king_attacks(from)) & target);
  }
  for (Bitboard b = pos.pieces(Us, DRAGON); b;) {
    Square from = b.pop_lsb();
    push_moves<Us, DRAGON>(list, from, (bb::rook_attacks(from, occ) | bb::king_attacks(from)) & target);
  }
}

template <Color Us>
void king_moves(const Position& pos, MoveList& list, Bitboard target) {
  Square ksq = pos.king_square(Us);
  if (ksq == SQ_NONE) return;  // the attacker of a mate problem
  Bitboard occ = pos.pieces() ^ Bitboard::square(ksq);
  for (Bitboard b = bb::king_attacks(ksq) & target; b;) {
    Square to = b.pop_lsb();
    if (!pos.attackers_to(~Us, to, occ)) list.push(make_move(ksq, to));
  }
}

// Drops onto the empty squares of `target`: no piece where it could never move, no second
// pawn on a file, no pawn drop that mates.
template <Color Us>
void drops(const Position& pos, MoveList& list, Bitboard target) {
  const Hand& h = pos.hand(Us);
  if (h.empty()) return;
  const Bitboard last1 = bb::RANK_BB[Us == BLACK ? 0 : 8];
  const Bitboard last2 = last1 | bb::RANK_BB[Us == BLACK ? 1 : 7];
  if (h[PAWN]) {
    Bitboard t = target.andnot(last1);
    for (Bitboard p = pos.pieces(Us, PAWN); p;) t = t.andnot(bb::FILE_BB[file_of(p.pop_lsb())]);
    // The square from which a pawn would check the enemy king.
    const Square ksq = pos.king_square(~Us);
    Bitboard front = ksq == SQ_NONE ? Bitboard() : bb::STEP_ATTACKS[make_piece(~Us, PAWN)][ksq] & t;
    if (front && pos.pawn_drop_mates(front.lsb())) t ^= front;
    while (t) list.push(make_drop(PAWN, t.pop_lsb()));
  }
  if (h[LANCE])
    for (Bitboard t = target.andnot(last1); t;) list.push(make_drop(LANCE, t.pop_lsb()));
  if (h[KNIGHT])
    for (Bitboard t = target.andnot(last2); t;) list.push(make_drop(KNIGHT, t.pop_lsb()));
  for (PieceType pt : {SILVER, GOLD, BISHOP, ROOK})
    if (h[pt])
      for (Bitboard t = target; t;) list.push(make_drop(pt, t.pop_lsb()));
}

// Legal moves whose destination lies in `board_target` (board moves) or `drop_target` (drops).
template <Color Us>
void legal_moves_to(const Position& pos, MoveList& list, Bitboard board_target, Bitboard drop_target) {
  const Square ksq = pos.king_square(Us);
  const Bitboard checkers = pos.checkers();
  Bitboard king_target = board_target & ~pos.pieces(Us);
  if (checkers) {
    // Only the king may answer a double check; a single check may also be captured or blocked.
    king_moves<Us>(pos, list, king_target);
    if (checkers.more_than_one()) return;
    Square csq = checkers.lsb();
    Bitboard block = bb::BETWEEN[ksq][csq];
    board_target &= block | Bitboard::square(csq);
    drop_target &= block;
  } else {
    king_moves<Us>(pos, list, king_target);
  }
  int first = list.n;
  board_moves<Us>(pos, list, board_target & ~pos.pieces(Us));
  if (Bitboard pinned = pos.pinned()) {
    int n = first;
    for (int i = first; i < list.n; ++i) {
      Move m = list.moves[i];
      Square from = move_from(m);
      if (!pinned.test(from) || bb::aligned(from, move_to(m), ksq)) list.moves[n++] = m;
    }
    list.n = n;
  }
  drops<Us>(pos, list, drop_target & ~pos.pieces());
}

template <Color Us>
void generate_for(GenType type, const Position& pos, MoveList& list) {
  const Bitboard empty = ~pos.pieces();
  switch (type) {
    case GenType::CAPTURES: legal_moves_to<Us>(pos, list, pos.pieces(~Us), Bitboard()); break;
    case GenType::QUIETS: legal_moves_to<Us>(pos, list, empty, empty); break;
    default: legal_moves_to<Us>(pos, list, ALL_SQUARES, empty); break;
  }
}

}  // namespace

template <GenType T>
void generate(const Position& pos, MoveList& list) {
  if constexpr (T == GenType::EVASIONS) {
    if (!pos.in_check()) return;
  }
  if constexpr (T == GenType::NON_EVASIONS) {
    if (pos.in_check()) return;
  }
  if (pos.side_to_move() == BLACK) generate_for<BLACK>(T, pos, list);
  else generate_for<WHITE>(T, pos, list);
  if constexpr (T == GenType::CHECKS) {
    int n = 0;
    for (int i = 0; i < list.n; ++i)
      if (pos.gives_check(list.moves[i])) list.moves[n++] = list.moves[i];
    list.n = n;
  }
}

template void generate<GenType::CAPTURES>(const Position&, MoveList&);
template void generate<GenType::QUIETS>(const Position&, MoveList&);
template void generate<GenType::EVASIONS>(const Position&, MoveList&);
template void generate<GenType::NON_EVASIONS>(const Position&, MoveList&);
template void generate<GenType::CHECKS>(const Position&, MoveList&);
template void generate<GenType::LEGAL>(const Position&, MoveList&);

uint64_t perft(Position& pos, int depth) {
  if (depth <= 0) return 1;
  MoveList list;
  generate<GenType::LEGAL>(pos, list);
  if (depth == 1) return uint64_t(list.size());
  uint64_t n = 0;
  for (Move m : list) {
    pos.do_move(m);
    n += perft(pos, depth - 1);
    pos.undo_move();
  }
  return n;
}

}  // namespace jiriki
