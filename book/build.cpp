// Building books from game records (see build.h).
#include "book/build.h"

#include <algorithm>
#include <cmath>

namespace jiriki::book {

int winrate_value(double wins, uint64_t games) {
  const double w = (wins + 1.0) / (double(games) + 2.0);
  return int(std::lround(756.0 * std::log(w / (1.0 - w))));
}

void BookBuilder::add_game(const Position& start, const std::vector<Move>& moves,
                           const std::vector<std::optional<int>>& scores, std::optional<GameResult> result) {
  ++games_;
  Position pos = start;
  const size_t n = std::min(moves.size(), size_t(std::max(opt_.max_plies, 0)));
  for (size_t i = 0; i < n; ++i) {
    const Move m = moves[i];
    PositionStats& ps = positions_[pos.sfen(false)];
    if (ps.ply == 0 || pos.game_ply() < ps.ply) ps.ply = pos.game_ply();
    auto it = std::find_if(ps.moves.begin(), ps.moves.end(), [&](const auto& e) { return e.first == m; });
    if (it == ps.moves.end()) it = ps.moves.insert(ps.moves.end(), {m, MoveStats{}});
    MoveStats& s = it->second;
    ++s.count;
    if (result) {
      ++s.decided;
      const GameResult mine = pos.side_to_move() == BLACK ? BLACK_WIN : WHITE_WIN;
      s.wins += *result == DRAW ? 0.5 : *result == mine ? 1.0 : 0.0;
    }
    if (i < scores.size() && scores[i]) {
      s.score_sum += *scores[i];
      ++s.scored;
    }
    pos.do_move(m);
  }
}

void BookBuilder::add_record(const GameRecord& rec) { add_game(rec.start, rec.moves, {}, game_result(rec)); }

void BookBuilder::add_hcpe3(const Hcpe3Game& game) {
  GameRecord rec = record_from_hcpe3(game);
  std::vector<std::optional<int>> scores;
  for (const Hcpe3Move& m : game.moves) scores.push_back(int(m.eval));
  add_game(rec.start, rec.moves, scores, game.winner());
}

Book BookBuilder::build() const {
  Book book;
  for (const auto& [key, ps] : positions_) {
    uint64_t total = 0;
    for (const auto& [m, s] : ps.moves) total += s.count;
    if (total < uint64_t(std::max(opt_.min_count, 1))) continue;
    BookPosition p{key, ps.ply, {}};
    for (const auto& [m, s] : ps.moves) {
      BookMove bm;
      bm.move = m;
      bm.count = s.count;
      bm.value = s.scored ? int(std::lround(double(s.score_sum) / double(s.scored))) : winrate_value(s.wins, s.decided);
      p.moves.push_back(bm);
    }
    book.add(std::move(p));
  }
  return book;
}

}  // namespace jiriki::book
