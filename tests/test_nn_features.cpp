// Input planes and policy labels (nn/features.h) on hand-worked positions, plus the colour-flip
// symmetry on random games: a position and its mirror (board rotated, colours swapped) must give
// the same planes and the same label for corresponding moves.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <random>
#include <set>
#include <sstream>

#include "nn/features.h"
#include "shogi/movegen.h"
#include "tests/positions.h"

using namespace jiriki;
using jiriki::testing::from_sfen;
using namespace jiriki::nn;

namespace {

std::vector<float> features_of(const Position& pos) {
  std::vector<float> f(INPUT_SIZE, -1.0f);  // -1: a plane left unwritten would show
  encode_features(pos, f.data());
  return f;
}

// The squares (0..80) set in one plane.
std::set<int> plane_set(const std::vector<float>& f, int plane) {
  std::set<int> s;
  for (int sq = 0; sq < SQUARES; ++sq)
    if (f[plane * SQUARES + sq] == 1.0f) s.insert(sq);
  return s;
}

bool plane_all(const std::vector<float>& f, int plane, float v) {
  for (int sq = 0; sq < SQUARES; ++sq)
    if (f[plane * SQUARES + sq] != v) return false;
  return true;
}

// The SFEN of the mirrored position: ranks and files reversed, piece case and hands swapped, the
// other side to move.
std::string mirror_sfen(const std::string& sfen) {
  std::istringstream in(sfen);
  std::string board, side, hand, ply;
  in >> board >> side >> hand >> ply;
  std::vector<std::vector<std::string>> ranks(1);
  for (size_t i = 0; i < board.size(); ++i) {
    char ch = board[i];
    if (ch == '/') ranks.emplace_back();
    else if (std::isdigit(ch)) ranks.back().insert(ranks.back().end(), ch - '0', "");
    else if (ch == '+') ranks.back().push_back(std::string("+") + board[++i]);
    else ranks.back().push_back(std::string(1, ch));
  }
  auto swap_case = [](std::string s) {
    for (char& ch : s) ch = std::isupper(ch) ? char(std::tolower(ch)) : char(std::toupper(ch));
    return s;
  };
  std::string out;
  for (int r = 8; r >= 0; --r) {
    int empty = 0;
    for (int f = 8; f >= 0; --f) {
      const std::string& t = ranks[r][f];
      if (t.empty()) {
        ++empty;
        continue;
      }
      if (empty) out += char('0' + empty), empty = 0;
      out += swap_case(t);
    }
    if (empty) out += char('0' + empty);
    if (r) out += '/';
  }
  return out + " " + (side == "b" ? "w" : "b") + " " + (hand == "-" ? hand : swap_case(hand)) + " " + ply;
}

Move mirror_move(Move m) {
  if (is_drop(m)) return make_drop(drop_type(m), rotate180(move_to(m)));
  return make_move(rotate180(move_from(m)), rotate180(move_to(m)), is_promotion(m));
}

// The SFEN of the left-right image: each rank's squares in reverse order (file f -> 10 - f); the
// side to move and hands unchanged.
std::string left_right_sfen(const std::string& sfen) {
  std::istringstream in(sfen);
  std::string board, rest, word;
  in >> board;
  while (in >> word) rest += " " + word;
  std::string out;
  std::vector<std::string> cells;
  auto flush = [&] {
    int empty = 0;
    for (auto it = cells.rbegin(); it != cells.rend(); ++it) {
      if (it->empty()) {
        ++empty;
        continue;
      }
      if (empty) out += char('0' + empty), empty = 0;
      out += *it;
    }
    if (empty) out += char('0' + empty);
    cells.clear();
  };
  for (size_t i = 0; i < board.size(); ++i) {
    char ch = board[i];
    if (ch == '/') flush(), out += '/';
    else if (std::isdigit(ch)) cells.insert(cells.end(), ch - '0', "");
    else if (ch == '+') cells.push_back(std::string("+") + board[++i]);
    else cells.push_back(std::string(1, ch));
  }
  flush();
  return out + rest;
}

Move left_right_move(Move m) {
  auto image = [](Square s) { return make_square(8 - file_of(s), rank_of(s)); };
  if (is_drop(m)) return make_drop(drop_type(m), image(move_to(m)));
  return make_move(image(move_from(m)), image(move_to(m)), is_promotion(m));
}

}  // namespace

TEST_CASE("features: start position, Black to move", "[nn][features]") {
  auto f = features_of(Position());
  for (float v : f) REQUIRE((v == 0.0f || v == 1.0f));

  // Our pawns on rank g: sq = file * 9 + 6; their attacks on rank f (+5).
  std::set<int> rank_g, rank_f;
  for (int file = 0; file < 9; ++file) rank_g.insert(file * 9 + 6), rank_f.insert(file * 9 + 5);
  CHECK(plane_set(f, PIECE_PLANE + PAWN - 1) == rank_g);
  CHECK(plane_set(f, ATTACK_PLANE + PAWN - 1) == rank_f);
  CHECK(plane_set(f, PIECE_PLANE + KING - 1) == std::set<int>{44});    // 5i = 4*9+8
  CHECK(plane_set(f, PIECE_PLANE + ROOK - 1) == std::set<int>{16});    // 2h = 1*9+7
  CHECK(plane_set(f, PIECE_PLANE + BISHOP - 1) == std::set<int>{70});  // 8h = 7*9+7
  // Rook 2h attacks 1h (7), 2g (15, its pawn), 2i (17, the knight), and along rank h 3h..7h up to
  // the bishop on 8h: 25, 34, 43, 52, 61, 70.
  CHECK(plane_set(f, ATTACK_PLANE + ROOK - 1) == std::set<int>{7, 15, 17, 25, 34, 43, 52, 61, 70});
  // Opponent: White's king on 5a (36), White's pawns on rank c.
  CHECK(plane_set(f, PLANES_PER_SIDE + PIECE_PLANE + KING - 1) == std::set<int>{36});
  CHECK(plane_set(f, PLANES_PER_SIDE + PIECE_PLANE + PAWN - 1).count(2));  // 1c
  // 5h (43) is attacked by our king, both golds and the rook: 4 -> all three count planes.
  // 1h (7) by the lance on 1i and the rook: 2. 5e (40) by nobody.
  for (int k = 0; k < 3; ++k) CHECK(f[(ATTACK_COUNT_PLANE + k) * SQUARES + 43] == 1.0f);
  CHECK(f[(ATTACK_COUNT_PLANE + 0) * SQUARES + 7] == 1.0f);
  CHECK(f[(ATTACK_COUNT_PLANE + 1) * SQUARES + 7] == 1.0f);
  CHECK(f[(ATTACK_COUNT_PLANE + 2) * SQUARES + 7] == 0.0f);
  for (int side = 0; side < 2; ++side) CHECK(f[(side * PLANES_PER_SIDE + ATTACK_COUNT_PLANE) * SQUARES + 40] == 0.0f);
  // No hands, not in check.
  for (int p = HAND_PLANE; p < INPUT_PLANES; ++p) CHECK(plane_all(f, p, 0.0f));
}

TEST_CASE("features: White to move, in check, promoted pieces and hands at their caps", "[nn][features]") {
  // White: K 5a, +S 9i; hand 4 gold, 3 silver, 4 knight, 4 lance, 17 pawns.
  // Black: K 5i, R 5e (checking down the file), +P 1c; hand rook, 2 bishops.
  // White moves, so every square s is seen as 80 - s and White is "side 0".
  auto f = features_of(from_sfen("4k4/9/8+P/9/4R4/9/9/9/+s3K4 w R2B4g3s4n4l17p 1"));
  const int them = PLANES_PER_SIDE;

  CHECK(plane_set(f, PIECE_PLANE + KING - 1) == std::set<int>{44});             // 5a = 36 -> 44
  CHECK(plane_set(f, PIECE_PLANE + PRO_SILVER - 1) == std::set<int>{0});        // 9i = 80 -> 0
  CHECK(plane_set(f, them + PIECE_PLANE + KING - 1) == std::set<int>{36});      // 5i = 44 -> 36
  CHECK(plane_set(f, them + PIECE_PLANE + ROOK - 1) == std::set<int>{40});      // 5e = 40 -> 40
  CHECK(plane_set(f, them + PIECE_PLANE + PRO_PAWN - 1) == std::set<int>{78});  // 1c = 2 -> 78
  // White king on 5a (36) attacks 4a 27, 6a 45, 4b 28, 5b 37, 6b 46 -> 53, 35, 52, 43, 34.
  CHECK(plane_set(f, ATTACK_PLANE + KING - 1) == std::set<int>{34, 35, 43, 52, 53});
  // White's +S on 9i moves like a White gold: sideways 8i (71) and backwards 9h (79) -> 9, 1.
  CHECK(plane_set(f, ATTACK_PLANE + PRO_SILVER - 1) == std::set<int>{1, 9});
  // Black king on 5i (44) attacks 4h 34, 5h 43, 6h 52, 4i 35, 6i 53 -> 46, 37, 28, 45, 27.
  CHECK(plane_set(f, them + ATTACK_PLANE + KING - 1) == std::set<int>{27, 28, 37, 45, 46});
  // Black's +P on 1c (2) attacks 1b 1, 2b 10, 2c 11, 1d 3 -> 79, 70, 69, 77.
  CHECK(plane_set(f, them + ATTACK_PLANE + PRO_PAWN - 1) == std::set<int>{69, 70, 77, 79});
  // Black rook on 5e: file 5 up to both kings (36..44 without 40) and all of rank e (f*9+4); the
  // set is symmetric under the rotation.
  std::set<int> rook{36, 37, 38, 39, 41, 42, 43, 44};
  for (int file = 0; file < 9; ++file)
    if (file != 4) rook.insert(file * 9 + 4);
  CHECK(plane_set(f, them + ATTACK_PLANE + ROOK - 1) == rook);
  // Counts: 5i (-> 36) is attacked by Black's rook only; 5h (-> 37) by Black's king and rook;
  // 5b (-> 43) by White's king only.
  CHECK(plane_set(f, them + ATTACK_COUNT_PLANE + 0).count(36) == 1);
  CHECK(plane_set(f, them + ATTACK_COUNT_PLANE + 1).count(36) == 0);
  CHECK(plane_set(f, them + ATTACK_COUNT_PLANE + 1).count(37) == 1);
  CHECK(plane_set(f, them + ATTACK_COUNT_PLANE + 2).count(37) == 0);
  CHECK(plane_set(f, ATTACK_COUNT_PLANE + 0).count(43) == 1);
  CHECK(plane_set(f, ATTACK_COUNT_PLANE + 1).count(43) == 0);

  // Hands. White (side to move) at 62: P 62-69 (17 capped at 8), L 70-73, N 74-77, S 78-80 of
  // 78-81 (3 of 4), G 82-85, B 86-87 none, R 88-89 none.
  // Black at 90: P 90-97, L 98-101, N 102-105, S 106-109, G 110-113 none; B 114-115 (2 of 2),
  // R 116 (1 of 2), 117 not.
  std::set<int> ones;
  for (int p = 62; p <= 80; ++p) ones.insert(p);
  for (int p = 82; p <= 85; ++p) ones.insert(p);
  ones.insert({114, 115, 116});
  for (int p = HAND_PLANE; p < CHECK_PLANE; ++p) {
    INFO("plane " << p);
    CHECK(plane_all(f, p, ones.count(p) ? 1.0f : 0.0f));
  }
  CHECK(plane_all(f, CHECK_PLANE, 1.0f));  // White is in check from the rook
}

TEST_CASE("policy labels of board moves and drops, both colours", "[nn][features]") {
  auto sq = [](int file, int rank) { return make_square(file - 1, rank - 1); };  // file 1..9, rank a..i = 1..9
  // Black: no rotation. Index = 81 * label + to.
  CHECK(move_to_label(make_move(sq(7, 7), sq(7, 6)), BLACK) == 59);                  // 7g7f up: 0*81 + 59
  CHECK(move_to_label(make_move(sq(5, 5), sq(6, 4)), BLACK) == 81 * 1 + 48);         // 5e6d up-left
  CHECK(move_to_label(make_move(sq(2, 8), sq(6, 8)), BLACK) == 81 * 3 + 52);         // 2h6h left
  CHECK(move_to_label(make_move(sq(5, 5), sq(4, 5)), BLACK) == 81 * 4 + 31);         // 5e4e right
  CHECK(move_to_label(make_move(sq(5, 5), sq(5, 6)), BLACK) == 81 * 5 + 41);         // 5e5f down
  CHECK(move_to_label(make_move(sq(5, 5), sq(6, 6)), BLACK) == 81 * 6 + 50);         // 5e6f down-left
  CHECK(move_to_label(make_move(sq(5, 5), sq(4, 6)), BLACK) == 81 * 7 + 32);         // 5e4f down-right
  CHECK(move_to_label(make_move(sq(2, 9), sq(3, 7)), BLACK) == 81 * 8 + 24);         // 2i3g knight-left
  CHECK(move_to_label(make_move(sq(8, 9), sq(7, 7)), BLACK) == 81 * 9 + 60);         // 8i7g knight-right
  CHECK(move_to_label(make_move(sq(8, 8), sq(2, 2), true), BLACK) == 81 * 12 + 10);  // 8h2b+ up-right+promo
  CHECK(move_to_label(make_move(sq(3, 5), sq(4, 3), true), BLACK) == 81 * 18 + 29);  // 3e4c+ knight-left+promo
  CHECK(move_to_label(make_drop(BISHOP, sq(5, 5)), BLACK) == 81 * 24 + 40);          // B*5e
  // White: squares rotated (s -> 80 - s), directions from White's side.
  CHECK(move_to_label(make_move(sq(3, 3), sq(3, 4)), WHITE) == 59);                  // 3c3d: up to 80-21
  CHECK(move_to_label(make_move(sq(8, 2), sq(4, 2)), WHITE) == 81 * 3 + 52);         // 8b4b: left, 80-28
  CHECK(move_to_label(make_move(sq(2, 1), sq(3, 3)), WHITE) == 81 * 9 + 60);         // 2a3c knight-right
  CHECK(move_to_label(make_move(sq(2, 2), sq(8, 8), true), WHITE) == 81 * 12 + 10);  // 2b8h+ up-right+promo
  CHECK(move_to_label(make_move(sq(5, 5), sq(5, 4)), WHITE) == 81 * 5 + 41);         // 5e5d down: 80-39
  CHECK(move_to_label(make_drop(PAWN, sq(5, 5)), WHITE) == 81 * 20 + 40);            // P*5e
  CHECK(move_to_label(make_drop(GOLD, sq(5, 2)), WHITE) == 81 * 26 + 43);            // G*5b: 80-37
}

TEST_CASE("features and labels: mirrored positions agree, labels of legal moves are distinct",
          "[nn][features][random]") {
  std::mt19937_64 rng(7);
  for (int game = 0; game < 4; ++game) {
    Position pos;
    for (int ply = 0; ply < 160; ++ply) {
      MoveList moves = legal_moves(pos);
      if (moves.size() == 0) break;
      const std::string msfen = mirror_sfen(pos.sfen());
      Position mirror = from_sfen(msfen);
      INFO(pos.sfen() << " / mirror " << msfen);
      const auto f = features_of(pos);
      REQUIRE(f == features_of(mirror));
      // Attack counts against a second implementation: attackers_to on every square.
      for (Color c : {BLACK, WHITE})
        for (Square s = 0; s < SQ_NB; ++s) {
          int n = std::min(3, pos.attackers_to(c, s).popcount());
          int base = (c == pos.side_to_move() ? 0 : PLANES_PER_SIDE) + ATTACK_COUNT_PLANE;
          Square v = pos.side_to_move() == BLACK ? s : rotate180(s);
          for (int k = 0; k < 3; ++k) REQUIRE(f[(base + k) * SQUARES + v] == (k < n ? 1.0f : 0.0f));
        }
      std::set<int> labels;
      for (Move m : moves) {
        int label = move_to_label(m, pos.side_to_move());
        REQUIRE(label >= 0);
        REQUIRE(label < POLICY_SIZE);
        labels.insert(label);
        REQUIRE(mirror.is_legal(mirror_move(m)));
        REQUIRE(move_to_label(mirror_move(m), mirror.side_to_move()) == label);
      }
      REQUIRE(int(labels.size()) == moves.size());
      pos.do_move(moves.moves[rng() % moves.size()]);
    }
  }
}

TEST_CASE("packed features: the same planes as bits, pad bits zero, expanded back exactly", "[nn][features][random]") {
  std::mt19937_64 rng(11);
  int positions = 0, ones = 0;
  for (int game = 0; game < 4; ++game) {
    Position pos;
    for (int ply = 0; ply < 160; ++ply) {
      MoveList moves = legal_moves(pos);
      if (moves.size() == 0) break;
      INFO(pos.sfen());
      const auto f = features_of(pos);
      std::vector<uint8_t> bits(PACKED_INPUT_BYTES, 0xff);  // 0xff: a byte left unwritten would show
      encode_packed_features(pos, bits.data());
      for (int i = 0; i < INPUT_SIZE; ++i) {
        REQUIRE((f[i] == 0.0f || f[i] == 1.0f));
        REQUIRE(((bits[i / 8] >> (i % 8)) & 1) == int(f[i]));
        ones += int(f[i]);
      }
      for (int i = INPUT_SIZE; i < PACKED_INPUT_BYTES * 8; ++i) REQUIRE(((bits[i / 8] >> (i % 8)) & 1) == 0);
      std::vector<float> back(INPUT_SIZE, -1.0f);
      unpack_features(bits.data(), 1, back.data());
      REQUIRE(back == f);
      ++positions;
      pos.do_move(moves.moves[rng() % moves.size()]);
    }
  }
  CHECK(positions > 100);
  CHECK(ones > positions * 50);       // real positions: many planes set, so the comparison means something
  CHECK(PACKED_INPUT_BYTES == 1216);  // 9639 bits in 16-byte units
}

TEST_CASE("left-right images: flipped planes and mirrored policy indices match the image position's",
          "[nn][features][random]") {
  std::vector<int> seen(POLICY_SIZE, 0);
  for (int i = 0; i < POLICY_SIZE; ++i) {
    const int j = mirror_policy_index(i);
    REQUIRE(j >= 0);
    REQUIRE(j < POLICY_SIZE);
    REQUIRE(mirror_policy_index(j) == i);
    ++seen[j];
  }
  REQUIRE(std::count(seen.begin(), seen.end(), 1) == POLICY_SIZE);  // a permutation
  CHECK(left_right_sfen("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1") ==
        "lnsgkgsnl/1b5r1/ppppppppp/9/9/9/PPPPPPPPP/1R5B1/LNSGKGSNL b - 1");

  std::mt19937_64 rng(11);
  int moves_checked = 0;
  for (int game = 0; game < 4; ++game) {
    Position pos;
    for (int ply = 0; ply < 160; ++ply) {
      MoveList moves = legal_moves(pos);
      if (moves.size() == 0) break;
      const std::string isfen = left_right_sfen(pos.sfen());
      Position image = from_sfen(isfen);
      INFO(pos.sfen() << " / image " << isfen);
      auto f = features_of(pos);
      mirror_features(f.data());
      REQUIRE(f == features_of(image));
      REQUIRE(legal_moves(image).size() == moves.size());
      for (Move m : moves) {
        REQUIRE(image.is_legal(left_right_move(m)));
        REQUIRE(mirror_policy_index(move_to_label(m, pos.side_to_move())) ==
                move_to_label(left_right_move(m), image.side_to_move()));
        ++moves_checked;
      }
      pos.do_move(moves.moves[rng() % moves.size()]);
    }
  }
  CHECK(moves_checked > 10000);
}
