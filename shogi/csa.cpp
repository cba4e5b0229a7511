#include "shogi/csa.h"

#include <utility>

namespace jiriki {

namespace {

// CSA piece codes by PieceType.
constexpr const char* PIECE_CODE[PIECE_TYPE_NB] = {"",   "FU", "KY", "KE", "GI", "KA", "HI", "KI",
                                                   "OU", "TO", "NY", "NK", "NG", "UM", "RY"};

constexpr std::pair<GameEnd, const char*> END_CODES[] = {
    {GameEnd::RESIGN, "%TORYO"},
    {GameEnd::MATE, "%TSUMI"},
    {GameEnd::SENNICHITE, "%SENNICHITE"},
    {GameEnd::DECLARATION, "%KACHI"},
    {GameEnd::IMPASSE, "%JISHOGI"},
    {GameEnd::TIME_UP, "%TIME_UP"},
    {GameEnd::ILLEGAL_MOVE, "%ILLEGAL_MOVE"},
    {GameEnd::BLACK_ILLEGAL_ACTION, "%+ILLEGAL_ACTION"},
    {GameEnd::WHITE_ILLEGAL_ACTION, "%-ILLEGAL_ACTION"},
    {GameEnd::ABORT, "%CHUDAN"},
    {GameEnd::MAX_MOVES, "%MAX_MOVES"},
};

PieceType piece_from_code(std::string_view code) {
  for (int pt = PAWN; pt < PIECE_TYPE_NB; ++pt)
    if (code == PIECE_CODE[pt]) return PieceType(pt);
  return NO_PIECE_TYPE;
}

// "77" -> square; SQ_NONE when not a board square.
Square square_from_digits(char f, char r) {
  if (f < '1' || f > '9' || r < '1' || r > '9') return SQ_NONE;
  return make_square(f - '1', r - '1');
}

std::string square_digits(Square s) { return {char('1' + file_of(s)), char('1' + rank_of(s))}; }

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

// What the reader has seen so far; statements are fed one at a time.
class Reader {
 public:
  explicit Reader(GameRecord& rec) : rec_(rec) {}
  std::optional<std::string> statement(std::string_view st);
  std::optional<std::string> finish() const {
    if (!pos_) return std::string("no start position (PI, P1-P9 or P+/P-, then the side to move)");
    return std::nullopt;
  }

 private:
  std::optional<std::string> position_line(std::string_view st);
  std::optional<std::string> put(Color c, Square s, PieceType pt, std::string_view item);
  std::optional<std::string> start_moves(Color side);
  std::optional<std::string> move(std::string_view st);

  GameRecord& rec_;
  std::array<Piece, SQ_NB> board_{};
  Hand hands_[COLOR_NB];
  bool position_given_ = false, all_given_ = false;
  std::optional<Position> pos_;  // set once the side-to-move line has been read
  bool ended_ = false;
};

std::optional<std::string> Reader::statement(std::string_view st) {
  while (!st.empty() && (st.back() == ' ' || st.back() == '\t')) st.remove_suffix(1);
  if (st.empty()) return std::nullopt;
  char c = st[0];
  if (c == 'V') {
    if (pos_ || !(st.starts_with("V2") || st.starts_with("V3"))) return "unexpected version line " + quoted(st);
    return std::nullopt;
  }
  if (c == 'N' && st.size() >= 2 && (st[1] == '+' || st[1] == '-')) {
    (st[1] == '+' ? rec_.black : rec_.white) = st.substr(2);
    return std::nullopt;
  }
  if (c == '$') {
    size_t colon = st.find(':');
    if (colon == std::string_view::npos) return "information line without ':' " + quoted(st);
    std::string_view key = st.substr(1, colon - 1), value = st.substr(colon + 1);
    if (key == "EVENT") rec_.event = value;
    if (key == "START_TIME") rec_.start_time = value;
    return std::nullopt;
  }
  if (c == 'P') {
    if (pos_) return "position line after the side to move " + quoted(st);
    return position_line(st);
  }
  if ((c == '+' || c == '-') && st.size() == 1) {
    if (pos_) return std::string("second side-to-move line");
    return start_moves(c == '+' ? BLACK : WHITE);
  }
  if (c == '+' || c == '-') return move(st);
  if (c == 'T') {
    if (!pos_ || rec_.moves.empty()) return "time line before any move " + quoted(st);
    if (ended_) return std::nullopt;  // the time of the final statement is not kept
    size_t i = 1;
    int64_t secs = 0;
    while (i < st.size() && st[i] >= '0' && st[i] <= '9') {
      secs = secs * 10 + (st[i++] - '0');
      if (secs > MAX_MOVE_SECONDS) return "time over " + std::to_string(MAX_MOVE_SECONDS) + " seconds " + quoted(st);
    }
    const size_t digits = i - 1;
    if (i < st.size() && st[i] == '.') ++i;  // V3 fractions of a second are dropped
    while (digits > 0 && i < st.size() && st[i] >= '0' && st[i] <= '9') ++i;
    if (digits == 0 || i != st.size()) return "bad time line " + quoted(st);
    rec_.seconds.back() = int(secs);
    return std::nullopt;
  }
  if (c == '%') {
    if (!pos_) return "end statement before the start position " + quoted(st);
    if (ended_) return "second end statement " + quoted(st);
    for (auto [end, code] : END_CODES)
      if (st == code) {
        rec_.end = end;
        ended_ = true;
        return std::nullopt;
      }
    return "unknown end statement " + quoted(st);
  }
  if (c == '/') return std::string("several games in one file are not supported");
  return "unrecognised statement " + quoted(st);
}

std::optional<std::string> Reader::put(Color c, Square s, PieceType pt, std::string_view item) {
  if (pt == NO_PIECE_TYPE) return "bad piece code in " + quoted(item);
  if (s == SQ_NONE) return "bad square in " + quoted(item);
  if (board_[s] != NO_PIECE) return "square " + square_digits(s) + " is already occupied in " + quoted(item);
  board_[s] = make_piece(c, pt);
  return std::nullopt;
}

std::optional<std::string> Reader::position_line(std::string_view st) {
  position_given_ = true;
  if (st.starts_with("PI")) {
    Position start;
    for (Square s = 0; s < SQ_NB; ++s) board_[s] = start.piece_on(s);
    std::string_view items = st.substr(2);
    if (items.size() % 4) return "bad PI line " + quoted(st);
    for (size_t i = 0; i < items.size(); i += 4) {
      std::string_view item = items.substr(i, 4);
      Square s = square_from_digits(item[0], item[1]);
      PieceType pt = piece_from_code(item.substr(2));
      if (s == SQ_NONE || pt == NO_PIECE_TYPE || type_of(board_[s]) != pt || pt == KING)
        return "PI: cannot remove " + quoted(item) + " from the start position";
      board_[s] = NO_PIECE;
    }
    return std::nullopt;
  }
  if (st.size() >= 2 && st[1] >= '1' && st[1] <= '9') {
    int rank = st[1] - '1';
    std::string row(st.substr(2));
    if (row.size() > 27) return "row longer than 9 squares " + quoted(st);
    row.resize(27, ' ');  // trailing empty squares may have lost their spaces
    for (int k = 0; k < 9; ++k) {
      std::string_view field = std::string_view(row).substr(3 * k, 3);
      Square s = make_square(8 - k, rank);
      board_[s] = NO_PIECE;
      if (field == " * " || field == "   ") continue;
      if (field[0] != '+' && field[0] != '-') return "bad square " + quoted(field) + " in " + quoted(st);
      if (auto err = put(field[0] == '+' ? BLACK : WHITE, s, piece_from_code(field.substr(1)), field)) return err;
    }
    return std::nullopt;
  }
  if (st.size() >= 2 && (st[1] == '+' || st[1] == '-')) {
    Color c = st[1] == '+' ? BLACK : WHITE;
    std::string_view items = st.substr(2);
    if (items.size() % 4) return "bad piece list " + quoted(st);
    for (size_t i = 0; i < items.size(); i += 4) {
      std::string_view item = items.substr(i, 4);
      if (all_given_) return "pieces after 00AL " + quoted(st);
      if (item == "00AL") {
        // Every piece not yet placed, kings excepted, goes to this side's hand.
        int left[HAND_TYPE_NB];
        for (int pt = PAWN; pt < HAND_TYPE_NB; ++pt)
          left[pt] = MAX_PIECES[pt] - hands_[BLACK][PieceType(pt)] - hands_[WHITE][PieceType(pt)];
        for (Piece p : board_)
          if (p != NO_PIECE && type_of(p) != KING) --left[unpromoted(type_of(p))];
        for (int pt = PAWN; pt < HAND_TYPE_NB; ++pt) {
          if (left[pt] < 0) return std::string("more pieces of type ") + PIECE_CODE[pt] + " than exist before 00AL";
          hands_[c].count[pt] += left[pt];
        }
        all_given_ = true;
        continue;
      }
      PieceType pt = piece_from_code(item.substr(2));
      if (item.starts_with("00")) {
        if (pt == NO_PIECE_TYPE || pt >= KING) return "bad piece in hand " + quoted(item);
        if (hands_[c][pt] >= MAX_PIECES[pt]) return "too many pieces in hand " + quoted(item);
        ++hands_[c].count[pt];
      } else if (auto err = put(c, square_from_digits(item[0], item[1]), pt, item)) {
        return err;
      }
    }
    return std::nullopt;
  }
  return "unrecognised position line " + quoted(st);
}

std::optional<std::string> Reader::start_moves(Color side) {
  if (!position_given_) return std::string("side to move before any position line");
  std::string sfen = sfen_from_board(board_, hands_, side);
  Position pos;
  if (auto err = pos.set_sfen(sfen)) return "invalid start position " + sfen + ": " + *err;
  rec_.start = pos;
  pos_ = pos;
  return std::nullopt;
}

std::optional<std::string> Reader::move(std::string_view st) {
  if (!pos_) return "move before the start position " + quoted(st);
  if (ended_) return "move after the end of the game " + quoted(st);
  Move m = MOVE_NONE;
  if (auto err = move_from_csa(*pos_, st, m)) return err;
  pos_->do_move(m);
  rec_.add_move(m);
  return std::nullopt;
}

}  // namespace

std::optional<std::string> move_from_csa(const Position& pos, std::string_view text, Move& m) {
  if (text.size() != 7 || (text[0] != '+' && text[0] != '-')) return "bad move " + quoted(text);
  Color us = text[0] == '+' ? BLACK : WHITE;
  if (us != pos.side_to_move())
    return "move " + quoted(text) + " by the wrong side: " + (us == BLACK ? "White" : "Black") + " is to move";
  PieceType pt = piece_from_code(text.substr(5));
  if (pt == NO_PIECE_TYPE) return "bad piece code in move " + quoted(text);
  Square to = square_from_digits(text[3], text[4]);
  if (to == SQ_NONE) return "bad destination square in move " + quoted(text);
  if (text[1] == '0' && text[2] == '0') {
    if (pt >= KING) return "cannot drop " + std::string(PIECE_CODE[pt]) + " in move " + quoted(text);
    m = make_drop(pt, to);
  } else {
    Square from = square_from_digits(text[1], text[2]);
    if (from == SQ_NONE) return "bad origin square in move " + quoted(text);
    Piece p = pos.piece_on(from);
    if (p == NO_PIECE || color_of(p) != us)
      return "no piece of the side to move on " + square_digits(from) + " in move " + quoted(text);
    PieceType before = type_of(p);
    bool promote = before != pt;
    if (promote && !(can_promote(before) && promoted(before) == pt))
      return "the " + std::string(PIECE_CODE[before]) + " on " + square_digits(from) + " cannot become " +
             PIECE_CODE[pt] + " in move " + quoted(text);
    m = make_move(from, to, promote);
  }
  if (!pos.is_legal(m)) return "illegal move " + quoted(text) + " in position " + pos.sfen();
  return std::nullopt;
}

std::string move_to_csa(const Position& pos, Move m) {
  std::string s(1, pos.side_to_move() == BLACK ? '+' : '-');
  PieceType pt = type_of(pos.moved_piece(m));
  if (is_promotion(m)) pt = promoted(pt);
  s += is_drop(m) ? "00" : square_digits(move_from(m));
  s += square_digits(move_to(m));
  s += PIECE_CODE[pt];
  return s;
}

std::optional<std::string> read_csa(std::string_view bytes, GameRecord& rec) {
  std::string text;
  if (auto err = decode_record_text(bytes, text)) return "csa: " + *err;
  rec = GameRecord{};
  Reader reader(rec);
  std::vector<std::string> lines = split_lines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    if (line.empty() || line[0] == '\'') continue;
    // Free text (names, information) may hold commas; other lines may carry several statements.
    bool single = line[0] == 'N' || line[0] == '$';
    while (true) {
      size_t comma = single ? std::string_view::npos : line.find(',');
      if (auto err = reader.statement(line.substr(0, comma))) return "csa: line " + std::to_string(i + 1) + ": " + *err;
      if (comma == std::string_view::npos) break;
      line.remove_prefix(comma + 1);
    }
  }
  if (auto err = reader.finish()) return "csa: " + *err;
  return std::nullopt;
}

std::string write_csa(const GameRecord& rec, TextEncoding enc) {
  std::string s = "V2.2\n";
  if (!rec.black.empty()) s += "N+" + rec.black + "\n";
  if (!rec.white.empty()) s += "N-" + rec.white + "\n";
  if (!rec.event.empty()) s += "$EVENT:" + rec.event + "\n";
  if (!rec.start_time.empty()) s += "$START_TIME:" + rec.start_time + "\n";
  Position pos = rec.start;
  if (pos.sfen(false) == Position().sfen(false)) {
    s += "PI\n";
  } else {
    for (int rank = 0; rank < 9; ++rank) {
      s += "P" + std::to_string(rank + 1);
      for (int file = 8; file >= 0; --file) {
        Piece p = pos.piece_on(make_square(file, rank));
        s += p == NO_PIECE ? " * " : (color_of(p) == BLACK ? "+" : "-") + std::string(PIECE_CODE[type_of(p)]);
      }
      s += "\n";
    }
    for (Color c : {BLACK, WHITE}) {
      if (pos.hand(c).empty()) continue;
      s += c == BLACK ? "P+" : "P-";
      for (PieceType pt : {ROOK, BISHOP, GOLD, SILVER, KNIGHT, LANCE, PAWN})
        for (int n = 0; n < pos.hand(c)[pt]; ++n) s += "00" + std::string(PIECE_CODE[pt]);
      s += "\n";
    }
  }
  s += pos.side_to_move() == BLACK ? "+\n" : "-\n";
  for (size_t i = 0; i < rec.moves.size(); ++i) {
    s += move_to_csa(pos, rec.moves[i]) + "\n";
    if (i < rec.seconds.size() && rec.seconds[i] >= 0) s += "T" + std::to_string(rec.seconds[i]) + "\n";
    if (i < rec.comments.size() && !rec.comments[i].empty()) s += "'" + rec.comments[i] + "\n";
    pos.do_move(rec.moves[i]);
  }
  for (auto [end, code] : END_CODES)
    if (rec.end == end) s += std::string(code) + "\n";
  return encode_record_text(s, enc);
}

}  // namespace jiriki
