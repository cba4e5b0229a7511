// Game adjudication by the rules of shogi and by agreed engine scores.
#include "match/adjudicate.h"

#include <cstdlib>

namespace jiriki::match {

Verdict answer_verdict(const Position& pos, const std::string& answer, const GameRules& rules, Move& move) {
  Color us = pos.side_to_move();
  if (answer == "resign") return Verdict::loss(us, GameEnd::RESIGN, "resign");
  if (answer == "win") {
    if (judge_position(pos, rules) == Ending::DECLARATION)
      return Verdict::loss(~us, GameEnd::DECLARATION, "declaration");
    return Verdict::loss(us, GameEnd::ILLEGAL_MOVE, "false declaration");
  }
  Move m = move_from_usi(pos, answer);
  if (m == MOVE_NONE) return Verdict::loss(us, GameEnd::ILLEGAL_MOVE, "unparsable move '" + answer + "'");
  if (!pos.is_legal(m)) return Verdict::loss(us, GameEnd::ILLEGAL_MOVE, "illegal move " + answer);
  move = m;
  return {};
}

Verdict ending_verdict(Ending ending, Color us) {
  switch (ending) {
    case Ending::REPETITION_DRAW: return Verdict::draw(GameEnd::SENNICHITE, "sennichite");
    case Ending::REPETITION_WIN: return Verdict::loss(~us, GameEnd::SENNICHITE, "perpetual check");
    case Ending::REPETITION_LOSS: return Verdict::loss(us, GameEnd::SENNICHITE, "perpetual check");
    case Ending::MATED: return Verdict::loss(us, GameEnd::MATE, "mate");
    case Ending::MAX_MOVES: return Verdict::draw(GameEnd::MAX_MOVES, "max plies");
    case Ending::DECLARATION:  // the side to move declares by answering "win", or plays on
    case Ending::NONE: break;
  }
  return {};
}

Verdict scores_verdict(const std::vector<std::optional<int>>& scores, Color side_to_move, const ScoreRules& rules) {
  const int n = int(scores.size());
  // Scores of the last k moves of each side, or false when one is missing or there are too few.
  auto all_last = [&](int moves, auto&& ok) {
    if (moves <= 0 || n < 2 * moves) return false;
    for (int i = n - 2 * moves; i < n; ++i) {
      // Ply i was played by the side to move when n - i is even, by its opponent when odd.
      bool mine = (n - i) % 2 == 0;
      if (!scores[i] || !ok(*scores[i], mine)) return false;
    }
    return true;
  };
  if (all_last(rules.resign_moves,
               [&](int s, bool mine) { return mine ? s <= -rules.resign_cp : s >= rules.resign_cp; }))
    return Verdict::loss(side_to_move, GameEnd::RESIGN, "resign adjudication");
  if (n >= rules.draw_plies && all_last(rules.draw_moves, [&](int s, bool) { return std::abs(s) <= rules.draw_cp; }))
    return Verdict::draw(GameEnd::IMPASSE, "draw adjudication");
  return {};
}

}  // namespace jiriki::match
