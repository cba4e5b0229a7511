// The rules a game is played under beyond the board's own (position.h: moves, repetition,
// declaration points): which entering-king declaration counts and when a long game is drawn, and
// the one judgement of whether a position ends the game. The tree search (at every new leaf),
// self-play, `jiriki play` and the match referee all ask judge_position, so that an engine's
// search and the referee of its games cannot disagree on how a game ends.
#pragma once
#include "shogi/movegen.h"
#include "shogi/position.h"

namespace jiriki {

struct GameRules {
  // The declaration rule (USI's EnteringKingRule; CSA's 27-point rule by default).
  EnteringKingRule entering_king_rule = EnteringKingRule::POINT27;
  // The ply limit, as USI's MaxMovesToDraw counts it: once the move numbered `max_plies` has been
  // played (the SFEN move number of the position is greater), the game is drawn, unless that move
  // mated or repeated, or the side to move can declare. A game from move 1 is thus drawn after
  // `max_plies` plies. 0: no limit. The one default of every command's ply limit.
  int max_plies = 320;

  // These rules with the limit counted in plies from `start` instead of from move 1: for games
  // whose length counts from their start position whatever its SFEN move number (matches, `play`).
  GameRules counted_from(const Position& start) const;
  bool operator==(const GameRules&) const = default;
};

// How a game stands at a position for its side to move: going on, or over by a rule.
// DECLARATION: the side to move can declare an entering-king win (it wins if it does).
enum class Ending { NONE, REPETITION_DRAW, REPETITION_WIN, REPETITION_LOSS, MATED, DECLARATION, MAX_MOVES };

// Earlier occurrences of a position that end a game by repetition: 3 by the rules (fourfold
// sennichite). A search passes 1, scoring the first return to a position as final.
constexpr int SENNICHITE_PREVIOUS = 3;

// Judges `pos` for its side to move, in this order: repetition (`previous` earlier occurrences;
// a perpetual check loses), no legal move (mated), an entering-king declaration, the ply limit.
// `moves` receives the legal moves whenever the repetition test passes.
Ending judge_position(const Position& pos, const GameRules& rules, MoveList& moves, int previous = SENNICHITE_PREVIOUS);
// The same judgement for a caller that needs no moves.
Ending judge_position(const Position& pos, const GameRules& rules);

}  // namespace jiriki
