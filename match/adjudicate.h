// The referee of engine games: judges each engine answer and each position by our own rules code,
// so that no engine's word decides a result. Its own are the answers (illegal or unparsable moves,
// resignations, entering-king declarations) and the optional score adjudication of cutechess's
// -resign / -draw where both engines' scores must agree; how a position ends a game (mate,
// sennichite and the perpetual-check loss, the ply limit) is shogi/game_rules.h's judgement, the
// one the engine's search uses, written here as a verdict.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "shogi/game_rules.h"
#include "shogi/record.h"

namespace jiriki::match {

// How a game ended, or that it goes on (over == false).
struct Verdict {
  bool over = false;
  std::optional<Color> winner;  // nullopt: a draw
  GameEnd end = GameEnd::NONE;  // the record's end statement
  std::string reason;           // for games.jsonl: "mate", "resign", "illegal move", ...

  static Verdict loss(Color loser, GameEnd end, std::string reason) { return {true, ~loser, end, std::move(reason)}; }
  static Verdict draw(GameEnd end, std::string reason) { return {true, std::nullopt, end, std::move(reason)}; }
};

// The answer of `bestmove` for the side to move: a move (set in `move` when legal), "resign" or
// "win" (a declaration, true when judge_position says DECLARATION under `rules`). The game goes on
// only for a legal move.
Verdict answer_verdict(const Position& pos, const std::string& answer, const GameRules& rules, Move& move);

// The verdict of judge_position's `ending` for `side_to_move`: mate, fourfold repetition (a draw,
// or a loss for the side that gave every check of the cycle), the ply limit. A position where the
// side to move can declare goes on: the engine must answer "win" to claim it.
Verdict ending_verdict(Ending ending, Color side_to_move);

// Early adjudication by the engines' own scores (centipawns, each from its mover's view).
// resign: the side to move resigns when, over the last `resign_moves` moves of each side, its own
// scores were all <= -resign_cp and the opponent's all >= resign_cp. draw: after `draw_plies`
// plies, when over the last `draw_moves` moves of each side every score was within +-draw_cp.
// 0 moves turns a rule off.
struct ScoreRules {
  int resign_moves = 0, resign_cp = 0;
  int draw_moves = 0, draw_cp = 0, draw_plies = 0;
};

// `scores[i]` is the score the mover of ply i gave (nullopt when it gave none, or for the moves of
// an opening); the side to move is the one about to move after the last of them.
Verdict scores_verdict(const std::vector<std::optional<int>>& scores, Color side_to_move, const ScoreRules& rules);

}  // namespace jiriki::match
