// The one judgement of a game's end (see game_rules.h).
#include "shogi/game_rules.h"

namespace jiriki {

GameRules GameRules::counted_from(const Position& start) const {
  GameRules r = *this;
  if (r.max_plies > 0) r.max_plies += start.game_ply() - 1;
  return r;
}

Ending judge_position(const Position& pos, const GameRules& rules, MoveList& moves, int previous) {
  switch (pos.repetition(previous)) {
    case Repetition::DRAW: return Ending::REPETITION_DRAW;
    case Repetition::WIN: return Ending::REPETITION_WIN;
    case Repetition::LOSE: return Ending::REPETITION_LOSS;
    case Repetition::NONE: break;
  }
  moves.n = 0;
  generate<GenType::LEGAL>(pos, moves);
  if (moves.size() == 0) return Ending::MATED;
  if (pos.declaration_win(rules.entering_king_rule)) return Ending::DECLARATION;
  if (rules.max_plies > 0 && pos.game_ply() > rules.max_plies) return Ending::MAX_MOVES;
  return Ending::NONE;
}

Ending judge_position(const Position& pos, const GameRules& rules) {
  MoveList moves;
  return judge_position(pos, rules, moves);
}

}  // namespace jiriki
