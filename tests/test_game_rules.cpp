// The one judgement of a game's end (shogi/game_rules.h): its order and the ply limit's boundary,
// and, for every ending of a corpus of games, the same result from its two users that stand
// furthest apart: the match referee, through scripted engines (tests/scripted_match.h), and the
// tree search, whose view of the game's last move must name the same winner. The search runs a
// tiny untrained network: these values come from the rules alone. Each game's result is written
// here by hand, from the rules of shogi.
#include <catch2/catch.hpp>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "engine/search/search.h"
#include "shogi/game_rules.h"
#include "shogi/movegen.h"
#include "tests/positions.h"
#include "tests/scripted_match.h"
#include "tests/tiny_network.h"

using namespace jiriki;
using jiriki::testing::from_sfen;

namespace {

// The position of an opening line's start ("startpos" or "sfen SFEN") after `moves`.
Position after(const std::string& start, const std::vector<std::string>& moves, size_t count) {
  Position pos = from_sfen(start == "startpos" ? std::string(Position::STARTPOS_SFEN) : start.substr(5));
  for (size_t i = 0; i < count; ++i) {
    const Move m = move_from_usi(pos, moves[i]);
    INFO(moves[i] << " in " << pos.sfen());
    REQUIRE(pos.is_legal(m));
    pos.do_move(m);
  }
  return pos;
}

constexpr float DRAW_VALUE = 0.3f;  // the search's value of a draw: far from any value it computes

// A searcher on the tiny network under `rules`, with every root move reported.
struct RulesSearch {
  std::unique_ptr<search::EvalQueue> queue = jiriki::testing::tiny_eval_queue(16);
  search::Searcher searcher{size_t(64) << 20};
  explicit RulesSearch(const GameRules& rules) {
    search::SearchParams p;
    p.threads = 2;
    p.batch_size = 8;
    p.multipv = 600;
    p.draw_value_black = p.draw_value_white = DRAW_VALUE;
    p.rules = rules;
    searcher.set_params(p);
    searcher.set_eval_queue(queue.get());
  }
  // The search's lines after `moves` from `start` (so that repetitions are seen), in a fresh tree:
  // a kept subtree holds draws valued for the side that moved first then.
  search::SearchInfo lines(const Position& start, const std::vector<Move>& moves, int64_t playouts) {
    searcher.clear_tree();
    REQUIRE_FALSE(searcher.set_position(start.sfen(), moves));
    search::SearchLimits limits;
    limits.nodes = playouts;
    return searcher.run(limits).info;
  }
};

// One game of the corpus: from `start`, `moves` are played (and, with `declare`, the side to move
// then answers "win"); the rules give `winner` (nullopt: a draw) for the reason the referee names.
struct Game {
  const char* name;
  std::string start;
  std::vector<std::string> moves;
  bool declare;
  std::optional<Color> winner;
  std::string reason;
  int max_plies = GameRules{}.max_plies;  // counted from `start`, as the referee counts
};

std::vector<std::string> times(int n, const std::vector<std::string>& cycle) {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i) v.insert(v.end(), cycle.begin(), cycle.end());
  return v;
}

// Black's king on 5b with ten pieces in the camp and 54 points (28 needed): Black can declare
// whenever it is not in check, and White, with an empty hand, cannot give check.
const std::string DECLARABLE = "sfen RRBBGGGGS/S3K4/9/9/9/9/9/9/4k4 w 2S4N4L18P 1";

const std::vector<Game> CORPUS = {
    {"mate", "sfen 4k4/9/4G4/9/9/9/9/9/4K4 b G2r2b2g4s4n4l18p 1", {"G*5b"}, false, BLACK, "mate"},
    {"sennichite", "startpos", times(3, {"5i5h", "5a5b", "5h5i", "5b5a"}), false, std::nullopt, "sennichite"},
    // Black's rook checks from 5i and 4i while White's king steps between 5a and 4a: White wins.
    // (Each checked king has no piece in hand, so that the search sees all of its few replies.)
    {"perpetual check by Black", "sfen 4k4/9/9/9/9/9/9/9/K4R3 b R2B4G4S4N4L18P 1",
     times(3, {"4i5i", "5a4a", "5i4i", "4a5a"}), false, WHITE, "perpetual check"},
    // The same turned round: White's rook checks, Black's king steps, Black wins.
    {"perpetual check by White", "sfen 3r4k/9/9/9/9/9/9/9/4K4 w r2b4g4s4n4l18p 1",
     times(3, {"6a5a", "5i6i", "5a6a", "6i5i"}), false, BLACK, "perpetual check"},
    {"declaration", DECLARABLE, {"5i5h"}, true, BLACK, "declaration"},
    // The ply limit: the game is drawn with the limit's move, not one ply earlier.
    {"ply limit 4", "startpos", {"7g7f", "3c3d", "2g2f", "8c8d"}, false, std::nullopt, "max plies", 4},
    {"ply limit 5", "startpos", {"7g7f", "3c3d", "2g2f", "8c8d", "2f2e"}, false, std::nullopt, "max plies", 5},
    // Counted from the start, whatever its move number (the engines are told the move number).
    {"ply limit 3 from move 30",
     "sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 30",
     {"7g7f", "3c3d", "2g2f"},
     false,
     std::nullopt,
     "max plies",
     3},
};

}  // namespace

TEST_CASE("game rules: the judgement's order, and the ply limit counted as USI's MaxMovesToDraw", "[rules]") {
  GameRules rules;
  rules.max_plies = 12;
  MoveList moves;
  Position pos;
  // Three cycles of a rook shuffle: the 13th position repeats the first a fourth time.
  const char* cycle[] = {"2h3h", "8b7b", "3h2h", "7b8b"};
  for (int i = 0; i < 12; ++i) {
    INFO("ply " << i);
    CHECK(judge_position(pos, rules, moves) == Ending::NONE);
    CHECK(judge_position(pos, rules, moves, 1) == (i >= 4 ? Ending::REPETITION_DRAW : Ending::NONE));
    pos.do_move(move_from_usi(pos, cycle[i % 4]));
  }
  CHECK(judge_position(pos, rules) == Ending::REPETITION_DRAW);  // before the ply limit
  // Move 12 played: drawn; move 11 played: not yet; the legal moves are still given.
  Position longer;
  const char* game[] = {"7g7f", "3c3d", "2g2f", "8c8d", "2f2e", "8d8e", "6i7h", "4a3b", "3i4h", "7a7b", "5i6h", "5a4b"};
  for (int i = 0; i < 12; ++i) {
    INFO("ply " << i);
    CHECK(judge_position(longer, rules) == Ending::NONE);
    longer.do_move(move_from_usi(longer, game[i]));
  }
  CHECK(judge_position(longer, rules, moves) == Ending::MAX_MOVES);
  CHECK(moves.size() == legal_moves(longer).size());
  longer.do_move(moves.moves[0]);  // past the limit: still drawn
  CHECK(judge_position(longer, rules) == Ending::MAX_MOVES);
  rules.max_plies = 0;  // no limit
  CHECK(judge_position(longer, rules) == Ending::NONE);

  // Perpetual check: after the fourth occurrence the checked side to move wins.
  Position check = from_sfen("4k4/9/9/9/9/9/9/9/K2R5 b - 1");
  check.do_move(move_from_usi(check, "6i5i"));
  for (int c = 0; c < 3; ++c)
    for (const char* m : {"5a4a", "5i4i", "4a5a", "4i5i"}) check.do_move(move_from_usi(check, m));
  CHECK(judge_position(check, rules) == Ending::REPETITION_WIN);
  check.do_move(move_from_usi(check, "5a4a"));
  CHECK(judge_position(check, rules) == Ending::REPETITION_LOSS);

  CHECK(judge_position(from_sfen("8k/8G/8P/9/9/9/9/9/K8 w 2r2b3g4s4n4l17p 2"), rules) == Ending::MATED);
  // A declaration comes before the limit: the side to move may still claim it.
  const Position declare = from_sfen("+P+P+PS1S+P+P+P/1R2K2B1/9/9/9/9/9/9/4k4 b 10P 40");
  rules.max_plies = 30;
  CHECK(judge_position(declare, rules) == Ending::DECLARATION);
  rules.entering_king_rule = EnteringKingRule::NONE;
  CHECK(judge_position(declare, rules) == Ending::MAX_MOVES);
  rules.max_plies = 0;
  CHECK(judge_position(declare, rules) == Ending::NONE);
}

TEST_CASE("game rules: a limit counted from a start position is the same limit in move numbers", "[rules]") {
  GameRules rules;
  rules.max_plies = 4;
  CHECK(rules.counted_from(Position()).max_plies == 4);
  const Position at30 = from_sfen("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 30");
  CHECK(rules.counted_from(at30).max_plies == 33);  // moves 30 to 33 are the game's four plies
  rules.max_plies = 0;
  CHECK(rules.counted_from(at30).max_plies == 0);  // no limit stays none
  CHECK(GameRules{}.max_plies == 320);             // the one default of every command's limit
}

TEST_CASE("game rules: the referee and the search agree on every ending of the corpus", "[rules][match][search]") {
  for (const Game& game : CORPUS) {
    INFO(game.name);
    GameRules rules;
    rules.max_plies = game.max_plies;

    // The referee, through engines that play the game's moves (and then declare, or play on).
    match::GameSettings settings = match::testing::fast_settings();
    settings.rules = rules;
    std::vector<std::string> lines = game.moves;
    lines.push_back(game.declare ? "win" : "resign");  // an answer the game must not reach unless declaring
    const match::PlayedGame played = match::testing::play(lines, settings, game.start);
    CHECK(played.verdict.over);
    CHECK(played.verdict.winner == game.winner);
    CHECK(played.verdict.reason == game.reason);
    CHECK(played.record.moves.size() == game.moves.size());

    // The judgement at the final position, and one ply earlier (the game went on there).
    const Position start = after(game.start, game.moves, 0);
    const GameRules counted = rules.counted_from(start);
    const Position final_pos = after(game.start, game.moves, game.moves.size());
    const Position before = after(game.start, game.moves, game.moves.size() - 1);
    CHECK(judge_position(before, counted) == Ending::NONE);
    const Ending ending = judge_position(final_pos, counted);
    CHECK(ending != Ending::NONE);
    const Color mover = before.side_to_move();
    const std::optional<Color> judged =
        ending == Ending::REPETITION_WIN || ending == Ending::DECLARATION ? std::optional(final_pos.side_to_move())
        : ending == Ending::REPETITION_LOSS || ending == Ending::MATED    ? std::optional(~final_pos.side_to_move())
                                                                          : std::nullopt;
    CHECK(judged == game.winner);

    // The search one ply before the end, told the limit as a move number (as an engine is by
    // MaxMovesToDraw): the game's last move wins, loses or draws for its mover as the referee says.
    RulesSearch s(counted);
    std::vector<Move> played_moves;
    Position walk = start;
    for (size_t i = 0; i + 1 < game.moves.size(); ++i) {
      played_moves.push_back(move_from_usi(walk, game.moves[i]));
      walk.do_move(played_moves.back());
    }
    const Move last = move_from_usi(before, game.moves.back());
    const search::SearchInfo info = s.lines(start, played_moves, 2000);
    const search::RootLine* line = nullptr;
    for (const auto& l : info.lines)
      if (l.move == last) line = &l;
    REQUIRE(line);
    REQUIRE(line->visits > 0);
    if (!game.winner) {
      CHECK(line->mate == 0);
      CHECK(line->winrate == Approx(DRAW_VALUE));
    } else if (*game.winner == mover) {
      CHECK(line->mate > 0);
    } else {
      CHECK(line->mate < 0);
    }
  }
}

TEST_CASE("game rules: the search sees the ply limit at the referee's boundary, not a ply earlier", "[rules][search]") {
  // A game from the start limited to 5 plies: at move 5 every move draws; at move 4 none is a
  // drawn end yet (its values are the network's, mixed with the draws a ply further).
  GameRules rules;
  rules.max_plies = 5;
  RulesSearch s(rules);
  const Position start;
  std::vector<Move> moves;
  Position pos;
  for (const char* u : {"7g7f", "3c3d", "2g2f"}) {
    moves.push_back(move_from_usi(pos, u));
    pos.do_move(moves.back());
  }
  search::SearchInfo info = s.lines(start, moves, 300);
  bool undecided = false;
  for (const auto& l : info.lines) undecided |= l.visits > 0 && std::abs(l.winrate - DRAW_VALUE) > 1e-3f;
  CHECK(undecided);
  moves.push_back(move_from_usi(pos, "8c8d"));
  info = s.lines(start, moves, 300);
  int visited = 0;
  for (const auto& l : info.lines)
    if (l.visits > 0) {
      ++visited;
      CHECK(l.winrate == Approx(DRAW_VALUE));
    }
  CHECK(visited >= 10);
}
