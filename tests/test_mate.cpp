// Mate search: the df-pn solver and the fixed-depth mate_in_ply. Every answer is checked with the
// rules core and with a brute-force search written here (fixed depth, exhaustive, sharing nothing
// with engine/mate.cpp): the shortest mate length of every problem, and, for every defender move
// of a returned line, that each other defence is also mated within the plies the line has left.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <thread>

#include "engine/mate.h"
#include "shogi/movegen.h"
#include "tests/positions.h"

using namespace jiriki;
using jiriki::testing::from_sfen;

namespace {

// Exhaustive fixed-depth search: can the side to move force mate within `plies` plies, playing
// checks only? Results are memoised by (position key, plies left).
class BruteForce {
 public:
  bool attacker_mates(Position& pos, int plies) {
    if (plies < 1) return false;
    auto [it, fresh] = memo_.try_emplace({pos.key(), plies}, false);
    if (!fresh) return it->second;
    bool mates = false;
    for (Move m : legal_moves(pos)) {
      pos.do_move(m);
      mates = pos.in_check() && defender_mated(pos, plies - 1);
      pos.undo_move();
      if (mates) break;
    }
    return memo_[{pos.key(), plies}] = mates;
  }
  // Defender to move: is it mated now or, whatever it plays, within `plies` plies?
  bool defender_mated(Position& pos, int plies) {
    MoveList replies = legal_moves(pos);
    if (replies.size() == 0) return pos.in_check();
    if (plies < 2) return false;
    for (Move m : replies) {
      pos.do_move(m);
      bool mated = attacker_mates(pos, plies - 1);
      pos.undo_move();
      if (!mated) return false;
    }
    return true;
  }
  // The shortest mate in plies, or -1 when there is none within max_plies.
  int shortest(Position& pos, int max_plies) {
    for (int n = 1; n <= max_plies; n += 2)
      if (attacker_mates(pos, n)) return n;
    return -1;
  }

 private:
  std::map<std::pair<uint64_t, int>, bool> memo_;
};

// Plays `pv` out: every move legal, every attacker move a check, checkmate at the end; at every
// defender move, each alternative defence is mated within the plies the line has left, so the line
// is a forced mate of its length. Restores the position. Returns the alternatives examined.
int verify_mating_line(Position& pos, const std::vector<Move>& pv, BruteForce& bf) {
  const std::string before = pos.sfen();
  REQUIRE(pv.size() % 2 == 1);
  int alternatives = 0;
  for (size_t i = 0; i < pv.size(); ++i) {
    INFO("ply " << i << " " << move_to_usi(pv[i]) << " in " << pos.sfen());
    MoveList legal = legal_moves(pos);
    REQUIRE(legal.contains(pv[i]));
    REQUIRE(pos.is_legal(pv[i]));
    if (i % 2 == 1) {
      const int left = int(pv.size() - i - 1);
      for (Move alt : legal) {
        if (alt == pv[i]) continue;
        pos.do_move(alt);
        INFO("alternative defence " << move_to_usi(alt));
        CHECK(bf.attacker_mates(pos, left));
        pos.undo_move();
        ++alternatives;
      }
    }
    pos.do_move(pv[i]);
    if (i % 2 == 0) REQUIRE(pos.in_check());
  }
  REQUIRE(pos.in_check());
  REQUIRE(legal_moves(pos).size() == 0);
  for (size_t i = 0; i < pv.size(); ++i) pos.undo_move();
  REQUIRE(pos.sfen() == before);
  return alternatives;
}

std::string line_text(const std::vector<Move>& pv) {
  std::string s;
  for (Move m : pv) s += move_to_usi(m) + " ";
  return s;
}

struct Problem {
  const char* sfen;
  int plies;  // length of the shortest mate, with the defender resisting longest
};

// Problems composed for these tests. The short ones are worked by hand below; for all of them the
// brute force confirms the length (no mate two plies shorter) and checks every defence of the line.
const Problem PROBLEMS[] = {
    // 1 ply: White king 1a, Black pawn 1c. G*1b: the gold covers 2a and 2b, the pawn guards 1b.
    {"8k/9/8P/9/9/9/9/9/4K4 b G2r2b3g4s4n4l17p 1", 1},
    // 3 plies: White king 1b, own lance on 1c; Black lance 2e, silver 4b. R*2b (guarded by the
    // lance through 2d-2c): 2a and 2c are on the rook's file, so only K-1a; then 2b2a+ (the dragon is
    // guarded by the lance along file 2 and covers 1b): mate.
    {"9/5S2k/8l/9/7L1/9/9/9/4K4 b RPr2b4g3s4n2l17p 1", 3},
    // 5 plies: White king 1b, rook 2a, lance 1c; Black horse 3c, gold 3d. S*2c: the horse covers
    // 1a and 2b, 2c is guarded twice, so only Rx2c; Gx2c leaves only K-2a (1a: horse, 2b: gold and
    // horse); G-2b mate (guarded by the horse; 1a, 3a, 1b, 3b all covered).
    {"7r1/8k/6+B1l/6G2/9/9/9/9/4K4 b SLrb3g3s4n2l18p 1", 5},
    // 7 plies: White king 4a, pawn 3a, lance 3b; Black gold 6c, two rooks in hand. R*5a Kx5a,
    // R*5c (an interposition on 5b does no better) K-6a, 5c5b+ K-7a, G-7b mate.
    {"5kp2/6l2/3G5/9/9/9/9/9/4K4 b 2R2b3g4s4n3l17p 1", 7},
    // 9 plies: a lone White king 2a against a dragon 4c and lance 5c: P*2b (a pawn check that is not
    // mate, so legal) K-1b, R*1c K-2b, and the dragon and rook close the net.
    {"7k1/9/4L+R3/9/9/9/9/9/4K4 b RP2b4g4s4n3l17p 1", 9},
    // 11 plies, a chain of sacrifices, every move a check: the promoted lance 3b takes the gold on
    // 2a, Kx2a; G*3b K-1a; the gold takes the bishop on 2b, Kx2b; promoted lance 3d-2c K-1a;
    // B*2b K-2a; 4a3b+ (a horse) mate.
    {"5B1gk/6+Lbl/9/6+L2/9/9/9/9/4K4 b L2P2r3g4s4n16p 1", 11},
    // 13 plies: White king 1b behind its pawn 2b; Black horse 1d, rook 2e, bishop in hand.
    {"9/7pk/9/8+B/7R1/9/9/9/4K4 b Br4g4s4n4l17p 1", 13},
    // 15 plies: White king 1c; Black bishop 3d, lance 3f, gold and silver in hand. The lance has to
    // climb file 3 through the defender's pawn interpositions before the net closes.
    {"9/9/8k/6B2/9/6L2/9/9/4K4 b GS2rb3g3s4n3l18p 1", 15},
};

}  // namespace

TEST_CASE("mate_in_ply finds mates in 1, 3 and 5 and nothing else", "[mate]") {
  BruteForce bf;
  Position m1 = from_sfen(PROBLEMS[0].sfen), m3 = from_sfen(PROBLEMS[1].sfen), m5 = from_sfen(PROBLEMS[2].sfen);
  Move first = MOVE_NONE;
  REQUIRE(mate_in_ply(m1, 1, &first));
  CHECK(first == make_drop(GOLD, make_square(0, 1)));  // G*1b, the only mate

  CHECK_FALSE(mate_in_ply(m3, 1));
  REQUIRE(mate_in_ply(m3, 3, &first));
  CHECK(first == make_drop(ROOK, make_square(1, 1)));  // R*2b
  CHECK_FALSE(mate_in_ply(m5, 3));
  REQUIRE(mate_in_ply(m5, 5, &first));
  REQUIRE(legal_moves(m5).contains(first));
  m5.do_move(first);
  CHECK(bf.defender_mated(m5, 4));
  m5.undo_move();
  CHECK(m5.sfen() == std::string(PROBLEMS[2].sfen));

  // The solver's longer problems hold no short mate; neither does the opening position.
  Position m7 = from_sfen(PROBLEMS[3].sfen), start;
  CHECK_FALSE(mate_in_ply(m7, 5));
  for (int plies : {1, 3, 5}) CHECK_FALSE(mate_in_ply(start, plies));
}

TEST_CASE("df-pn solves composed problems of 1 to 15 plies with a shortest forced line", "[mate]") {
  MateSolver solver(16);
  int alternatives = 0;
  for (const Problem& p : PROBLEMS) {
    INFO(p.sfen);
    Position pos = from_sfen(p.sfen);
    BruteForce bf;
    REQUIRE(bf.shortest(pos, p.plies) == p.plies);  // the stated length is right
    MateResult r = solver.solve(pos);
    INFO("line: " << line_text(r.pv) << "nodes " << r.nodes);
    REQUIRE(r.status == MateResult::MATE);
    CHECK(int(r.pv.size()) == p.plies);
    CHECK(pos.sfen() == std::string(p.sfen));
    alternatives += verify_mating_line(pos, r.pv, bf);
  }
  CHECK(alternatives > 100);  // the longer lines leave the defender real choices
}

TEST_CASE("an illegal pawn-drop mate is not a mate, at the root or deeper", "[mate]") {
  // White king 1a boxed in by its own knight 2a and silver 2b; Black knight 2d guards 1b. P*1b would
  // mate (uchifuzume), so it is illegal. Black's only other check, 2d1b+, is answered by Kx1b, after
  // which Black has a lone pawn in hand and no mate.
  Position pos = from_sfen("7nk/7s1/9/7N1/9/9/9/9/4K4 b P2r2b4g3s2n4l17p 1");
  const Move drop = make_drop(PAWN, make_square(0, 1));
  CHECK(pos.pawn_drop_mates(make_square(0, 1)));
  CHECK_FALSE(legal_moves(pos).contains(drop));
  pos.do_move(drop);  // played anyway, it leaves White without a reply
  CHECK(legal_moves(pos).size() == 0);
  pos.undo_move();

  BruteForce bf;
  CHECK(bf.shortest(pos, 9) == -1);
  MateResult r = solve_mate(pos);
  CHECK(r.status == MateResult::NO_MATE);
  CHECK(r.pv.empty());
  CHECK_FALSE(mate_in_ply(pos, 5));

  // Two plies deeper: White king 1b with its own knight on 1c, Black knight 1d. R*2b+ (guarded by
  // the knight) leaves only K-1a, where P*1b would mate (the rook guards 1b and covers 2a) but is
  // illegal; the rook's other checks let the king out, and there is no mate at all.
  Position deeper = from_sfen("9/8k/8n/8N/9/9/9/9/4K4 b RPr2b4g4s2n4l17p 1");
  deeper.do_move(make_drop(ROOK, make_square(1, 1)));
  MoveList replies = legal_moves(deeper);
  REQUIRE(replies.size() == 1);
  deeper.do_move(replies.moves[0]);
  CHECK(deeper.king_square(WHITE) == make_square(0, 0));
  CHECK(deeper.pawn_drop_mates(make_square(0, 1)));
  CHECK_FALSE(legal_moves(deeper).contains(drop));
  deeper.undo_move();
  deeper.undo_move();
  CHECK(bf.shortest(deeper, 9) == -1);
  CHECK(solve_mate(deeper).status == MateResult::NO_MATE);

  // The same net closed by pushing a pawn (legal) is a mate in one.
  Position push = from_sfen("7nk/7s1/8P/7N1/9/9/9/9/4K4 b 2r2b4g3s2n4l17p 1");
  MateResult p = solve_mate(push);
  REQUIRE(p.status == MateResult::MATE);
  REQUIRE(p.pv.size() == 1);
  CHECK(move_from(p.pv[0]) == make_square(0, 2));
  verify_mating_line(push, p.pv, bf);
}

TEST_CASE("positions without a mate, perpetual check included, are answered NO_MATE", "[mate]") {
  BruteForce bf;
  // A lone rook against a bare king checks forever (the king steps between two squares while the
  // rook follows) but never mates: the repeated positions must end the search.
  Position rook = from_sfen("8k/9/9/9/9/9/9/9/R3K4 b - 1");
  CHECK(bf.shortest(rook, 9) == -1);
  MateResult r = solve_mate(rook);
  CHECK(r.status == MateResult::NO_MATE);
  // The same with every other piece in the defender's hand to interpose.
  Position rook_hand = from_sfen("8k/9/9/9/9/9/9/9/R3K4 b r2b4g4s4n4l18p 1");
  CHECK(solve_mate(rook_hand).status == MateResult::NO_MATE);
  // No check at all.
  Position start;
  CHECK(solve_mate(start).status == MateResult::NO_MATE);
  // A mate that needs more plies than allowed.
  Position seven = from_sfen(PROBLEMS[3].sfen);
  MateLimits limits;
  limits.max_ply = 5;
  CHECK(solve_mate(seven, limits).status == MateResult::NO_MATE);
  limits.max_ply = 7;
  CHECK(solve_mate(seven, limits).status == MateResult::MATE);
}

TEST_CASE("counter-checks by the defender and an attacker in check at the root", "[mate]") {
  BruteForce bf;
  // 5 plies: after G*4c, K-4a is mated at once, so the longest defence is 3cx4c, which checks
  // Black's king on 5d; Black must answer with a check, 4dx4c+ (the silver promotes, guarded by the
  // king), K-4a, N*3c mate.
  Position counter = from_sfen("4p1s2/5k3/6g2/2N1KS3/9/9/9/9/9 b GNP2r2b2g2s2n4l16p 1");
  MateResult r = solve_mate(counter);
  INFO("line: " << line_text(r.pv));
  REQUIRE(r.status == MateResult::MATE);
  REQUIRE(r.pv.size() == 5);
  REQUIRE(bf.shortest(counter, 5) == 5);
  counter.do_move(r.pv[0]);
  counter.do_move(r.pv[1]);
  CHECK(counter.in_check());  // the defender's reply gave check
  counter.undo_move();
  counter.undo_move();
  verify_mating_line(counter, r.pv, bf);

  // 3 plies: Black's king on 4d is in check from the gold on 3c; 3ex3c+ takes it with check, and
  // each king move (1a, 1b, 2a) is mated at once, G*2b after K-1a.
  Position in_check = from_sfen("9/7k1/6gp1/5K2G/6R2/9/9/9/9 b Lr2b2g4s4n3l17p 1");
  REQUIRE(in_check.in_check());
  MateResult c = solve_mate(in_check);
  REQUIRE(c.status == MateResult::MATE);
  REQUIRE(c.pv.size() == 3);
  CHECK(c.pv[0] == make_move(make_square(2, 4), make_square(2, 2), true));
  verify_mating_line(in_check, c.pv, bf);
}

TEST_CASE("mate solver limits: nodes, time, stop flag, another thread", "[mate]") {
  // Two rooks and two bishops in hand against an untouched back rank: far more work than any
  // limit below allows.
  Position hard = from_sfen("lnsgkgsnl/9/9/9/9/9/9/9/4K4 b 2R2B 1");
  const std::string before = hard.sfen();
  MateSolver solver(4);

  MateLimits nodes;
  nodes.max_nodes = 20000;
  MateResult r = solver.solve(hard, nodes);
  CHECK(r.status == MateResult::TIMEOUT);
  CHECK(r.nodes >= 20000);
  CHECK(r.nodes < 20000 + 4096);  // checked every 1024 nodes, plus one node's expansion
  CHECK(hard.sfen() == before);

  MateLimits zero_time;
  zero_time.time_ms = 0;
  CHECK(solver.solve(hard, zero_time).status == MateResult::TIMEOUT);
  // Found by fuzz_usi_engine: `go mate 2000099849646060` overflowed the deadline's nanoseconds;
  // so long a time is a long time, and a mate in 1 is found.
  MateLimits eons;
  eons.time_ms = 2000099849646060;
  Position one = from_sfen("4k4/9/4P4/9/9/9/9/9/4K4 b G 1");
  CHECK(solver.solve(one, eons).status == MateResult::MATE);

  std::atomic<bool> stop{false};
  MateLimits stoppable;
  stoppable.stop = &stop;
  MateResult threaded;
  Position copy = hard;
  auto start = std::chrono::steady_clock::now();
  std::thread worker([&] { threaded = solver.solve(copy, stoppable); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  stop = true;
  worker.join();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(threaded.status == MateResult::TIMEOUT);
  CHECK(threaded.nodes > 0);
  CHECK(seconds < 2.0);
  CHECK(copy.sfen() == before);
}

TEST_CASE("a mate solver keeps its table between solves and for both attackers", "[mate]") {
  MateSolver solver(4);
  Position pos = from_sfen(PROBLEMS[4].sfen);
  MateResult first = solver.solve(pos);
  MateResult again = solver.solve(pos);
  REQUIRE(first.status == MateResult::MATE);
  REQUIRE(again.status == MateResult::MATE);
  CHECK(again.pv.size() == first.pv.size());
  CHECK(again.nodes < first.nodes);  // the stored proof is reused
  // The same problem mirrored for White (board rotated, colours swapped) in the same table.
  Position white = from_sfen("4k4/9/9/9/9/9/3+rl4/9/1K7 w 2B4G4S4N3L17Prp 1");
  MateResult w = solver.solve(white);
  REQUIRE(w.status == MateResult::MATE);
  CHECK(w.pv.size() == first.pv.size());
  BruteForce bf;
  verify_mating_line(white, w.pv, bf);
  solver.clear();
  CHECK(solver.solve(pos).nodes == first.nodes);  // a cleared table starts afresh
}
