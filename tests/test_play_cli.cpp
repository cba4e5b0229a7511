// `jiriki play`: the quick start's game, through the real binary: every move it prints is legal in
// turn, the game stops at the ply limit as a draw, and the final board is shown.
#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>

#include "shogi/position.h"

using namespace jiriki;

TEST_CASE("play CLI: a short game of legal moves ending in a draw at the ply limit", "[play][cli]") {
  const std::string cmd =
      std::string(JIRIKI_BINARY) + " play --playouts 16 --max-plies 10 --backend cpu --threads 1 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  REQUIRE(pipe);
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe.get())) out.append(buf.data(), n);
  INFO(out);

  Position pos;
  std::istringstream lines(out);
  std::string line;
  int plies = 0;
  while (std::getline(lines, line)) {
    int number = 0;
    char kif[64], usi_move[16];
    // "   1. ▲７六歩(77)      7g7f    win ..."
    if (std::sscanf(line.c_str(), "%d. %63s %15s win", &number, kif, usi_move) != 3) continue;
    REQUIRE(number == plies + 1);
    const Move m = move_from_usi(pos, usi_move);
    REQUIRE(pos.is_legal(m));
    pos.do_move(m);
    ++plies;
  }
  CHECK(plies == 10);
  CHECK(out.find("+---------------------------+") != std::string::npos);
  CHECK(out.find("result after 10 plies: draw (maximum game length: draw)") != std::string::npos);
}
