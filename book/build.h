// Building a book from game records: every position met in the first P plies of the games, kept
// when it occurred at least K times, with each move's count and value.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "book/book.h"
#include "shogi/hcpe3.h"
#include "shogi/record.h"

namespace jiriki::book {

struct BuildOptions {
  int min_count = 1;   // K: a position enters when its moves were played at least this often in total
  int max_plies = 32;  // P: only the first P moves of each game count
};

// A move's value in a built book: the mean engine score of the records for the side that played it
// where the records carry scores (hcpe3), else that side's win rate (draws half, one win and one
// loss added so that one game does not give an infinite value) as centipawns on the engine's
// logistic scale (756 * ln(w / (1 - w))).
int winrate_value(double wins, uint64_t games);

class BookBuilder {
 public:
  explicit BookBuilder(BuildOptions opt) : opt_(opt) {}
  // One game: its moves from `start`, each move's engine score for the side that played it (nullopt
  // where the record has none; an empty vector for none at all) and the winner when known.
  void add_game(const Position& start, const std::vector<Move>& moves, const std::vector<std::optional<int>>& scores,
                std::optional<GameResult> result);
  void add_record(const GameRecord& rec);
  void add_hcpe3(const Hcpe3Game& game);

  Book build() const;
  int64_t games() const { return games_; }
  size_t positions_seen() const { return positions_.size(); }

 private:
  struct MoveStats {
    uint64_t count = 0;
    double wins = 0;       // for the side that played the move: 1 a win, 0.5 a draw
    uint64_t decided = 0;  // games with a known result
    int64_t score_sum = 0;
    uint64_t scored = 0;
  };
  struct PositionStats {
    int ply = 0;  // the smallest move number it was met at
    std::vector<std::pair<Move, MoveStats>> moves;
  };
  BuildOptions opt_;
  std::unordered_map<std::string, PositionStats> positions_;
  int64_t games_ = 0;
};

}  // namespace jiriki::book
