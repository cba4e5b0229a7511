// The engine's opening book: its USI options (YaneuraOu's names and meanings), the book loaded at
// `isready`, and the move chosen at `go`. The choice itself is book/policy.h's; this only reads the
// options into it.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "book/policy.h"
#include "common/splitmix.h"
#include "usi/options.h"

namespace jiriki::usi {

class UsiBook {
 public:
  // Declares USI_OwnBook, BookFile, BookMoves, BookIgnoreRate, BookEvalDiff, BookEvalBlackLimit,
  // BookEvalWhiteLimit, BookDepthLimit, ConsiderBookMoveCount, IgnoreBookPly, FlippedBook and
  // BookOnTheFly, each filling this book's settings (defaults: book::BookOptions').
  void add_options(Options& o);

  // (Re)loads the book when BookFile or BookOnTheFly changed since the last load; says what it did
  // (or the error, after which the engine plays without a book) through `send`.
  void prepare(const std::function<void(const std::string&)>& send);
  // The book move for `pos`, or nullopt. Loads the book first if `isready` did not.
  std::optional<book::BookChoice> choose(const Position& pos, const std::function<void(const std::string&)>& send);

 private:
  book::BookOptions options_;  // how the move is chosen
  std::string file_;           // BookFile; empty: no book
  bool on_the_fly_ = false;    // BookOnTheFly: search the file instead of loading it
  std::unique_ptr<book::BookSource> book_;
  std::string loaded_;  // "FILE|on-the-fly flag" of the book in book_ (or of the failed attempt)
  SplitMix64 rng_{uint64_t(std::random_device{}()) << 32 | std::random_device{}()};
};

}  // namespace jiriki::usi
