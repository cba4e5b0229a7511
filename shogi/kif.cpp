#include "shogi/kif.h"

#include <algorithm>
#include <cstdio>
#include <utility>

namespace jiriki {

namespace {

// KIF is read one code point at a time: the text is converted to UTF-32 line by line.
std::u32string to_u32(std::string_view s) {
  std::u32string out;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = s[i];
    int n = c < 0x80 ? 0 : c < 0xe0 ? 1 : c < 0xf0 ? 2 : 3;
    char32_t cp = n == 0 ? c : c & (0x3f >> n);
    for (int k = 1; k <= n && i + k < s.size(); ++k) cp = cp << 6 | (s[i + k] & 0x3f);
    out += cp;
    i += n + 1;
  }
  return out;
}

std::string to_utf8(std::u32string_view s) {
  std::string out;
  for (char32_t c : s) {
    if (c < 0x80) {
      out += char(c);
    } else if (c < 0x800) {
      out += char(0xc0 | c >> 6), out += char(0x80 | (c & 0x3f));
    } else if (c < 0x10000) {
      out += char(0xe0 | c >> 12), out += char(0x80 | ((c >> 6) & 0x3f)), out += char(0x80 | (c & 0x3f));
    } else {
      out += char(0xf0 | c >> 18), out += char(0x80 | ((c >> 12) & 0x3f));
      out += char(0x80 | ((c >> 6) & 0x3f)), out += char(0x80 | (c & 0x3f));
    }
  }
  return out;
}

// Piece names in moves, by PieceType (the piece before the move).
constexpr const char32_t* MOVE_NAME[PIECE_TYPE_NB] = {U"",   U"歩", U"香",   U"桂",   U"銀",   U"角", U"飛", U"金",
                                                      U"玉", U"と", U"成香", U"成桂", U"成銀", U"馬", U"龍"};
// One-character names on BOD boards, by PieceType; U'・' is an empty square.
constexpr char32_t BOARD_CHAR[PIECE_TYPE_NB] = {U'・', U'歩', U'香', U'桂', U'銀', U'角', U'飛', U'金',
                                                U'玉', U'と', U'杏', U'圭', U'全', U'馬', U'龍'};
// Other spellings found in KIF files.
constexpr std::pair<char32_t, PieceType> PIECE_ALIASES[] = {{U'王', KING}, {U'竜', DRAGON}};
constexpr char32_t RANK_CHARS[] = U"一二三四五六七八九";
constexpr char32_t FULLWIDTH_ONE = U'１';

constexpr std::pair<GameEnd, const char32_t*> END_WORDS[] = {
    {GameEnd::RESIGN, U"投了"},           {GameEnd::MATE, U"詰み"},      {GameEnd::SENNICHITE, U"千日手"},
    {GameEnd::DECLARATION, U"入玉勝ち"},  {GameEnd::IMPASSE, U"持将棋"}, {GameEnd::TIME_UP, U"切れ負け"},
    {GameEnd::ILLEGAL_MOVE, U"反則負け"}, {GameEnd::ABORT, U"中断"},     {GameEnd::MAX_MOVES, U"最大手数"},
};
constexpr const char32_t* ILLEGAL_WIN_WORD = U"反則勝ち";  // the side to move wins: the last move was illegal

// The standard start positions named by 手合割 (White, the stronger side, moves first in handicaps).
constexpr std::pair<const char*, const char*> HANDICAPS[] = {
    {"平手", "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1"},
    {"香落ち", "lnsgkgsn1/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"},
    {"右香落ち", "1nsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"},
    {"角落ち", "lnsgkgsnl/1r7/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"},
    {"飛車落ち", "lnsgkgsnl/7b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"},
    {"飛香落ち", "lnsgkgsn1/7b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"},
    {"二枚落ち", "lnsgkgsnl/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"},
    {"三枚落ち", "lnsgkgsn1/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"},
    {"四枚落ち", "1nsgkgsn1/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"},
    {"五枚落ち", "2sgkgsn1/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"},
    {"左五枚落ち", "1nsgkgs2/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"},
    {"六枚落ち", "2sgkgs2/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"},
    {"左七枚落ち", "2sgkg3/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"},
    {"右七枚落ち", "3gkgs2/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"},
    {"八枚落ち", "3gkg3/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"},
    {"十枚落ち", "4k4/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"},
};

bool is_space(char32_t c) { return c == U' ' || c == U'\t' || c == U'\u3000'; }

std::u32string_view trim(std::u32string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// A non-negative decimal number of at most 7 digits, or -1.
int parse_number(std::u32string_view s) {
  s = trim(s);
  if (s.empty() || s.size() > 7) return -1;
  int n = 0;
  for (char32_t c : s) {
    if (c < U'0' || c > U'9') return -1;
    n = n * 10 + int(c - U'0');
  }
  return n;
}

PieceType piece_from_char(char32_t c) {
  for (int pt = PAWN; pt < PIECE_TYPE_NB; ++pt)
    if (BOARD_CHAR[pt] == c) return PieceType(pt);
  for (auto [alias, pt] : PIECE_ALIASES)
    if (alias == c) return pt;
  return NO_PIECE_TYPE;
}

int rank_from_char(char32_t c) {
  for (int r = 0; r < 9; ++r)
    if (RANK_CHARS[r] == c) return r;
  return -1;
}

// Kanji counts of pieces in hand: 一..九, 十, 十一..十八.
int count_from_kanji(std::u32string_view s) {
  if (s.empty()) return 1;
  int n = 0;
  if (s.front() == U'十') n = 10, s.remove_prefix(1);
  if (s.size() == 1 && rank_from_char(s[0]) >= 0) return n + rank_from_char(s[0]) + 1;
  return s.empty() && n ? n : -1;
}

std::u32string kanji_count(int n) {
  std::u32string s;
  if (n >= 10) s += U'十';
  if (n % 10 && n > 1) s += RANK_CHARS[n % 10 - 1];
  return s;
}

// Parses a 持駒 value such as "飛　角　金二　歩十八" or "なし".
std::optional<std::string> parse_hand(std::u32string_view v, Hand& hand) {
  hand = Hand{};
  v = trim(v);
  if (v == U"なし") return std::nullopt;
  while (!v.empty()) {
    size_t end = 0;
    while (end < v.size() && !is_space(v[end])) ++end;
    std::u32string_view item = v.substr(0, end);
    PieceType pt = piece_from_char(item[0]);
    int n = count_from_kanji(item.substr(1));
    if (pt == NO_PIECE_TYPE || pt >= KING || n < 0 || hand[pt] + n > MAX_PIECES[pt])
      return "bad piece in hand '" + to_utf8(item) + "'";
    hand.count[pt] += n;
    v = trim(v.substr(end));
  }
  return std::nullopt;
}

class Reader {
 public:
  explicit Reader(GameRecord& rec) : rec_(rec) {}
  std::optional<std::string> line(std::u32string_view line);
  std::optional<std::string> finish() { return pos_ ? std::nullopt : set_start(); }
  bool stopped() const { return stopped_; }

 private:
  std::optional<std::string> header(std::u32string_view key, std::u32string_view value);
  std::optional<std::string> board_row(std::u32string_view line);
  std::optional<std::string> set_start();
  std::optional<std::string> move_line(std::u32string_view line);
  std::optional<std::string> parse_move(std::u32string_view& s, Move& m);

  GameRecord& rec_;
  std::optional<std::string> handicap_sfen_;
  bool other_handicap_ = false;
  bool bod_ = false;  // a BOD board was given
  int bod_rows_ = 0;
  std::array<Piece, SQ_NB> board_{};
  Hand hands_[COLOR_NB];
  Color bod_side_ = BLACK;
  int first_number_ = 1;
  std::optional<Position> pos_;  // set at the first move line
  bool ended_ = false, stopped_ = false;
};

std::optional<std::string> Reader::line(std::u32string_view text) {
  std::u32string_view t = trim(text);
  if (t.empty() || t[0] == U'#' || t[0] == U'*' || t[0] == U'&' || t.starts_with(U"まで")) return std::nullopt;
  if (t.starts_with(U"変化：")) {
    stopped_ = true;  // variations follow the main line; they are not read
    return std::nullopt;
  }
  if (t.starts_with(U"手数----")) return std::nullopt;
  if (t[0] >= U'0' && t[0] <= U'9') return move_line(t);
  size_t colon = t.find(U'：');
  if (pos_) {
    if (colon != std::u32string_view::npos) return std::nullopt;  // a header after the moves (終了日時, ...)
    return "unrecognised line in the moves '" + to_utf8(t) + "'";
  }
  if (t[0] == U'|') return board_row(t);
  if (t[0] == U'+' && t.find_first_not_of(U"+-") == std::u32string_view::npos) return std::nullopt;  // board frame
  if (t.find_first_not_of(U" \u3000１２３４５６７８９") == std::u32string_view::npos)
    return std::nullopt;  // file labels
  if (t == U"先手番" || t == U"下手番" || t == U"後手番" || t == U"上手番") {
    bod_ = true;
    bod_side_ = t == U"先手番" || t == U"下手番" ? BLACK : WHITE;
    return std::nullopt;
  }
  if (t.starts_with(U"手数＝")) {
    // A BOD position reached after N moves: the moves that follow are numbered from N + 1.
    size_t i = 3;
    int n = 0;
    while (i < t.size() && t[i] >= U'0' && t[i] <= U'9' && n < 100000) n = n * 10 + int(t[i++] - U'0');
    if (i == 3) return "bad move count '" + to_utf8(t) + "'";
    first_number_ = n + 1;
    return std::nullopt;
  }
  if (colon != std::u32string_view::npos) return header(t.substr(0, colon), trim(t.substr(colon + 1)));
  return "unrecognised line '" + to_utf8(t) + "'";
}

std::optional<std::string> Reader::header(std::u32string_view key, std::u32string_view value) {
  std::string v = to_utf8(value);
  if (key == U"開始日時") rec_.start_time = v;
  else if (key == U"棋戦") rec_.event = v;
  else if (key == U"先手" || key == U"下手") rec_.black = v;
  else if (key == U"後手" || key == U"上手") rec_.white = v;
  else if (key == U"手合割") {
    if (v == "その他") {
      other_handicap_ = true;
      return std::nullopt;
    }
    for (auto [name, sfen] : HANDICAPS)
      if (v == name) {
        handicap_sfen_ = sfen;
        return std::nullopt;
      }
    return "unknown handicap '" + v + "'";
  } else if (key == U"先手の持駒" || key == U"下手の持駒" || key == U"後手の持駒" || key == U"上手の持駒") {
    bod_ = true;
    return parse_hand(value, hands_[key[0] == U'先' || key[0] == U'下' ? BLACK : WHITE]);
  }
  return std::nullopt;  // other headers (場所, 持ち時間, ...) are not kept
}

std::optional<std::string> Reader::board_row(std::u32string_view t) {
  bod_ = true;
  if (bod_rows_ == 9) return std::string("more than 9 board rows");
  if (t.size() < 20 || t[19] != U'|') return "bad board row '" + to_utf8(t) + "'";
  int rank = bod_rows_++;
  for (int k = 0; k < 9; ++k) {
    char32_t side = t[1 + 2 * k], c = t[2 + 2 * k];
    Square s = make_square(8 - k, rank);
    if (c == BOARD_CHAR[NO_PIECE_TYPE]) {
      board_[s] = NO_PIECE;
      continue;
    }
    PieceType pt = piece_from_char(c);
    if (pt == NO_PIECE_TYPE || (side != U' ' && side != U'v'))
      return "bad square '" + to_utf8(t.substr(1 + 2 * k, 2)) + "' in board row '" + to_utf8(t) + "'";
    board_[s] = make_piece(side == U'v' ? WHITE : BLACK, pt);
  }
  return std::nullopt;
}

std::optional<std::string> Reader::set_start() {
  std::string sfen = Position::STARTPOS_SFEN;
  if (bod_) {
    if (bod_rows_ != 9) return "the board has " + std::to_string(bod_rows_) + " rows instead of 9";
    sfen = sfen_from_board(board_, hands_, bod_side_);
  } else if (other_handicap_) {
    return std::string("手合割：その他 without a board");
  } else if (handicap_sfen_) {
    sfen = *handicap_sfen_;
  }
  Position pos;
  if (auto err = pos.set_sfen(sfen)) return "invalid start position " + sfen + ": " + *err;
  rec_.start = pos;
  pos_ = pos;
  return std::nullopt;
}

std::optional<std::string> Reader::move_line(std::u32string_view t) {
  if (!pos_)
    if (auto err = set_start()) return err;
  size_t i = 0;
  int number = 0;
  while (i < t.size() && t[i] >= U'0' && t[i] <= U'9' && number < 100000) number = number * 10 + int(t[i++] - U'0');
  if (ended_) return "move after the end of the game '" + to_utf8(t) + "'";
  int expected = first_number_ + int(rec_.moves.size());
  if (number != expected)
    return "move number " + std::to_string(number) + " where " + std::to_string(expected) + " was expected";
  std::u32string_view s = trim(t.substr(i));

  for (auto [end, word] : END_WORDS)
    if (s.starts_with(word)) {
      rec_.end = end;
      ended_ = true;
      return std::nullopt;
    }
  if (s.starts_with(ILLEGAL_WIN_WORD)) {
    rec_.end = pos_->side_to_move() == BLACK ? GameEnd::WHITE_ILLEGAL_ACTION : GameEnd::BLACK_ILLEGAL_ACTION;
    ended_ = true;
    return std::nullopt;
  }

  Move m = MOVE_NONE;
  std::u32string_view rest = s;
  if (auto err = parse_move(rest, m)) return *err + " in '" + to_utf8(s) + "'";
  // What may follow: the time "( 0:01/00:00:01)" and a '+' that marks a move with variations.
  int secs = -1;
  rest = trim(rest);
  if (rest.starts_with(U"(")) {
    size_t close = rest.find(U')'), colon = rest.find(U':'), slash = rest.find(U'/');
    if (close == std::u32string_view::npos || colon > slash || slash > close) return "bad time in '" + to_utf8(s) + "'";
    int min = parse_number(rest.substr(1, colon - 1)), sec = parse_number(rest.substr(colon + 1, slash - colon - 1));
    if (min < 0 || sec < 0 || sec >= 60) return "bad time in '" + to_utf8(s) + "'";
    secs = min * 60 + sec;  // at most 9999999 minutes: no overflow
    if (secs > MAX_MOVE_SECONDS)
      return "time over " + std::to_string(MAX_MOVE_SECONDS) + " seconds in '" + to_utf8(s) + "'";
    rest = trim(rest.substr(close + 1));
  }
  if (rest == U"+") rest = {};
  if (!rest.empty()) return "unexpected text after the move in '" + to_utf8(s) + "'";
  pos_->do_move(m);
  rec_.add_move(m, secs);
  return std::nullopt;
}

// Parses "７六歩(77)", "同　歩(23)", "２二角成(88)", "４五角打", "２四銀不成(33)" and checks the move.
std::optional<std::string> Reader::parse_move(std::u32string_view& s, Move& m) {
  const Position& pos = *pos_;
  Square to;
  if (s.starts_with(U"同")) {
    if (rec_.moves.empty()) return std::string("同 without a previous move");
    to = move_to(rec_.moves.back());
    s.remove_prefix(1);
    while (!s.empty() && is_space(s[0])) s.remove_prefix(1);
  } else {
    if (s.size() < 2) return std::string("bad destination");
    int file = int(s[0]) - int(FULLWIDTH_ONE), rank = rank_from_char(s[1]);
    if (file < 0 || file > 8 || rank < 0) return std::string("bad destination");
    to = make_square(file, rank);
    s.remove_prefix(2);
  }
  PieceType pt = NO_PIECE_TYPE;
  if (s.size() >= 2 && s[0] == U'成') {
    for (PieceType p : {PRO_LANCE, PRO_KNIGHT, PRO_SILVER})
      if (s.starts_with(MOVE_NAME[p])) pt = p;
    s.remove_prefix(2);
  } else if (!s.empty()) {
    pt = piece_from_char(s[0]);
    s.remove_prefix(1);
  }
  if (pt == NO_PIECE_TYPE) return std::string("bad piece name");
  bool promote = false, drop = false;
  if (s.starts_with(U"不成")) s.remove_prefix(2);
  else if (s.starts_with(U"成")) promote = true, s.remove_prefix(1);
  else if (s.starts_with(U"打")) drop = true, s.remove_prefix(1);

  Square from = SQ_NONE;
  if (s.starts_with(U"(")) {
    if (drop || s.size() < 4 || s[3] != U')' || s[1] < U'1' || s[1] > U'9' || s[2] < U'1' || s[2] > U'9')
      return std::string("bad origin square");
    from = make_square(int(s[1] - U'1'), int(s[2] - U'1'));
    s.remove_prefix(4);
  }
  if (from == SQ_NONE) {
    // A move without an origin is a drop, with or without 打.
    if (pt >= KING || promote) return "cannot drop " + to_utf8(MOVE_NAME[pt]);
    m = make_drop(pt, to);
  } else {
    Piece p = pos.piece_on(from);
    if (p == NO_PIECE || color_of(p) != pos.side_to_move() || type_of(p) != pt)
      return "no " + to_utf8(MOVE_NAME[pt]) + " of the side to move on " + square_to_usi(from);
    if (promote && !can_promote(pt)) return to_utf8(MOVE_NAME[pt]) + " cannot promote";
    m = make_move(from, to, promote);
  }
  if (!pos.is_legal(m)) return "illegal move " + move_to_usi(m) + " in position " + pos.sfen();
  return std::nullopt;
}

// Display width as KIF aligns columns: full-width characters count two.
int width(std::u32string_view s) {
  int w = 0;
  for (char32_t c : s) w += c < 0x80 ? 1 : 2;
  return w;
}

std::u32string move_text(const Position& pos, Move m, Move previous) {
  Square to = move_to(m);
  std::u32string s;
  PieceType pt = type_of(pos.moved_piece(m));
  if (previous != MOVE_NONE && move_to(previous) == to) {
    s = U"同";
    if (width(MOVE_NAME[pt]) == 2) s += U'\u3000';
  } else {
    s = {char32_t(FULLWIDTH_ONE + file_of(to)), RANK_CHARS[rank_of(to)]};
  }
  s += MOVE_NAME[pt];
  if (is_drop(m)) return s + U"打";
  Square from = move_from(m);
  if (is_promotion(m)) {
    s += U"成";
  } else if (can_promote(pt) &&
             (in_promotion_zone(pos.side_to_move(), from) || in_promotion_zone(pos.side_to_move(), to))) {
    s += U"不成";
  }
  s += {U'(', char32_t(U'1' + file_of(from)), char32_t(U'1' + rank_of(from)), U')'};
  return s;
}

std::u32string hand_text(const Hand& hand) {
  if (hand.empty()) return U"なし";
  std::u32string s;
  for (PieceType pt : {ROOK, BISHOP, GOLD, SILVER, KNIGHT, LANCE, PAWN})
    if (hand[pt]) s += BOARD_CHAR[pt] + kanji_count(hand[pt]) + U'\u3000';
  return s;
}

std::u32string bod_text(const Position& pos) {
  std::u32string s = U"後手の持駒：" + hand_text(pos.hand(WHITE)) + U"\n";
  s += U"  ９ ８ ７ ６ ５ ４ ３ ２ １\n+---------------------------+\n";
  for (int rank = 0; rank < 9; ++rank) {
    s += U'|';
    for (int file = 8; file >= 0; --file) {
      Piece p = pos.piece_on(make_square(file, rank));
      s += p != NO_PIECE && color_of(p) == WHITE ? U'v' : U' ';
      s += BOARD_CHAR[type_of(p)];
    }
    s += U'|';
    s += RANK_CHARS[rank];
    s += U'\n';
  }
  s += U"+---------------------------+\n先手の持駒：" + hand_text(pos.hand(BLACK)) + U"\n";
  if (pos.side_to_move() == WHITE) s += U"後手番\n";
  return s;
}

}  // namespace

std::string board_diagram(const Position& pos) { return to_utf8(bod_text(pos)); }

std::string move_to_kif(const Position& pos, Move m, Move previous) { return to_utf8(move_text(pos, m, previous)); }

std::optional<std::string> read_kif(std::string_view bytes, GameRecord& rec) {
  std::string text;
  if (auto err = decode_record_text(bytes, text)) return "kif: " + *err;
  rec = GameRecord{};
  Reader reader(rec);
  std::vector<std::string> lines = split_lines(text);
  for (size_t i = 0; i < lines.size() && !reader.stopped(); ++i)
    if (auto err = reader.line(to_u32(lines[i]))) return "kif: line " + std::to_string(i + 1) + ": " + *err;
  if (auto err = reader.finish()) return "kif: " + *err;
  return std::nullopt;
}

std::string write_kif(const GameRecord& rec, TextEncoding enc) {
  std::string sfen = rec.start.sfen(false);
  const char* handicap = nullptr;
  for (auto [name, hsfen] : HANDICAPS) {
    Position h;
    h.set_sfen(hsfen);
    if (h.sfen(false) == sfen) handicap = name;
  }
  bool even = handicap && std::string_view(handicap) == "平手";
  std::u32string s = U"# KIF形式棋譜ファイル jiriki\n";
  if (!rec.start_time.empty()) s += U"開始日時：" + to_u32(rec.start_time) + U"\n";
  if (!rec.event.empty()) s += U"棋戦：" + to_u32(rec.event) + U"\n";
  if (handicap) s += U"手合割：" + to_u32(handicap) + U"\n";
  else s += bod_text(rec.start);
  s += (even || !handicap ? U"先手：" : U"下手：") + to_u32(rec.black) + U"\n";
  s += (even || !handicap ? U"後手：" : U"上手：") + to_u32(rec.white) + U"\n";
  s += U"手数----指手---------消費時間--\n";

  Position pos = rec.start;
  int64_t total[COLOR_NB] = {0, 0};  // a long game of long moves passes an int
  char buf[64];
  for (size_t i = 0; i < rec.moves.size(); ++i) {
    Move m = rec.moves[i];
    std::u32string text = move_text(pos, m, i ? rec.moves[i - 1] : MOVE_NONE);
    int secs = i < rec.seconds.size() && rec.seconds[i] > 0 ? rec.seconds[i] : 0;
    int64_t& t = total[pos.side_to_move()];
    t += secs;
    std::snprintf(buf, sizeof buf, "%4zu ", i + 1);
    s += to_u32(buf) + text + std::u32string(std::max(1, 13 - width(text)), U' ');
    std::snprintf(buf, sizeof buf, "(%2d:%02d/%02lld:%02lld:%02lld)\n", secs / 60, secs % 60, (long long)(t / 3600),
                  (long long)(t / 60 % 60), (long long)(t % 60));
    s += to_u32(buf);
    pos.do_move(m);
  }
  const char32_t* word = nullptr;
  for (auto [end, w] : END_WORDS)
    if (rec.end == end) word = w;
  if (rec.end == GameEnd::BLACK_ILLEGAL_ACTION || rec.end == GameEnd::WHITE_ILLEGAL_ACTION) {
    Color loser = rec.end == GameEnd::BLACK_ILLEGAL_ACTION ? BLACK : WHITE;
    word = loser == pos.side_to_move() ? U"反則負け" : ILLEGAL_WIN_WORD;
  }
  if (word) {
    std::snprintf(buf, sizeof buf, "%4zu ", rec.moves.size() + 1);
    s += to_u32(buf) + word + U"\n";
  }
  if (auto result = game_result(rec)) {
    std::u32string n = to_u32(std::to_string(rec.moves.size()));
    if (*result == DRAW) {
      s += U"まで" + n + U"手で" +
           (rec.end == GameEnd::SENNICHITE  ? U"千日手"
            : rec.end == GameEnd::MAX_MOVES ? U"最大手数"
                                            : U"持将棋") +
           U"\n";
    } else {
      bool black = *result == BLACK_WIN;
      const char32_t* side = even || !handicap ? (black ? U"先手" : U"後手") : (black ? U"下手" : U"上手");
      s += U"まで" + n + U"手で" + side + U"の勝ち\n";
    }
  } else if (rec.end == GameEnd::ABORT) {
    s += U"まで" + to_u32(std::to_string(rec.moves.size())) + U"手で中断\n";
  }
  // Kifu for Windows writes CRLF line ends.
  std::string out;
  for (char c : to_utf8(s)) {
    if (c == '\n') out += '\r';
    out += c;
  }
  return encode_record_text(out, enc);
}

}  // namespace jiriki
