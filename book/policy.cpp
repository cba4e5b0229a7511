// Book move choice and book openings (see policy.h).
#include "book/policy.h"

#include <algorithm>
#include <cstdio>

namespace jiriki::book {

std::optional<BookChoice> choose_book_move(const BookSource& book, const Position& pos, const BookOptions& opt,
                                           SplitMix64& rng) {
  if (!opt.own_book) return std::nullopt;
  if (opt.ignore_rate > 0 && int(random_below(rng, 100)) < opt.ignore_rate) return std::nullopt;
  if (pos.game_ply() > opt.book_moves) return std::nullopt;
  std::vector<BookMove> moves = probe(book, pos, opt.lookup);
  sort_moves(moves);
  uint64_t total = 0;
  for (const BookMove& m : moves) total += m.count;
  // A book line whose move is not legal here (a hash-free text book can still hold one) is never played.
  std::erase_if(moves, [&](const BookMove& m) { return !pos.is_legal(m.move); });
  if (moves.empty()) return std::nullopt;
  if (opt.depth_limit != 0 && moves[0].depth < opt.depth_limit) return std::nullopt;
  int best = moves[0].value;
  for (const BookMove& m : moves) best = std::max(best, m.value);
  const int limit =
      std::max(best - opt.eval_diff, pos.side_to_move() == BLACK ? opt.eval_black_limit : opt.eval_white_limit);
  std::erase_if(moves, [&](const BookMove& m) { return m.value < limit; });
  if (moves.empty()) return std::nullopt;

  size_t pick = random_below(rng, moves.size());
  if (opt.consider_count) {
    uint64_t sum = 0;
    for (const BookMove& m : moves) sum += m.count;
    if (sum > 0) {  // all counts 0: every move equally likely, as YaneuraOu does
      uint64_t r = random_below(rng, sum);
      for (pick = 0; r >= moves[pick].count; ++pick) r -= moves[pick].count;
    }
  }
  BookChoice c;
  c.entry = moves[pick];
  c.move = c.entry.move;
  c.candidates = moves.size();
  Position after = pos;
  after.do_move(c.move);
  if (c.entry.ponder != MOVE_NONE && after.is_legal(c.entry.ponder)) {
    c.ponder = c.entry.ponder;
  } else {
    // No reply in the book line: the first move of the book at the next position, as YaneuraOu does.
    std::vector<BookMove> next = probe(book, after, opt.lookup);
    sort_moves(next);
    for (const BookMove& m : next)
      if (after.is_legal(m.move)) {
        c.ponder = m.move;
        break;
      }
  }
  std::string pv = move_to_usi(c.move);
  if (c.ponder != MOVE_NONE) pv.append(" ").append(move_to_usi(c.ponder));
  c.info.push_back("info depth " + std::to_string(c.entry.depth) + " score cp " + std::to_string(c.entry.value) +
                   " nodes 0 pv " + pv);
  char share[32];
  std::snprintf(share, sizeof share, "%.1f", total ? 100.0 * double(c.entry.count) / double(total) : 0.0);
  c.info.push_back("info string book move " + move_to_usi(c.move) + ": count " + std::to_string(c.entry.count) + " (" +
                   share + "%), value " + std::to_string(c.entry.value) + ", depth " + std::to_string(c.entry.depth) +
                   ", one of " + std::to_string(c.candidates) + " candidates");
  return c;
}

std::string book_opening(const BookSource& book, int plies, SplitMix64& rng, const LookupOptions& lookup) {
  Position pos;
  std::string line = "startpos";
  for (int ply = 0; ply < plies; ++ply) {
    std::vector<BookMove> moves = probe(book, pos, lookup);
    std::erase_if(moves, [&](const BookMove& m) { return !pos.is_legal(m.move); });
    if (moves.empty()) break;
    uint64_t sum = 0;
    for (const BookMove& m : moves) sum += m.count;
    size_t pick = random_below(rng, moves.size());
    if (sum > 0) {
      uint64_t r = random_below(rng, sum);
      for (pick = 0; r >= moves[pick].count; ++pick) r -= moves[pick].count;
    }
    line += (ply == 0 ? " moves " : " ") + move_to_usi(moves[pick].move);
    pos.do_move(moves[pick].move);
  }
  return line;
}

}  // namespace jiriki::book
