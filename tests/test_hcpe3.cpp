// hcpe3 game records: byte layout, round trip over random games, and rejection of bad streams.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <random>
#include <string>

#include "shogi/hcpe3.h"
#include "shogi/movegen.h"

using namespace jiriki;

namespace {
// A random legal game with candidate lists on even plies (odd plies are "not for training").
Hcpe3Game random_game(std::mt19937& rng, int max_plies) {
  Position pos;
  Hcpe3Game g;
  g.start = encode_hcp(pos);
  for (int ply = 0; ply < max_plies; ++ply) {
    MoveList legal = legal_moves(pos);
    if (legal.size() == 0) break;
    Hcpe3Move m;
    m.move = legal.moves[rng() % legal.size()];
    m.eval = int16_t(int(rng() % 2001) - 1000);
    if (ply % 2 == 0)
      for (int i = 0; i < std::min(legal.size(), 5); ++i)
        m.candidates.push_back({legal.moves[i], uint16_t(rng() % 800)});
    pos.do_move(m.move);
    g.moves.push_back(m);
  }
  g.result = BLACK_WIN | hcpe3::SENNICHITE;
  return g;
}
}  // namespace

TEST_CASE("hcpe3: byte layout of a small game", "[records][hcpe3]") {
  Position pos;
  Hcpe3Game g;
  g.start = encode_hcp(pos);
  g.result = WHITE_WIN;
  g.opponent = 0;
  Move m = move_from_usi(pos, "7g7f");
  g.moves.push_back({m, -35, {{uint16_t(m), 700}, {uint16_t(move_from_usi(pos, "2g2f")), 100}}});
  std::vector<uint8_t> b;
  append_hcpe3(g, b);
  // 36-byte header + 6-byte move info + 2 x 4-byte candidates.
  REQUIRE(b.size() == 36 + 6 + 8);
  CHECK(b[32] == 1);  // move count, little-endian
  CHECK(b[33] == 0);
  CHECK(b[34] == WHITE_WIN);
  CHECK((b[36] | (b[37] << 8)) == m);
  CHECK(int16_t(b[38] | (b[39] << 8)) == -35);
  CHECK((b[40] | (b[41] << 8)) == 2);
  CHECK((b[44] | (b[45] << 8)) == 700);
}

TEST_CASE("hcpe3: random games round trip through a file", "[records][hcpe3]") {
  std::mt19937 rng(7);
  std::vector<Hcpe3Game> games;
  for (int i = 0; i < 50; ++i) games.push_back(random_game(rng, 150));
  const std::string path =
      (std::filesystem::temp_directory_path() / ("jiriki_test_hcpe3_" + std::to_string(getpid()) + ".hcpe3")).string();
  REQUIRE_FALSE(write_hcpe3_file(path, games));
  std::vector<Hcpe3Game> back;
  auto err = read_hcpe3_file(path, back);
  INFO(err.value_or(""));
  REQUIRE_FALSE(err);
  CHECK(back == games);
  std::remove(path.c_str());
}

TEST_CASE("hcpe3: truncated and illegal streams are rejected with their offset", "[records][hcpe3]") {
  std::mt19937 rng(11);
  std::vector<uint8_t> bytes;
  Hcpe3Game first = random_game(rng, 20), second = random_game(rng, 20);
  append_hcpe3(first, bytes);
  size_t second_at = bytes.size();
  append_hcpe3(second, bytes);

  std::vector<Hcpe3Game> games;
  std::vector<uint8_t> cut(bytes.begin(), bytes.end() - 3);
  auto err = parse_hcpe3(cut, games);
  REQUIRE(err);
  CHECK(err->find("truncated") != std::string::npos);
  CHECK(games.size() == 1);  // the complete first game is kept

  std::vector<uint8_t> header_only(bytes.begin(), bytes.begin() + second_at + 20);
  games.clear();
  err = parse_hcpe3(header_only, games);
  REQUIRE(err);
  CHECK(err->find("truncated game header at byte offset " + std::to_string(second_at)) != std::string::npos);

  // Replace the first move by a move that is illegal in the start position (7g7e).
  std::vector<uint8_t> bad = bytes;
  Position start;
  uint16_t illegal = make_move(make_square(6, 6), make_square(6, 4));
  REQUIRE_FALSE(start.is_legal(Move(illegal)));
  bad[36] = uint8_t(illegal);
  bad[37] = uint8_t(illegal >> 8);
  games.clear();
  err = parse_hcpe3(bad, games);
  REQUIRE(err);
  CHECK(err->find("illegal move 7g7e") != std::string::npos);
  CHECK(err->find("byte offset 36") != std::string::npos);

  // Found by fuzz_hcpe3: a move value that is no move at all (a drop "from" square 127, piece
  // type 47) made the error message read past the piece letters. It is named by its number.
  bad[36] = 0xff;
  bad[37] = 0x3f;
  games.clear();
  err = parse_hcpe3(bad, games);
  REQUIRE(err);
  CHECK(err->find("illegal move (not a move: 16383)") != std::string::npos);
}

TEST_CASE("hcpe3: dlshogi's maximum-length flag reads as a draw", "[records][hcpe3]") {
  Hcpe3Game g;
  g.result = 0x16;  // what dlshogi writes for a game stopped at its length limit
  CHECK(g.winner() == DRAW);
  g.result = hcpe3::MAX_MOVES;
  CHECK(g.winner() == DRAW);
  g.result = BLACK_WIN | hcpe3::DECLARATION;
  CHECK(g.winner() == BLACK_WIN);
}
