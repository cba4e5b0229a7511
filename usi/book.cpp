// The engine's book options and book (see book.h).
#include "usi/book.h"

namespace jiriki::usi {

void UsiBook::add_options(Options& o) {
  book::BookOptions& b = options_;
  o.check("USI_OwnBook", b.own_book, "play book moves");
  o.string("BookFile", file_, "the opening book, YaneuraOu's format (<empty>: no book)", true);
  o.check("BookOnTheFly", on_the_fly_, "search the book file instead of loading it");
  o.spin("BookMoves", b.book_moves, 0, 10000, "use the book up to this move number");
  o.spin("BookIgnoreRate", b.ignore_rate, 0, 100, "per cent of probes that skip the book");
  o.spin("BookEvalDiff", b.eval_diff, 0, 99999, "keep book moves within this of the best value");
  o.spin("BookEvalBlackLimit", b.eval_black_limit, -99999, 99999, "with Black to move, keep values at least this");
  o.spin("BookEvalWhiteLimit", b.eval_white_limit, -99999, 99999, "with White to move, keep values at least this");
  o.spin("BookDepthLimit", b.depth_limit, 0, 99999, "skip positions whose first move's depth is below (0: off)");
  o.check("ConsiderBookMoveCount", b.consider_count, "draw book moves in proportion to their counts");
  o.check("IgnoreBookPly", b.lookup.ignore_ply, "match positions whatever their move number");
  o.check("FlippedBook", b.lookup.flipped, "look White-to-move positions up rotated too");
}

void UsiBook::prepare(const std::function<void(const std::string&)>& send) {
  const std::string want = file_ + "|" + (on_the_fly_ ? "1" : "0");
  if (want == loaded_) return;
  loaded_ = want;
  book_.reset();
  if (file_.empty()) return;
  try {
    book_ = book::open_book(file_, on_the_fly_);
    send("info string book " + book_->describe());
  } catch (const std::exception& e) {
    send("info string error: book not used: " + std::string(e.what()));
  }
}

std::optional<book::BookChoice> UsiBook::choose(const Position& pos,
                                                const std::function<void(const std::string&)>& send) {
  prepare(send);
  if (!book_) return std::nullopt;
  return book::choose_book_move(*book_, pos, options_, rng_);
}

}  // namespace jiriki::usi
