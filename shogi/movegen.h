// Move generation. Every generator yields legal moves only, including each optional
// non-promotion (as YaneuraOu's LEGAL_ALL and cshogi count them); the subsets serve the searches.
#pragma once
#include "shogi/position.h"

namespace jiriki {

enum class GenType {
  CAPTURES,      // captures (with and without promotion)
  QUIETS,        // non-captures, drops included
  EVASIONS,      // replies to a check (only when in check)
  NON_EVASIONS,  // every move when not in check
  CHECKS,        // legal moves that give check
  LEGAL,         // all legal moves
};

struct MoveList {
  static constexpr int MAX = 600;  // the most legal moves known in a shogi position is 593
  Move moves[MAX];
  int n = 0;
  void push(Move m) { moves[n++] = m; }
  int size() const { return n; }
  Move* begin() { return moves; }
  Move* end() { return moves + n; }
  const Move* begin() const { return moves; }
  const Move* end() const { return moves + n; }
  bool contains(Move m) const {
    for (int i = 0; i < n; ++i)
      if (moves[i] == m) return true;
    return false;
  }
};

template <GenType T>
void generate(const Position& pos, MoveList& list);

// Convenience: all legal moves.
inline MoveList legal_moves(const Position& pos) {
  MoveList l;
  generate<GenType::LEGAL>(pos, l);
  return l;
}

uint64_t perft(Position& pos, int depth);  // leaf count with bulk counting at the last ply

}  // namespace jiriki
