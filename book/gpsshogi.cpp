// Import of gpsshogi's weighted book (see gpsshogi.h).
#include "book/gpsshogi.h"

#include <deque>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace jiriki::book {

namespace {

uint32_t be32(const std::string& b, size_t at) {
  return uint32_t(uint8_t(b[at])) << 24 | uint32_t(uint8_t(b[at + 1])) << 16 | uint32_t(uint8_t(b[at + 2])) << 8 |
         uint32_t(uint8_t(b[at + 3]));
}

// OSL's packed move to ours; MOVE_NONE when a field is out of range.
Move decode_osl_move(uint32_t v) {
  auto square = [](uint32_t xy) -> Square {
    const int file = int(xy >> 4), rank = int(xy & 15);
    return file >= 1 && file <= 9 && rank >= 1 && rank <= 9 ? make_square(file - 1, rank - 1) : SQ_NONE;
  };
  const Square to = square((v >> 8) & 0xff);
  if (to == SQ_NONE) return MOVE_NONE;
  if ((v & 0xff) == 0) {  // a drop: the piece type says what
    static constexpr PieceType OSL_HAND[16] = {NO_PIECE_TYPE, NO_PIECE_TYPE, NO_PIECE_TYPE, NO_PIECE_TYPE,
                                               NO_PIECE_TYPE, NO_PIECE_TYPE, NO_PIECE_TYPE, NO_PIECE_TYPE,
                                               NO_PIECE_TYPE, GOLD,          PAWN,          LANCE,
                                               KNIGHT,        SILVER,        BISHOP,        ROOK};
    const PieceType pt = OSL_HAND[(v >> 24) & 15];
    return pt == NO_PIECE_TYPE ? MOVE_NONE : make_drop(pt, to);
  }
  const Square from = square(v & 0xff);
  return from == SQ_NONE ? MOVE_NONE : make_move(from, to, (v >> 19) & 1);
}

}  // namespace

Book import_gpsshogi(const std::string& path, GpsImportStats* stats) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string b = ss.str();
  auto fail = [&](const std::string& why) { throw std::runtime_error(path + ": " + why); };
  if (b.size() < 16) fail("too short for gpsshogi's book header");
  const uint32_t version = be32(b, 0), n_states = be32(b, 4), n_moves = be32(b, 8), start = be32(b, 12);
  if (version != 1) fail("version " + std::to_string(version) + ", expected 1 (not a gpsshogi weighted book?)");
  constexpr uint64_t HEADER = 16, STATE = 16, MOVE = 12, BOARD = 164;
  const uint64_t expected = HEADER + (STATE + BOARD) * uint64_t(n_states) + MOVE * uint64_t(n_moves);
  if (b.size() != expected)
    fail(std::to_string(n_states) + " states and " + std::to_string(n_moves) + " moves make " +
         std::to_string(expected) + " bytes, the file has " + std::to_string(b.size()));
  if (start >= n_states) fail("start state out of range");

  GpsImportStats st;
  st.states = n_states;
  st.moves = n_moves;
  // Breadth first from the start state, so that each state gets its smallest move number.
  std::vector<char> seen(n_states, 0);
  std::deque<std::pair<uint32_t, Position>> queue;
  queue.emplace_back(start, Position());
  seen[start] = 1;
  Book book;
  while (!queue.empty()) {
    auto [index, pos] = std::move(queue.front());
    queue.pop_front();
    ++st.reached;
    const uint64_t s = HEADER + STATE * index;
    const uint32_t first = be32(b, s), count = be32(b, s + 4);
    if (uint64_t(first) + count > n_moves) fail("state " + std::to_string(index) + ": moves out of range");
    BookPosition p{pos.sfen(false), pos.game_ply(), {}};
    for (uint32_t i = 0; i < count; ++i) {
      const uint64_t at = HEADER + STATE * uint64_t(n_states) + MOVE * (uint64_t(first) + i);
      const uint32_t raw = be32(b, at), next = be32(b, at + 4);
      const int32_t weight = int32_t(be32(b, at + 8));
      const Move m = decode_osl_move(raw);
      if (m == MOVE_NONE || !pos.is_legal(m))
        fail("state " + std::to_string(index) + ": move " + std::to_string(raw) + " is not legal in " + pos.sfen());
      if (next >= n_states) fail("state " + std::to_string(index) + ": next state out of range");
      if (!seen[next]) {
        seen[next] = 1;
        Position child = pos;
        child.do_move(m);
        queue.emplace_back(next, std::move(child));
      }
      if (weight <= 0) {
        ++st.zero_weight;
        continue;
      }
      BookMove bm;
      bm.move = m;
      bm.count = uint64_t(weight);
      p.moves.push_back(bm);
    }
    if (p.moves.empty()) continue;
    st.book_moves += int64_t(p.moves.size());
    ++st.positions;
    book.add(std::move(p));
  }
  if (stats) *stats = st;
  return book;
}

}  // namespace jiriki::book
