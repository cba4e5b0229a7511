// Opening lines for matches.
#include "match/openings.h"

#include "match/adjudicate.h"
#include "shogi/movegen.h"

namespace jiriki::match {

namespace {

// Whether the game is over at `pos` by the rules alone: the ply limit is the game's to apply.
bool over(const Position& pos) {
  return ending_verdict(judge_position(pos, GameRules{.max_plies = 0}), pos.side_to_move()).over;
}

}  // namespace

std::optional<std::string> parse_opening(const std::string& line, Opening& out) {
  return parse_opening_line(
      line,
      [](const Position& pos) -> std::optional<std::string> {
        if (over(pos)) return "the game is over";
        return std::nullopt;
      },
      false, out);
}

std::vector<Opening> load_openings(const std::string& path) {
  std::vector<Opening> openings;
  read_opening_lines(path, [&](const std::string& line) -> std::optional<std::string> {
    Opening o;
    if (auto err = parse_opening(line, o)) return err;
    openings.push_back(std::move(o));
    return std::nullopt;
  });
  return openings;
}

Opening random_opening(int plies, std::mt19937_64& rng) {
  // Retries from the start in the rare case that every move of some position ends the game.
  while (true) {
    Opening o{"startpos", {}};
    Position pos;
    for (int p = 0; p < plies; ++p) {
      std::vector<Move> choices;
      for (Move m : legal_moves(pos)) {
        pos.do_move(m);
        if (!over(pos)) choices.push_back(m);
        pos.undo_move();
      }
      if (choices.empty()) break;
      Move m = choices[std::uniform_int_distribution<size_t>(0, choices.size() - 1)(rng)];
      pos.do_move(m);
      o.moves.push_back(m);
    }
    if (int(o.moves.size()) == plies) return o;
  }
}

}  // namespace jiriki::match
