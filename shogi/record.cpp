#include "shogi/record.h"

#include <stdexcept>

#include "common/platform.h"

namespace jiriki {

Position GameRecord::final_position() const {
  Position pos = start;
  for (Move m : moves) pos.do_move(m);
  return pos;
}

std::optional<GameResult> game_result(const GameRecord& rec) {
  Position pos = rec.final_position();
  Color stm = pos.side_to_move();
  GameResult stm_wins = stm == BLACK ? BLACK_WIN : WHITE_WIN;
  GameResult stm_loses = stm == BLACK ? WHITE_WIN : BLACK_WIN;
  switch (rec.end) {
    case GameEnd::RESIGN:
    case GameEnd::MATE:
    case GameEnd::TIME_UP:
    case GameEnd::ILLEGAL_MOVE: return stm_loses;
    case GameEnd::DECLARATION: return stm_wins;
    case GameEnd::IMPASSE:
    case GameEnd::MAX_MOVES: return DRAW;
    case GameEnd::BLACK_ILLEGAL_ACTION: return WHITE_WIN;
    case GameEnd::WHITE_ILLEGAL_ACTION: return BLACK_WIN;
    case GameEnd::SENNICHITE:
      // The record says repetition; a perpetual check in the cycle decides it, else a draw.
      switch (pos.repetition()) {
        case Repetition::WIN: return stm_wins;
        case Repetition::LOSE: return stm_loses;
        default: return DRAW;
      }
    case GameEnd::NONE:
    case GameEnd::ABORT: return std::nullopt;
  }
  return std::nullopt;
}

std::string sfen_from_board(const std::array<Piece, SQ_NB>& board, const Hand hands[COLOR_NB], Color side) {
  std::string s;
  for (int rank = 0; rank < 9; ++rank) {
    int empty = 0;
    for (int file = 8; file >= 0; --file) {
      Piece p = board[make_square(file, rank)];
      if (p == NO_PIECE) {
        ++empty;
        continue;
      }
      if (empty) s += char('0' + empty), empty = 0;
      PieceType pt = type_of(p);
      if (pt > KING) s += '+';
      char c = PIECE_CHARS[unpromoted(pt)];
      s += color_of(p) == BLACK ? c : char(c - 'A' + 'a');
    }
    if (empty) s += char('0' + empty);
    if (rank < 8) s += '/';
  }
  s += side == BLACK ? " b " : " w ";
  bool any = false;
  for (Color c : {BLACK, WHITE})
    for (PieceType pt : {ROOK, BISHOP, GOLD, SILVER, KNIGHT, LANCE, PAWN}) {
      int n = hands[c][pt];
      if (!n) continue;
      if (n > 1) s += std::to_string(n);
      char ch = PIECE_CHARS[pt];
      s += c == BLACK ? ch : char(ch - 'A' + 'a');
      any = true;
    }
  if (!any) s += '-';
  s += " 1";
  return s;
}

// Length of the valid UTF-8 prefix of s (s.size() when all of it is valid).
static size_t valid_utf8_prefix(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = s[i];
    int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
    if (n < 0 || (n == 1 && c < 0xc2) || i + n >= s.size()) return i;
    uint32_t cp = n == 0 ? c : c & (0x3f >> n);
    for (int k = 1; k <= n; ++k) {
      unsigned char d = s[i + k];
      if ((d >> 6) != 2) return i;
      cp = cp << 6 | (d & 0x3f);
    }
    // Overlong three- and four-byte forms, surrogates and values past U+10FFFF are invalid.
    if ((n == 2 && (cp < 0x800 || (cp >= 0xd800 && cp < 0xe000))) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)))
      return i;
    i += n + 1;
  }
  return i;
}

std::optional<std::string> decode_record_text(std::string_view bytes, std::string& utf8) {
  if (bytes.starts_with("\xef\xbb\xbf")) bytes.remove_prefix(3);
  size_t valid = valid_utf8_prefix(bytes);
  if (valid == bytes.size()) {
    utf8.assign(bytes);
    return std::nullopt;
  }
  if (auto bad = convert_text("UTF-8", "CP932", bytes, utf8))
    return "neither UTF-8 (bad byte at offset " + std::to_string(valid) + ") nor Shift_JIS (bad byte at offset " +
           std::to_string(*bad) + ")";
  return std::nullopt;
}

std::string encode_record_text(std::string_view utf8, TextEncoding enc) {
  if (enc == TextEncoding::UTF8) return std::string(utf8);
  if (enc == TextEncoding::UTF8_BOM) return "\xef\xbb\xbf" + std::string(utf8);
  std::string out;
  if (auto bad = convert_text("CP932", "UTF-8", utf8, out)) {
    std::string_view rest = utf8.substr(*bad);
    size_t len = 1;
    while (len < rest.size() && (rest[len] & 0xc0) == 0x80) ++len;
    throw std::runtime_error("the character '" + std::string(rest.substr(0, len)) + "' cannot be written in Shift_JIS");
  }
  return out;
}

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> lines;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    if (line.ends_with('\r')) line.remove_suffix(1);
    lines.emplace_back(line);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return lines;
}

}  // namespace jiriki
