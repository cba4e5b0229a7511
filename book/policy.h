// Choosing a move from the book as YaneuraOu's engine options describe it, and walking the book to
// make openings for matches and self-play. Options come as a plain struct and randomness from a
// seeded generator, so that a choice can be replayed exactly.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "book/book.h"
#include "common/splitmix.h"

namespace jiriki::book {

// YaneuraOu's book options (the engine's USI options of the same names). Defaults are YaneuraOu's
// except depth_limit: books built from game records or imported carry depth 0, and YaneuraOu's 16
// would switch them off.
struct BookOptions {
  bool own_book = true;         // USI_OwnBook
  int book_moves = 16;          // BookMoves: the book is used while the move number is at most this
  int ignore_rate = 0;          // BookIgnoreRate: per cent of probes that skip the book
  int eval_diff = 30;           // BookEvalDiff: keep moves within this of the best value
  int eval_black_limit = 0;     // BookEvalBlackLimit: with Black to move, keep values at least this
  int eval_white_limit = -140;  // BookEvalWhiteLimit: the same with White to move
  int depth_limit = 0;          // BookDepthLimit: skip the position when its first move's depth is below (0: off)
  bool consider_count = false;  // ConsiderBookMoveCount: draw in proportion to counts (else uniformly)
  LookupOptions lookup;         // IgnoreBookPly, FlippedBook
};

struct BookChoice {
  Move move = MOVE_NONE;
  Move ponder = MOVE_NONE;  // the book's reply, or the best move of the book after `move`; may be none
  BookMove entry;           // the book line the move came from
  size_t candidates = 0;    // moves left after the filters
  // What the engine tells the GUI: one `info ... pv` line per book move and an `info string` that
  // says the move came from the book.
  std::vector<std::string> info;
};

// Uniform integer in [0, n) from the generator.
inline uint64_t random_below(SplitMix64& rng, uint64_t n) { return n ? rng.next() % n : 0; }

// The book's move for `pos`, or nullopt when the options say not to use the book here or no
// legal book move passes the filters. In YaneuraOu's order: USI_OwnBook, BookIgnoreRate, BookMoves,
// the lookup, BookDepthLimit on the first move, BookEvalDiff and the side's BookEval*Limit, then a
// uniform or count-weighted draw.
std::optional<BookChoice> choose_book_move(const BookSource& book, const Position& pos, const BookOptions& opt,
                                           SplitMix64& rng);

// An opening for a game: from the start position, up to `plies` moves, each drawn from the book in
// proportion to its count (stopping early where the book ends). The result is a USI position line
// without the word: "startpos moves 7g7f 3c3d ...", or "startpos" when the book has nothing.
std::string book_opening(const BookSource& book, int plies, SplitMix64& rng, const LookupOptions& lookup = {});

}  // namespace jiriki::book
