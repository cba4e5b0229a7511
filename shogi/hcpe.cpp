#include "shogi/hcpe.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "common/atomic_file.h"
#include "shogi/record.h"

namespace jiriki {

namespace {

constexpr int HCP_BITS = 256;

// The Huffman codes, in stream order: the first character is the first bit written. They are
// the table published with Apery (HuffmanCodedPos::boardCodeTable / handCodeTable, also used
// by dlshogi and cshogi), whose values are written least significant bit first.
// Board codes by piece type, {Black, White}; kings are coded by their squares instead.
constexpr const char* BOARD_CODE[PIECE_TYPE_NB][COLOR_NB] = {
    {"0", "0"},                // empty square
    {"1000", "1010"},          // pawn
    {"110000", "110010"},      // lance
    {"111000", "111010"},      // knight
    {"110100", "110110"},      // silver
    {"11111000", "11111010"},  // bishop
    {"11111100", "11111110"},  // rook
    {"111100", "111101"},      // gold
    {"", ""},                  // king
    {"1001", "1011"},          // promoted pawn
    {"110001", "110011"},      // promoted lance
    {"111001", "111011"},      // promoted knight
    {"110101", "110111"},      // promoted silver
    {"11111001", "11111011"},  // horse
    {"11111101", "11111111"},  // dragon
};
// Hand codes by piece type, {Black, White}.
constexpr const char* HAND_CODE[HAND_TYPE_NB][COLOR_NB] = {
    {"", ""},
    {"000", "001"},          // pawn
    {"10000", "10001"},      // lance
    {"11000", "11001"},      // knight
    {"10100", "10101"},      // silver
    {"1111100", "1111101"},  // bishop
    {"1111110", "1111111"},  // rook
    {"11100", "11101"},      // gold
};
// The order of hand pieces in the stream (Apery's HandPiece order, not our PieceType order).
constexpr PieceType HAND_ORDER[] = {PAWN, LANCE, KNIGHT, SILVER, GOLD, BISHOP, ROOK};

struct Code {
  uint8_t bits = 0;  // bit i = i-th bit of the stream
  uint8_t len = 0;   // 0: no code
};

Code parse_code(const char* s) {
  Code c;
  for (; s[c.len]; ++c.len) c.bits |= (s[c.len] == '1') << c.len;
  return c;
}

// Encoding tables and 8-bit lookahead decoding tables. All codes are at most 8 bits long, so the
// next 8 bits of the stream identify the code that starts there.
struct Tables {
  Code board[PIECE_NB];
  Code hand[COLOR_NB][HAND_TYPE_NB];
  Piece board_piece[256] = {};
  uint8_t board_len[256] = {};  // 0: no board code starts with these bits
  Piece hand_piece[256] = {};
  uint8_t hand_len[256] = {};

  Tables() {
    for (Color c : {BLACK, WHITE})
      for (int pt = NO_PIECE_TYPE; pt < PIECE_TYPE_NB; ++pt) {
        Piece p = pt == NO_PIECE_TYPE ? NO_PIECE : make_piece(c, PieceType(pt));
        board[p] = parse_code(BOARD_CODE[pt][c]);
        if (board[p].len) fill(board_piece, board_len, board[p], p);
        if (pt < HAND_TYPE_NB && pt != NO_PIECE_TYPE) {
          hand[c][pt] = parse_code(HAND_CODE[pt][c]);
          fill(hand_piece, hand_len, hand[c][pt], p);
        }
      }
  }
  static void fill(Piece* piece, uint8_t* len, Code code, Piece p) {
    for (int high = 0; high < (1 << (8 - code.len)); ++high) {
      int idx = code.bits | high << code.len;
      piece[idx] = p;
      len[idx] = code.len;
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

struct BitWriter {
  std::array<uint8_t, 32>& d;
  int pos = 0;
  void put(unsigned bits, int len) {
    for (int i = 0; i < len; ++i, ++pos)
      if (pos < HCP_BITS) d[pos >> 3] |= ((bits >> i) & 1) << (pos & 7);
  }
};

struct BitReader {
  const std::array<uint8_t, 32>& d;
  int pos = 0;
  // The next 8 bits (zeros past the end), without consuming them.
  unsigned peek8() const {
    int byte = pos >> 3, shift = pos & 7;
    if (byte >= 32) return 0;
    unsigned v = d[byte] >> shift;
    if (byte + 1 < 32) v |= unsigned(d[byte + 1]) << (8 - shift);
    return v & 0xff;
  }
  unsigned get(int len) {
    unsigned v = peek8() & ((1u << len) - 1);
    pos += len;
    return v;
  }
};

}  // namespace

HuffmanCodedPos encode_hcp(const Position& pos) {
  const Tables& t = tables();
  HuffmanCodedPos hcp;
  BitWriter w{hcp.data};
  w.put(pos.side_to_move(), 1);
  w.put(pos.king_square(BLACK), 7);
  w.put(pos.king_square(WHITE), 7);
  for (Square s = 0; s < SQ_NB; ++s) {
    Piece p = pos.piece_on(s);
    if (type_of(p) != KING) w.put(t.board[p].bits, t.board[p].len);
  }
  for (Color c : {BLACK, WHITE})
    for (PieceType pt : HAND_ORDER)
      for (int n = 0; n < pos.hand(c)[pt]; ++n) w.put(t.hand[c][pt].bits, t.hand[c][pt].len);
  if (w.pos != HCP_BITS)
    throw std::invalid_argument("hcp: the position " + pos.sfen() + " does not hold all 40 pieces (" +
                                std::to_string(w.pos) + " bits instead of 256)");
  return hcp;
}

std::optional<std::string> decode_hcp(const HuffmanCodedPos& hcp, Position& pos) {
  const Tables& t = tables();
  BitReader r{hcp.data};
  std::array<Piece, SQ_NB> board{};
  Hand hands[COLOR_NB];
  int count[HAND_TYPE_NB] = {};

  Color side = Color(r.get(1));
  Square king[COLOR_NB];
  for (Color c : {BLACK, WHITE}) {
    king[c] = r.get(7);
    if (king[c] >= SQ_NB)
      return "hcp: " + std::string(c == BLACK ? "Black" : "White") + "'s king square " + std::to_string(king[c]) +
             " is off the board";
  }
  if (king[BLACK] == king[WHITE]) return "hcp: both kings on square " + square_to_usi(king[BLACK]);
  board[king[BLACK]] = make_piece(BLACK, KING);
  board[king[WHITE]] = make_piece(WHITE, KING);

  for (Square s = 0; s < SQ_NB; ++s) {
    if (s == king[BLACK] || s == king[WHITE]) continue;
    unsigned next = r.peek8();
    int len = t.board_len[next];  // every bit pattern starts a board code
    if (r.pos + len > HCP_BITS)
      return "hcp: the bit stream ends inside the code of square " + square_to_usi(s) + " (bit " +
             std::to_string(r.pos) + ")";
    r.pos += len;
    board[s] = t.board_piece[next];
    if (board[s] != NO_PIECE) ++count[unpromoted(type_of(board[s]))];
  }
  while (r.pos < HCP_BITS) {
    unsigned next = r.peek8();
    int len = t.hand_len[next];
    if (!len) return "hcp: invalid hand piece code at bit " + std::to_string(r.pos);
    if (r.pos + len > HCP_BITS)
      return "hcp: the bit stream ends inside a hand piece code (bit " + std::to_string(r.pos) + ")";
    r.pos += len;
    Piece p = t.hand_piece[next];
    ++hands[color_of(p)].count[type_of(p)];
    ++count[type_of(p)];
  }
  for (int pt = PAWN; pt < HAND_TYPE_NB; ++pt)
    if (count[pt] > MAX_PIECES[pt])
      return "hcp: " + std::to_string(count[pt]) + " pieces of type " + PIECE_CHARS[pt] + ", at most " +
             std::to_string(MAX_PIECES[pt]) + " exist";

  std::string sfen = sfen_from_board(board, hands, side);
  Position decoded;
  if (auto err = decoded.set_sfen(sfen)) return "hcp: invalid position " + sfen + ": " + *err;
  pos = decoded;
  return std::nullopt;
}

std::optional<std::string> read_hcpe_file(const std::string& path, std::vector<HcpeRecord>& records) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return path + ": cannot open: " + std::strerror(errno);
  size_t size = size_t(in.tellg());
  in.seekg(0);
  size_t n = size / sizeof(HcpeRecord);
  if (size % sizeof(HcpeRecord))
    return path + ": truncated hcpe file: the record at byte offset " + std::to_string(n * sizeof(HcpeRecord)) +
           " has " + std::to_string(size % sizeof(HcpeRecord)) + " of 38 bytes";
  records.resize(n);
  if (!in.read(reinterpret_cast<char*>(records.data()), std::streamsize(n * sizeof(HcpeRecord))))
    return path + ": read error";
  return std::nullopt;
}

std::optional<std::string> write_hcpe_file(const std::string& path, const std::vector<HcpeRecord>& records,
                                           bool append) {
  // Through a temporary file and a rename (or appended whole): a full disk never leaves a cut file.
  const std::string_view bytes(reinterpret_cast<const char*>(records.data()), records.size() * sizeof(HcpeRecord));
  try {
    if (append) append_to_file(path, bytes);
    else write_file_atomically(path, bytes);
  } catch (const std::exception& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

}  // namespace jiriki
