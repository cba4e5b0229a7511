// Opening books in YaneuraOu's standard text format ("YANEURAOU-DB2016 1.00"), read into memory or
// searched on disk (the file sorted by SFEN, as YaneuraOu's BookOnTheFly needs), written back
// byte-for-byte in the order YaneuraOu writes.
//
// The format, line by line (YaneuraOu's book.cpp and its 2016 format proposal):
//   #YANEURAOU-DB2016 1.00            the header; other lines starting with '#' or "//" are comments
//   sfen BOARD SIDE HANDS PLY          a position, the SFEN with its move number
//   MOVE PONDER VALUE DEPTH COUNT      one line per candidate move: the move, the expected reply
//                                      ("none" when there is none), the evaluation in centipawns for
//                                      the side to move, the search depth and how often it was played;
//                                      VALUE, DEPTH and COUNT may be missing (0, 0 and 1)
// Positions are sorted by the text after "sfen " (plain byte order) and each position's moves by
// count then value, both descending. A position appears once, at its smallest move number.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/platform.h"
#include "shogi/position.h"

namespace jiriki::book {

constexpr const char* HEADER = "#YANEURAOU-DB2016 1.00";

struct BookMove {
  Move move = MOVE_NONE;
  Move ponder = MOVE_NONE;  // the expected reply; MOVE_NONE is written "none"
  int value = 0;            // centipawns for the side to move
  int depth = 0;
  uint64_t count = 1;
  bool operator==(const BookMove&) const = default;
};

// One position of a book: its SFEN without the move number (the key), the move number, the moves.
struct BookPosition {
  std::string key;  // "BOARD SIDE HANDS", as Position::sfen(false) writes it
  int ply = 0;      // the SFEN's move number; 0 when the book gave none (then it matches any)
  std::vector<BookMove> moves;
  bool operator==(const BookPosition&) const = default;
};

// Sorts moves as the format lists them: count, then value, both descending (stable otherwise).
void sort_moves(std::vector<BookMove>& moves);
// The "sfen ..." line and the move lines of one position, each ending in '\n'.
std::string format_position(const BookPosition& p);
// Parses one move line; nullopt (with `error` set) when it is malformed.
std::optional<BookMove> parse_move_line(const std::string& line, std::string& error);

// The position rotated by 180 degrees with the colours swapped (Black's view of a White-to-move
// position and back): its SFEN key, and a move mapped onto it.
std::string flip_key(const std::string& key);
Move flip_move(Move m);

// Where lookups come from: a book in memory or a sorted file read on the fly.
class BookSource {
 public:
  virtual ~BookSource() = default;
  // Every entry with this key (several only when the book holds one position at several move
  // numbers), in file order.
  virtual std::vector<BookPosition> find(const std::string& key) const = 0;
  virtual std::string describe() const = 0;  // e.g. "book.db: 1234 positions in memory"
};

// How a position is looked up (YaneuraOu's IgnoreBookPly and FlippedBook).
struct LookupOptions {
  bool ignore_ply = false;  // match a position whatever its move number
  bool flipped = true;      // White to move and not found: look up the rotated position
};

// The book's moves for `pos`, given for `pos` itself (flipped back when found flipped); empty when
// the book does not hold it. With ignore_ply the entry with the smallest move number is taken.
std::vector<BookMove> probe(const BookSource& book, const Position& pos, const LookupOptions& opt);

// A whole book in memory, sorted as the file format is.
class Book : public BookSource {
 public:
  // Reads a book file; throws std::runtime_error naming the file, line and reason of the first
  // problem (no header, a bad SFEN, a move line before any position, an illegal or malformed move,
  // a non-number where a number belongs, a position or move given twice).
  static Book load(const std::string& path);
  static Book parse(const std::string& text, const std::string& name = "book");

  // Adds a position. One already there at the same key and move number is merged with it at the
  // next lookup or write: moves already present keep their line and add the counts.
  void add(BookPosition p);
  // The text of the file; `save` writes it atomically.
  std::string text() const;
  void save(const std::string& path) const;

  std::vector<BookPosition> find(const std::string& key) const override;
  std::string describe() const override;
  const std::vector<BookPosition>& positions() const;  // sorted by (key, ply)
  size_t size() const { return positions().size(); }

 private:
  void sort() const;
  mutable std::vector<BookPosition> positions_;
  mutable bool sorted_ = true;
  std::string name_ = "book";
};

// A sorted book file searched by binary search over its bytes, for books too large to load: each
// lookup reads about log2(file size) small pieces of the file. The file must be sorted as `Book`
// writes it; `jiriki book info` says whether a file is.
class BookFile : public BookSource {
 public:
  // Opens the file and checks its header; throws std::runtime_error when it cannot.
  explicit BookFile(const std::string& path);

  std::vector<BookPosition> find(const std::string& key) const override;
  std::string describe() const override;

 private:
  std::string read_at(int64_t offset, int64_t length) const;
  // The first "sfen " line that starts at or after `from`: its offset, or -1 when none.
  int64_t next_sfen_line(int64_t from, std::string* line) const;
  std::string path_;
  ReadOnlyFile file_;
  int64_t size_ = 0;
};

// Opens a book: into memory, or on the fly (BookOnTheFly).
std::unique_ptr<BookSource> open_book(const std::string& path, bool on_the_fly);

}  // namespace jiriki::book
