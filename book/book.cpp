// Reading, writing and looking up YaneuraOu-format books (see book.h).
#include "book/book.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "common/atomic_file.h"

namespace jiriki::book {

namespace {

std::vector<std::string_view> split_words(std::string_view s) {
  std::vector<std::string_view> w;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    size_t b = i;
    while (i < s.size() && s[i] != ' ' && s[i] != '\t') ++i;
    if (i > b) w.push_back(s.substr(b, i - b));
  }
  return w;
}

template <typename T>
bool parse_number(std::string_view s, T& out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace((unsigned char)s[b])) ++b;
  while (e > b && std::isspace((unsigned char)s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

bool is_comment(const std::string& line) { return line[0] == '#' || line.starts_with("//"); }

// Splits "sfen BOARD SIDE HANDS [PLY]" into its key and move number (0 when absent); the key is
// checked and made canonical through Position. Returns an error message, or nullopt.
std::optional<std::string> parse_sfen_line(std::string_view rest, std::string& key, int& ply, Position& pos) {
  auto w = split_words(rest);
  if (w.size() != 3 && w.size() != 4) return "expected 'sfen BOARD SIDE HANDS PLY'";
  ply = 0;
  if (w.size() == 4 && (!parse_number(w[3], ply) || ply < 1)) return "bad move number '" + std::string(w[3]) + "'";
  std::string sfen = std::string(w[0]) + " " + std::string(w[1]) + " " + std::string(w[2]) + " 1";
  if (auto err = pos.set_sfen(sfen)) return "bad SFEN: " + *err;
  key = pos.sfen(false);
  return std::nullopt;
}

bool key_less(const BookPosition& a, const BookPosition& b) { return a.key != b.key ? a.key < b.key : a.ply < b.ply; }

}  // namespace

void sort_moves(std::vector<BookMove>& moves) {
  std::stable_sort(moves.begin(), moves.end(), [](const BookMove& a, const BookMove& b) {
    return a.count != b.count ? a.count > b.count : a.value > b.value;
  });
}

std::string format_position(const BookPosition& p) {
  std::string s = "sfen " + p.key;
  if (p.ply > 0) s += " " + std::to_string(p.ply);
  s += "\n";
  for (const BookMove& m : p.moves) {
    s += move_to_usi(m.move);
    s += " ";
    s += m.ponder == MOVE_NONE ? "none" : move_to_usi(m.ponder);
    s += " " + std::to_string(m.value) + " " + std::to_string(m.depth) + " " + std::to_string(m.count) + "\n";
  }
  return s;
}

std::optional<BookMove> parse_move_line(const std::string& line, std::string& error) {
  auto w = split_words(line);
  if (w.size() < 2) {
    error = "expected 'MOVE PONDER [VALUE DEPTH COUNT]'";
    return std::nullopt;
  }
  BookMove m;
  Position unused;
  m.move = move_from_usi(unused, w[0]);
  if (m.move == MOVE_NONE) {
    error = "malformed move '" + std::string(w[0]) + "'";
    return std::nullopt;
  }
  if (w[1] != "none") {
    m.ponder = move_from_usi(unused, w[1]);
    if (m.ponder == MOVE_NONE) {
      error = "malformed reply '" + std::string(w[1]) + "' (a move or 'none')";
      return std::nullopt;
    }
  }
  m.count = 1;
  if ((w.size() > 2 && !parse_number(w[2], m.value)) || (w.size() > 3 && !parse_number(w[3], m.depth)) ||
      (w.size() > 4 && !parse_number(w[4], m.count))) {
    error = "VALUE, DEPTH and COUNT must be integers (COUNT not negative)";
    return std::nullopt;
  }
  return m;
}

std::string flip_key(const std::string& key) {
  auto w = split_words(key);
  if (w.size() != 3) return key;
  auto swap_case = [](std::string s) {
    for (char& c : s) c = std::isupper((unsigned char)c) ? char(std::tolower(c)) : char(std::toupper(c));
    return s;
  };
  // Board: read backwards (the last square first), a '+' staying in front of its letter, cases swapped.
  const std::string_view in = w[0];
  std::string board;
  board.reserve(in.size());
  for (size_t i = in.size(); i-- > 0;) {
    const char c = in[i];
    const bool promoted = i > 0 && in[i - 1] == '+';
    if (promoted) board += '+', --i;
    board += std::isupper((unsigned char)c) ? char(std::tolower(c)) : char(std::toupper(c));
  }
  // Hands: Black's pieces come first (upper case), then White's; each half keeps its piece order.
  std::string hands = std::string(w[2]), black, white;
  if (hands != "-") {
    size_t split = 0;
    while (split < hands.size() && !std::islower((unsigned char)hands[split])) ++split;
    // Counts belong to the letter after them: move the split back over a count before a lower-case letter.
    while (split > 0 && std::isdigit((unsigned char)hands[split - 1])) --split;
    black = hands.substr(0, split);
    white = hands.substr(split);
    hands = swap_case(white) + swap_case(black);
  }
  return board + " " + (w[1] == "b" ? "w" : "b") + " " + hands;
}

Move flip_move(Move m) {
  if (m == MOVE_NONE) return m;
  if (is_drop(m)) return make_drop(drop_type(m), rotate180(move_to(m)));
  return make_move(rotate180(move_from(m)), rotate180(move_to(m)), is_promotion(m));
}

std::vector<BookMove> probe(const BookSource& book, const Position& pos, const LookupOptions& opt) {
  auto pick = [&](const std::vector<BookPosition>& found) -> const BookPosition* {
    const BookPosition* best = nullptr;
    for (const BookPosition& p : found) {
      if (opt.ignore_ply) {
        if (!best || p.ply < best->ply) best = &p;
      } else if (p.ply == 0 || p.ply == pos.game_ply()) {
        return &p;
      }
    }
    return best;
  };
  const std::string key = pos.sfen(false);
  std::vector<BookPosition> found = book.find(key);
  if (const BookPosition* p = pick(found)) return p->moves;
  if (!opt.flipped || pos.side_to_move() != WHITE) return {};
  found = book.find(flip_key(key));
  const BookPosition* p = pick(found);
  if (!p) return {};
  std::vector<BookMove> moves = p->moves;
  for (BookMove& m : moves) {
    m.move = flip_move(m.move);
    m.ponder = flip_move(m.ponder);
  }
  return moves;
}

// ---- Book ------------------------------------------------------------------------------------

Book Book::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open book " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return parse(s.str(), path);
}

Book Book::parse(const std::string& text, const std::string& name) {
  Book book;
  book.name_ = name;
  std::map<std::pair<std::string, int>, int> first_line;  // position -> its line, to name duplicates
  Position pos;
  BookPosition* current = nullptr;
  bool header = false;
  int number = 0;
  auto fail = [&](const std::string& why) {
    throw std::runtime_error(name + ":" + std::to_string(number) + ": " + why);
  };
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = trim(std::string_view(text).substr(start, end - start));
    start = end + 1;
    ++number;
    if (line.empty()) continue;
    if (!header) {
      if (!line.starts_with("#YANEURAOU-DB2016"))
        fail("not a YaneuraOu book: the first line must be '" + std::string(HEADER) + "'");
      header = true;
      continue;
    }
    if (is_comment(line)) continue;
    if (line.starts_with("sfen ")) {
      BookPosition p;
      if (auto err = parse_sfen_line(std::string_view(line).substr(5), p.key, p.ply, pos)) fail(*err);
      auto [it, fresh] = first_line.emplace(std::make_pair(p.key, p.ply), number);
      if (!fresh) fail("position given twice (first at line " + std::to_string(it->second) + ")");
      if (!book.positions_.empty() && !key_less(book.positions_.back(), p)) book.sorted_ = false;
      book.positions_.push_back(std::move(p));
      current = &book.positions_.back();
      continue;
    }
    if (!current) fail("a move line before any 'sfen' line");
    std::string error;
    std::optional<BookMove> m = parse_move_line(line, error);
    if (!m) fail(error);
    if (!pos.is_legal(m->move)) fail("illegal move " + move_to_usi(m->move) + " in " + current->key);
    for (const BookMove& other : current->moves)
      if (other.move == m->move) fail("move " + move_to_usi(m->move) + " given twice for one position");
    current->moves.push_back(*m);
  }
  if (!header) throw std::runtime_error(name + ": empty file, not a YaneuraOu book");
  return book;
}

void Book::add(BookPosition p) {
  if (!positions_.empty() && !key_less(positions_.back(), p)) sorted_ = false;
  positions_.push_back(std::move(p));
}

void Book::sort() const {
  if (sorted_) return;
  std::stable_sort(positions_.begin(), positions_.end(), key_less);
  // Merge entries of one position: moves already present keep their line and add the counts.
  std::vector<BookPosition> merged;
  merged.reserve(positions_.size());
  for (BookPosition& p : positions_) {
    if (merged.empty() || merged.back().key != p.key || merged.back().ply != p.ply) {
      merged.push_back(std::move(p));
      continue;
    }
    std::vector<BookMove>& into = merged.back().moves;
    for (const BookMove& m : p.moves) {
      auto same = std::find_if(into.begin(), into.end(), [&](const BookMove& o) { return o.move == m.move; });
      if (same == into.end()) into.push_back(m);
      else same->count += m.count;
    }
  }
  positions_ = std::move(merged);
  sorted_ = true;
}

const std::vector<BookPosition>& Book::positions() const {
  sort();
  return positions_;
}

std::string Book::text() const {
  // Sorted as the text after "sfen " sorts: by key (a key that is a prefix of another comes first,
  // as ' ' sorts before any SFEN character), then by move number as text, as YaneuraOu compares lines.
  std::vector<const BookPosition*> order;
  for (const BookPosition& p : positions()) order.push_back(&p);
  std::stable_sort(order.begin(), order.end(), [](const BookPosition* a, const BookPosition* b) {
    if (a->key != b->key) return a->key < b->key;
    return (a->ply ? std::to_string(a->ply) : "") < (b->ply ? std::to_string(b->ply) : "");
  });
  std::string s = std::string(HEADER) + "\n";
  for (const BookPosition* p : order) {
    if (p->moves.empty()) continue;
    BookPosition sorted = *p;
    sort_moves(sorted.moves);
    s += format_position(sorted);
  }
  return s;
}

void Book::save(const std::string& path) const { write_file_atomically(path, text()); }

std::vector<BookPosition> Book::find(const std::string& key) const {
  sort();
  std::vector<BookPosition> out;
  BookPosition probe_key{key, 0, {}};
  for (auto it = std::lower_bound(positions_.begin(), positions_.end(), probe_key, key_less);
       it != positions_.end() && it->key == key; ++it)
    out.push_back(*it);
  return out;
}

std::string Book::describe() const { return name_ + ": " + std::to_string(size()) + " positions in memory"; }

// ---- BookFile --------------------------------------------------------------------------------

BookFile::BookFile(const std::string& path) : path_(path), file_(path, "book"), size_(file_.size()) {
  std::string head = read_at(0, 64);
  if (!head.starts_with("#YANEURAOU-DB2016")) {
    throw std::runtime_error(path + ":1: not a YaneuraOu book: the first line must be '" + std::string(HEADER) + "'");
  }
}

std::string BookFile::read_at(int64_t offset, int64_t length) const {
  std::string buf(size_t(std::max<int64_t>(0, std::min(length, size_ - offset))), '\0');
  size_t done = 0;
  while (done < buf.size()) {
    const int64_t n = file_.read_at(offset + int64_t(done), buf.data() + done, buf.size() - done);
    if (n <= 0) throw std::runtime_error("cannot read book " + path_);
    done += size_t(n);
  }
  return buf;
}

int64_t BookFile::next_sfen_line(int64_t from, std::string* line) const {
  constexpr int64_t CHUNK = 1024;  // longer than any line of a book (an SFEN line is under 200 bytes)
  while (from < size_) {
    // Read from the byte before `from`: a line starts at 0 or right after a '\n'.
    const int64_t base = std::max<int64_t>(0, from - 1);
    const std::string buf = read_at(base, CHUNK);
    const bool at_eof = base + int64_t(buf.size()) >= size_;
    size_t i = from == 0 ? 0 : buf.find('\n');
    if (i == std::string::npos) {
      from = base + int64_t(buf.size());
      continue;
    }
    if (from != 0) ++i;
    while (i < buf.size()) {
      const size_t e = buf.find('\n', i);
      if (e == std::string::npos && !at_eof) break;  // the line goes on past the chunk: read again from it
      const std::string_view l = std::string_view(buf).substr(i, e == std::string::npos ? std::string::npos : e - i);
      if (l.starts_with("sfen ")) {
        *line = std::string(l);
        if (!line->empty() && line->back() == '\r') line->pop_back();
        return base + int64_t(i);
      }
      if (e == std::string::npos) return -1;
      i = e + 1;
    }
    if (at_eof && i >= buf.size()) return -1;
    if (base + int64_t(i) <= from && i < buf.size())
      throw std::runtime_error(path_ + ": a line longer than 1 KB at byte " + std::to_string(from));
    from = base + int64_t(i);
  }
  return -1;
}

std::vector<BookPosition> BookFile::find(const std::string& key) const {
  // Lower bound over byte offsets: sfen lines starting before lo have keys < key, those starting at
  // or after hi have keys >= key.
  auto key_of = [](const std::string& line) {
    auto w = split_words(std::string_view(line).substr(5));
    return w.size() >= 3 ? std::string(w[0]) + " " + std::string(w[1]) + " " + std::string(w[2]) : std::string();
  };
  int64_t lo = 0, hi = size_;
  std::string line;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    const int64_t at = next_sfen_line(mid, &line);
    if (at < 0 || at >= hi || key_of(line) >= key) {
      hi = mid;
    } else {
      lo = at + 1;
    }
  }
  std::vector<BookPosition> out;
  int64_t at = next_sfen_line(lo, &line);
  while (at >= 0 && key_of(line) == key) {
    BookPosition p;
    Position pos;
    if (auto err = parse_sfen_line(std::string_view(line).substr(5), p.key, p.ply, pos))
      throw std::runtime_error(path_ + ": at byte " + std::to_string(at) + ": " + *err);
    // The move lines up to the next "sfen " line.
    int64_t next = at + int64_t(line.size()) + 1;
    std::string following;
    int64_t next_at = next_sfen_line(next, &following);
    std::string body = read_at(next, (next_at < 0 ? size_ : next_at) - next);
    std::istringstream lines(body);
    for (std::string l; std::getline(lines, l);) {
      l = trim(l);
      if (l.empty() || is_comment(l)) continue;
      std::string error;
      std::optional<BookMove> m = parse_move_line(l, error);
      if (!m) throw std::runtime_error(path_ + ": after byte " + std::to_string(next) + ": " + error);
      p.moves.push_back(*m);
    }
    out.push_back(std::move(p));
    at = next_at;
    line = following;
  }
  return out;
}

std::string BookFile::describe() const { return path_ + ": " + std::to_string(size_) + " bytes, read on the fly"; }

std::unique_ptr<BookSource> open_book(const std::string& path, bool on_the_fly) {
  if (on_the_fly) return std::make_unique<BookFile>(path);
  return std::make_unique<Book>(Book::load(path));
}

}  // namespace jiriki::book
