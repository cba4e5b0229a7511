#include "shogi/hcpe3.h"

#include <cstring>
#include <fstream>
#include <iterator>

#include "common/atomic_file.h"
#include "shogi/movegen.h"

namespace jiriki {

namespace {
void put16(std::vector<uint8_t>& out, uint16_t v) {
  out.push_back(uint8_t(v));
  out.push_back(uint8_t(v >> 8));
}
uint16_t get16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }
}  // namespace

void append_hcpe3(const Hcpe3Game& game, std::vector<uint8_t>& out) {
  out.insert(out.end(), game.start.data.begin(), game.start.data.end());
  put16(out, uint16_t(game.moves.size()));
  out.push_back(game.result);
  out.push_back(game.opponent);
  for (const Hcpe3Move& m : game.moves) {
    put16(out, m.move);
    put16(out, uint16_t(m.eval));
    put16(out, uint16_t(m.candidates.size()));
    for (const Hcpe3Candidate& c : m.candidates) {
      put16(out, c.move16);
      put16(out, c.visits);
    }
  }
}

std::optional<std::string> parse_hcpe3(const std::vector<uint8_t>& bytes, std::vector<Hcpe3Game>& games) {
  size_t off = 0;
  const size_t n = bytes.size();
  while (off < n) {
    const size_t game_off = off;
    auto at = [&](size_t o) { return "byte offset " + std::to_string(o); };
    if (n - off < 36) return "truncated game header at " + at(game_off);
    Hcpe3Game g;
    std::memcpy(g.start.data.data(), &bytes[off], 32);
    uint16_t count = get16(&bytes[off + 32]);
    g.result = bytes[off + 34];
    g.opponent = bytes[off + 35];
    off += 36;
    Position pos;
    if (auto err = decode_hcp(g.start, pos)) return "bad start position at " + at(game_off) + ": " + *err;
    g.moves.reserve(count);
    for (int i = 0; i < count; ++i) {
      if (n - off < 6) return "truncated move " + std::to_string(i + 1) + " of the game at " + at(game_off);
      Hcpe3Move m;
      m.move = Move(get16(&bytes[off]));
      m.eval = int16_t(get16(&bytes[off + 2]));
      uint16_t cands = get16(&bytes[off + 4]);
      if (!pos.is_legal(m.move))
        return "illegal move " + move_to_usi(m.move) + " (move " + std::to_string(i + 1) + ") at " + at(off);
      off += 6;
      if ((n - off) / 4 < cands) return "truncated candidate list at " + at(off);
      m.candidates.resize(cands);
      for (auto& c : m.candidates) {
        c.move16 = get16(&bytes[off]);
        c.visits = get16(&bytes[off + 2]);
        if (!pos.is_legal(Move(c.move16))) return "illegal candidate move at " + at(off);
        off += 4;
      }
      pos.do_move(m.move);
      g.moves.push_back(std::move(m));
    }
    games.push_back(std::move(g));
  }
  return std::nullopt;
}

Hcpe3Game hcpe3_from_record(const GameRecord& rec) {
  auto result = game_result(rec);
  if (!result) throw std::invalid_argument("the record has no result");
  Hcpe3Game g;
  g.start = encode_hcp(rec.start);
  g.result = *result;
  if (rec.end == GameEnd::SENNICHITE) g.result |= hcpe3::SENNICHITE;
  if (rec.end == GameEnd::DECLARATION) g.result |= hcpe3::DECLARATION;
  if (rec.end == GameEnd::MAX_MOVES) g.result |= hcpe3::MAX_MOVES;
  for (Move m : rec.moves) g.moves.push_back({m, 0, {{uint16_t(m), 1}}});
  return g;
}

GameRecord record_from_hcpe3(const Hcpe3Game& game) {
  GameRecord rec;
  if (auto err = decode_hcp(game.start, rec.start)) throw std::invalid_argument(*err);
  for (const Hcpe3Move& m : game.moves) rec.add_move(m.move);
  if (game.result & hcpe3::MAX_MOVES) rec.end = GameEnd::MAX_MOVES;
  else if (game.result & hcpe3::SENNICHITE) rec.end = GameEnd::SENNICHITE;
  else if (game.result & hcpe3::DECLARATION) rec.end = GameEnd::DECLARATION;
  else if (game.winner() == DRAW) rec.end = GameEnd::IMPASSE;
  else {
    Position last = rec.final_position();
    bool mover_won = game.winner() == (last.side_to_move() == BLACK ? BLACK_WIN : WHITE_WIN);
    if (mover_won)  // the side that made the last move lost: only an illegal action says that
      rec.end = last.side_to_move() == BLACK ? GameEnd::WHITE_ILLEGAL_ACTION : GameEnd::BLACK_ILLEGAL_ACTION;
    else rec.end = legal_moves(last).size() == 0 ? GameEnd::MATE : GameEnd::RESIGN;
  }
  return rec;
}

void append_training_positions(const Hcpe3Game& game, std::vector<HcpeRecord>& out) {
  Position pos;
  if (auto err = decode_hcp(game.start, pos)) throw std::invalid_argument(*err);
  for (const Hcpe3Move& m : game.moves) {
    if (!m.candidates.empty()) {
      HcpeRecord r;
      r.hcp = encode_hcp(pos);
      r.eval = m.eval;
      r.move16 = m.move;
      r.result = game.winner();
      out.push_back(r);
    }
    pos.do_move(m.move);
  }
}

std::optional<std::string> read_hcpe3_file(const std::string& path, std::vector<Hcpe3Game>& games) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "cannot open " + path;
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (auto err = parse_hcpe3(bytes, games)) return path + ": " + *err;
  return std::nullopt;
}

std::optional<std::string> write_hcpe3_file(const std::string& path, const std::vector<Hcpe3Game>& games) {
  std::vector<uint8_t> bytes;
  for (const auto& g : games) append_hcpe3(g, bytes);
  try {
    write_file_atomically(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  } catch (const std::exception& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

}  // namespace jiriki
