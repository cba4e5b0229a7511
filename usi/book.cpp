// The engine's book options and book (see book.h).
#include "usi/book.h"

namespace jiriki::usi {

void UsiBook::add_options(Options& o) {
  o.add_check("USI_OwnBook", true);
  o.add_string("BookFile", "", true);  // empty: no book
  o.add_check("BookOnTheFly", false);
  o.add_spin("BookMoves", 16, 0, 10000);
  o.add_spin("BookIgnoreRate", 0, 0, 100);
  o.add_spin("BookEvalDiff", 30, 0, 99999);
  o.add_spin("BookEvalBlackLimit", 0, -99999, 99999);
  o.add_spin("BookEvalWhiteLimit", -140, -99999, 99999);
  o.add_spin("BookDepthLimit", 0, 0, 99999);
  o.add_check("ConsiderBookMoveCount", false);
  o.add_check("IgnoreBookPly", false);
  o.add_check("FlippedBook", true);
}

book::BookOptions UsiBook::book_options(const Options& o) {
  book::BookOptions b;
  b.own_book = o.check("USI_OwnBook");
  b.book_moves = int(o.integer("BookMoves"));
  b.ignore_rate = int(o.integer("BookIgnoreRate"));
  b.eval_diff = int(o.integer("BookEvalDiff"));
  b.eval_black_limit = int(o.integer("BookEvalBlackLimit"));
  b.eval_white_limit = int(o.integer("BookEvalWhiteLimit"));
  b.depth_limit = int(o.integer("BookDepthLimit"));
  b.consider_count = o.check("ConsiderBookMoveCount");
  b.lookup.ignore_ply = o.check("IgnoreBookPly");
  b.lookup.flipped = o.check("FlippedBook");
  return b;
}

void UsiBook::prepare(const Options& o, const std::function<void(const std::string&)>& send) {
  const std::string& file = o.str("BookFile");
  const bool on_the_fly = o.check("BookOnTheFly");
  const std::string want = file + "|" + (on_the_fly ? "1" : "0");
  if (want == loaded_) return;
  loaded_ = want;
  book_.reset();
  if (file.empty()) return;
  try {
    book_ = book::open_book(file, on_the_fly);
    send("info string book " + book_->describe());
  } catch (const std::exception& e) {
    send("info string error: book not used: " + std::string(e.what()));
  }
}

std::optional<book::BookChoice> UsiBook::choose(const Options& o, const Position& pos,
                                                const std::function<void(const std::string&)>& send) {
  prepare(o, send);
  if (!book_) return std::nullopt;
  return book::choose_book_move(*book_, pos, book_options(o), rng_);
}

}  // namespace jiriki::usi
