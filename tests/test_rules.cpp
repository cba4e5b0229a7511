// Rules core: published perft counts, randomised consistency checks, game rules and SFEN/USI input.
#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <set>

#include "shogi/movegen.h"
#include "shogi/opening_line.h"
#include "tests/positions.h"

using namespace jiriki;
using jiriki::testing::from_sfen;

namespace {
void play(Position& pos, std::initializer_list<const char*> moves) {
  for (const char* t : moves) {
    Move m = move_from_usi(pos, t);
    INFO(t << " in " << pos.sfen());
    REQUIRE(pos.is_legal(m));
    pos.do_move(m);
  }
}
std::set<Move> as_set(const MoveList& l) { return {l.begin(), l.end()}; }
}  // namespace

TEST_CASE("perft: start position matches published counts", "[rules][perft]") {
  Position pos;
  const uint64_t expected[] = {30, 900, 25470, 719731, 19861490};
  for (int d = 1; d <= 5; ++d) CHECK(perft(pos, d) == expected[d - 1]);
  CHECK(pos.sfen() == Position::STARTPOS_SFEN);
}

TEST_CASE("perft: published counts on special positions", "[rules][perft]") {
  Position matsuri = from_sfen("l6nl/5+P1gk/2np1S3/p1p4Pp/3P2Sp1/1PPb2P1P/P5GS1/R8/LN4bKL w GR5pnsg 1");
  CHECK(perft(matsuri, 1) == 207);
  CHECK(perft(matsuri, 2) == 28684);
  CHECK(perft(matsuri, 3) == 4809015);

  Position max_moves = from_sfen("R8/2K1S1SSk/4B4/9/9/9/9/9/1L1L1L3 b RBGSNLP3g3n17p 1");
  CHECK(perft(max_moves, 1) == 593);

  // The pawn drop to 1b would mate, so it is excluded.
  Position uchifuzume = from_sfen("7lk/9/8S/9/9/9/9/7L1/8K b P 1");
  const uint64_t expected[] = {85, 639, 10786, 167089};
  for (int d = 1; d <= 4; ++d) CHECK(perft(uchifuzume, d) == expected[d - 1]);

  Position no_moves = from_sfen("+R+N+SGKG+S+N+R/+B+N+SG+LG+S+N+B/P+LPP+LPP+LP/1P2P2P1/9/9/9/9/4k4 b 9P 200");
  CHECK(perft(no_moves, 1) == 0);
}

TEST_CASE("pawn drop mate is illegal, a pawn drop check is legal", "[rules]") {
  Position mate = from_sfen("7lk/9/8S/9/9/9/9/7L1/8K b P 1");
  Move drop = make_drop(PAWN, make_square(0, 1));  // P*1b
  CHECK(mate.pawn_drop_mates(make_square(0, 1)));
  CHECK_FALSE(mate.is_legal(drop));
  CHECK_FALSE(legal_moves(mate).contains(drop));
  // Without the silver on 1c the king can take the pawn: the drop only checks and is legal.
  Position check = from_sfen("7lk/9/9/9/9/9/9/7L1/8K b P 1");
  CHECK_FALSE(check.pawn_drop_mates(make_square(0, 1)));
  CHECK(check.is_legal(drop));
  CHECK(legal_moves(check).contains(drop));
  CHECK(check.gives_check(drop));
}

TEST_CASE("a mate problem: the attacker has no king, the rules hold for the rest", "[rules]") {
  // The attacker's gold drops on every empty square: 81 less the king's.
  Position drops = from_sfen("4k4/9/9/9/9/9/9/9/9 b G 1");
  CHECK(drops.king_square(BLACK) == SQ_NONE);
  CHECK(legal_moves(drops).size() == 80);
  // The defender's king keeps out of the gold's reach: 4a and 6a are left of its five squares.
  CHECK(legal_moves(from_sfen("4k4/9/4G4/9/9/9/9/9/9 w - 1")).size() == 2);
  // A pawn drop that mates is still illegal, a drop that checks is still a check.
  Position mate = from_sfen("7lk/9/8S/9/9/9/9/7L1/9 b P 1");
  const Move drop = make_drop(PAWN, make_square(0, 1));  // P*1b
  CHECK_FALSE(mate.is_legal(drop));
  CHECK_FALSE(legal_moves(mate).contains(drop));
  Position check = from_sfen("7lk/9/9/9/9/9/9/7L1/9 b P 1");
  CHECK(check.is_legal(drop));
  CHECK(check.gives_check(drop));
  // The kingless side is never in check, whatever attacks its pieces.
  Position after = check;
  after.do_move(drop);
  CHECK(after.in_check());
  CHECK_FALSE(from_sfen("4k4/9/9/9/9/9/9/4r4/4G4 b - 1").in_check());
}

TEST_CASE("random games: undo, keys, legality and generator subsets agree", "[rules][random]") {
  std::mt19937 rng(12345);
  int positions = 0, in_check = 0;
  for (int game = 0; game < 300; ++game) {
    Position pos;
    std::vector<std::string> sfens;
    for (int ply = 0; ply < 200; ++ply) {
      REQUIRE(pos.is_consistent());
      REQUIRE(pos.key() == pos.compute_key());
      MoveList legal = legal_moves(pos);
      ++positions;
      // Every generated move passes the independent legality check, and random 16-bit values
      // pass it only when they are generated moves.
      for (Move m : legal) REQUIRE(pos.is_legal(m));
      for (int k = 0; k < 20; ++k) {
        Move r = Move(rng() & 0xffff);
        REQUIRE(pos.is_legal(r) == legal.contains(r));
      }
      // SFEN round trip.
      Position copy = from_sfen(pos.sfen());
      REQUIRE(copy.sfen() == pos.sfen());
      REQUIRE(copy.key() == pos.key());
      // Subsets: captures + quiets = legal; checks are exactly the legal moves that check.
      MoveList caps, quiets, checks, evasions;
      generate<GenType::CAPTURES>(pos, caps);
      generate<GenType::QUIETS>(pos, quiets);
      generate<GenType::CHECKS>(pos, checks);
      generate<GenType::EVASIONS>(pos, evasions);
      REQUIRE(caps.size() + quiets.size() == legal.size());
      std::set<Move> both = as_set(caps);
      both.insert(quiets.begin(), quiets.end());
      REQUIRE(both == as_set(legal));
      int n_checks = 0;
      for (Move m : legal) {
        pos.do_move(m);
        bool checks_now = pos.in_check();
        pos.undo_move();
        REQUIRE(pos.gives_check(m) == checks_now);
        n_checks += checks_now;
      }
      REQUIRE(checks.size() == n_checks);
      if (pos.in_check()) {
        ++in_check;
        REQUIRE(as_set(evasions) == as_set(legal));
      } else {
        REQUIRE(evasions.size() == 0);
      }
      if (legal.size() == 0) break;
      std::string before = pos.sfen();
      uint64_t key = pos.key();
      Move m = legal.moves[rng() % legal.size()];
      pos.do_move(m);
      REQUIRE(pos.last_move() == m);
      pos.undo_move();
      REQUIRE(pos.sfen() == before);
      REQUIRE(pos.key() == key);
      pos.do_move(m);
    }
  }
  CHECK(positions > 30000);
  CHECK(in_check > 100);  // the evasion checks above were really exercised
}

TEST_CASE("sennichite: fourfold repetition is a draw", "[rules]") {
  Position pos;
  for (int cycle = 0; cycle < 3; ++cycle) {
    play(pos, {"2h3h", "8b7b", "3h2h", "7b8b"});
    CHECK(pos.repetition(1) == Repetition::DRAW);
    CHECK(pos.repetition(3) == (cycle == 2 ? Repetition::DRAW : Repetition::NONE));
  }
  play(pos, {"2h3h"});
  CHECK(pos.repetition(1) == Repetition::DRAW);  // first return of the position after 2h3h
  Position fresh;
  play(fresh, {"7g7f"});
  CHECK(fresh.repetition(1) == Repetition::NONE);
}

TEST_CASE("perpetual check: the checking side loses", "[rules]") {
  // Black checks with the rook on every move of the cycle; after the fourth occurrence the side
  // to move (White, the checked side) wins.
  Position pos = from_sfen("4k4/9/9/9/9/9/9/9/K2R5 b - 1");
  play(pos, {"6i5i"});
  for (int cycle = 0; cycle < 3; ++cycle) {
    CHECK(pos.repetition(3) == Repetition::NONE);
    play(pos, {"5a4a", "5i4i", "4a5a", "4i5i"});
  }
  CHECK(pos.repetition(3) == Repetition::WIN);
  CHECK(pos.repetition(1) == Repetition::WIN);
  // Seen from Black to move one ply later: the side to move is the one that checked, it loses.
  play(pos, {"5a4a"});
  CHECK(pos.repetition(1) == Repetition::LOSE);

  // The same cycle where the rook does not check on every move is an ordinary draw.
  Position quiet = from_sfen("4k4/9/9/9/9/9/9/9/K2R5 b - 1");
  for (int cycle = 0; cycle < 4; ++cycle) play(quiet, {"6i7i", "5a4a", "7i6i", "4a5a"});
  CHECK(quiet.repetition(3) == Repetition::DRAW);
}

TEST_CASE("entering-king declaration", "[rules]") {
  // Black: king 5b in the camp, 6 tokins + 2 silvers + rook + bishop in the camp (10 pieces,
  // 8 + 10 = 18 points) and 10 pawns in hand: 28 points, exactly what Black needs.
  auto decl = [](const std::string& sfen, EnteringKingRule rule) { return from_sfen(sfen).declaration_win(rule); };
  const auto R27 = EnteringKingRule::POINT27, R24 = EnteringKingRule::POINT24;
  CHECK(decl("+P+P+PS1S+P+P+P/1R2K2B1/9/9/9/9/9/9/4k4 b 10P 1", R27));
  CHECK_FALSE(decl("+P+P+PS1S+P+P+P/1R2K2B1/9/9/9/9/9/9/4k4 b 9P 1", R27));   // 27 points: one short
  CHECK_FALSE(decl("+P+P+PS1S+P+P+P/1R2K2B1/9/9/9/9/9/9/4k4 b 10P 1", R24));  // 24-point rule needs 31
  CHECK(decl("+P+P+PS1S+P+P+P/1R2K2B1/9/9/9/9/9/9/4k4 b 10P2G1S 1", R24));    // 31 points
  CHECK_FALSE(decl("+P+P+PS1S+P+P+P/1R2K2B1/9/9/9/9/9/9/4k4 b 10P 1", EnteringKingRule::NONE));
  // Nine pieces in the camp (a silver stands outside on 4d) with 28 points: one piece short.
  CHECK_FALSE(decl("+P+P+PS2+P+P+P/1R2K2B1/9/5S3/9/9/9/9/4k4 b 11P 1", R27));
  // In check (a White gold on 5a) the declaration fails.
  CHECK_FALSE(decl("+P+P+PSgS+P+P+P/1R2K2B1/9/9/9/9/9/9/4k4 b 10P 1", R27));
  // King outside the camp.
  CHECK_FALSE(decl("+P+P+PS1S+P+P+P/1R5B1/9/4K4/9/9/9/9/4k4 b 10P 1", R27));
  // White needs only 27 points.
  CHECK(decl("4K4/9/9/9/9/9/9/1b2k2r1/+p+p+ps1s+p+p+p w 9p 1", R27));
  CHECK_FALSE(decl("4K4/9/9/9/9/9/9/1b2k2r1/+p+p+ps1s+p+p+p w 8p 1", R27));
}

TEST_CASE("SFEN: output of known positions and hands", "[rules][sfen]") {
  Position pos = from_sfen("startpos");
  CHECK(pos.sfen() == Position::STARTPOS_SFEN);
  CHECK(pos.sfen(false) == "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b -");
  // Multi-digit hand counts and the R B G S N L P hand order, Black first.
  Position hands = from_sfen("8k/9/9/9/9/9/9/9/K8 w 11pRb2G2s 7");  // input in any order
  CHECK(hands.sfen() == "8k/9/9/9/9/9/9/9/K8 w R2Gb2s11p 7");
  CHECK(hands.hand(WHITE)[PAWN] == 11);
  CHECK(hands.game_ply() == 7);
  CHECK(from_sfen("8k/9/9/9/9/9/9/9/K8 b -").game_ply() == 1);  // move number optional
  // A letter written more than once adds up, as other engines read it: GG is two golds.
  Position repeated = from_sfen("8k/9/9/9/9/9/9/9/K8 b GG2Pp3P 1");
  CHECK(repeated.hand(BLACK)[GOLD] == 2);
  CHECK(repeated.hand(BLACK)[PAWN] == 5);
  CHECK(repeated.hand(WHITE)[PAWN] == 1);
  CHECK(repeated.sfen() == "8k/9/9/9/9/9/9/9/K8 b 2G5Pp 1");
  play(pos, {"7g7f"});
  CHECK(pos.sfen() == "lnsgkgsnl/1r5b1/ppppppppp/9/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL w - 2");
}

TEST_CASE("SFEN: malformed input is rejected with a message naming the problem", "[rules][sfen]") {
  auto error_of = [](const std::string& sfen) {
    Position p;
    std::string before = p.sfen();
    auto err = p.set_sfen(sfen);
    CHECK(p.sfen() == before);  // unchanged on error
    return err.value_or("");
  };
  auto has = [](const std::string& err, const std::string& part) {
    INFO(err);
    CHECK(err.find(part) != std::string::npos);
  };
  has(error_of(""), "needs a board");
  has(error_of("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNX b - 1"), "unknown character 'X'");
  has(error_of("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSN b - 1"), "9 full ranks");
  has(error_of("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R2/LNSGKGSNL b - 1"), "rank 8 has more than 9");
  has(error_of("lnsgkgsnl/1r5b1/ppppppppp/8/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1"), "rank 4 does not have 9");
  has(error_of("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL x - 1"), "side to move");
  has(error_of("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b P 1"), "19 pieces of type 'P'");
  has(error_of("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b 3B 1"), "pieces of type 'B'");
  has(error_of("9/9/9/9/9/9/9/9/9 b P 1"), "no king on either side");
  has(error_of("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKKSNL b - 1"), "two Black kings");
  has(error_of("P3k4/9/9/9/9/9/9/9/4K4 b - 1"), "never move on 9a");
  has(error_of("4k4/9/9/9/9/9/9/9/4K3l w - 1"), "never move on 1i");
  has(error_of("4k4/N8/9/9/9/9/9/9/4K4 b - 1"), "never move on 9b");
  has(error_of("4k4/9/4P4/9/4P4/9/9/9/4K4 b - 1"), "two unpromoted Black pawns on file 5");
  has(error_of("4k4/9/9/9/4R4/9/9/9/4K4 b - 1"), "side not to move in check");
  has(error_of("4k4/9/9/9/9/9/9/9/4K4 b 0P 1"), "at least 1");
  has(error_of("4k4/9/9/9/9/9/9/9/4K4 b K 1"), "invalid piece 'K'");
  has(error_of("4k4/9/9/9/9/9/9/9/4K4 b GGGGG 1"), "5 pieces of type 'G'");   // repeated letters add up ...
  has(error_of("4k4/9/9/9/9/9/9/9/4K4 b 10P9P 1"), "19 pieces of type 'P'");  // ... to an impossible count
  has(error_of("4k4/9/9/9/9/9/9/9/4K4 b 18P18P18P18P18P18P18P18P18P18P18P18P18P18P18P 1"), "pieces of type 'P'");
  has(error_of("4k4/9/9/9/9/9/9/9/4K4 b - 0"), "move number");
  has(error_of("4k4/9/9/9/9/9/9/9/4K4 b - +5"), "move number");
  // Found by fuzz_sfen: a move number beyond an int was cut to one, written out as a negative
  // number that did not read back. The largest accepted leaves room for the moves that follow.
  has(error_of("4k4/9/9/9/9/9/9/9/4K4 b - 4000000000000000001"), "from 1 to 1000000000");
  has(error_of("4k4/9/9/9/9/9/9/9/4K4 b - 1000000001"), "from 1 to 1000000000");
  CHECK(from_sfen("4k4/9/9/9/9/9/9/9/4K4 b - 1000000000").game_ply() == 1000000000);
  has(error_of("4k4/9/9/9/9/9/9/9/4K4 b - 1 x"), "unexpected text");
  has(error_of("4k4/9/9/9/9/9/9/9/4+K4 b - 1"), "cannot promote");
  // A promoted pawn does not count for nifu and may stand anywhere.
  Position ok;
  CHECK_FALSE(ok.set_sfen("+P3k4/9/4+P4/9/4P4/9/9/9/4K4 b - 1"));
}

TEST_CASE("USI move text", "[rules][usi]") {
  Position pos;
  CHECK(move_from_usi(pos, "7g7f") == make_move(make_square(6, 6), make_square(6, 5)));
  CHECK(move_from_usi(pos, "8h2b+") == make_move(make_square(7, 7), make_square(1, 1), true));
  CHECK(move_from_usi(pos, "P*5e") == make_drop(PAWN, make_square(4, 4)));
  CHECK(move_to_usi(make_drop(GOLD, make_square(4, 4))) == "G*5e");
  CHECK(move_to_usi(Move(0x3fff)) == "(not a move: 16383)");  // a drop of piece type 47 (fuzz_hcpe3)
  CHECK(move_to_usi(Move(81)) == "(not a move: 81)");         // destination square 81
  CHECK(move_to_usi(make_move(make_square(7, 7), make_square(1, 1), true)) == "8h2b+");
  for (const char* bad : {"", "7g7", "7g7f++", "7g7j", "0g7f", "7g7g", "K*5e", "p*5e", "P*5j", "P+5e", "resign"})
    CHECK(move_from_usi(pos, bad) == MOVE_NONE);
  // Syntactically fine but illegal in the start position.
  CHECK_FALSE(pos.is_legal(move_from_usi(pos, "7g7e")));
  CHECK_FALSE(pos.is_legal(move_from_usi(pos, "P*5e")));
  CHECK_FALSE(pos.is_legal(move_from_usi(pos, "7g7f+")));
  // move16 layout as dlshogi: to | from << 7 | promote << 14, drops from 81 + type - 1.
  CHECK(make_move(make_square(6, 6), make_square(6, 5)) == (59 | (60 << 7)));
  CHECK(make_drop(PAWN, 40) == (40 | (81 << 7)));
}

TEST_CASE("opening lines: the words, move number 1 when asked, the caller's check, the text back", "[rules]") {
  const OpeningCheck none = [](const Position&) -> std::optional<std::string> { return std::nullopt; };
  OpeningLine o;
  REQUIRE_FALSE(parse_opening_line("position startpos moves 7g7f 3c3d", none, false, o));
  CHECK(o.sfen == "startpos");
  CHECK(o.moves.size() == 2);
  CHECK(o.text() == "startpos moves 7g7f 3c3d");
  // A bare SFEN with move number 40: kept as written, or renumbered 1 and written in full.
  const std::string sfen = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 40";
  REQUIRE_FALSE(parse_opening_line(sfen, none, false, o));
  CHECK(o.sfen == sfen);
  REQUIRE_FALSE(parse_opening_line("sfen " + sfen + " moves 2g2f", none, true, o));
  CHECK(o.sfen == std::string(Position::STARTPOS_SFEN));
  CHECK(o.text() == "sfen " + std::string(Position::STARTPOS_SFEN) + " moves 2g2f");
  // Problems, each named; the check is asked at the start and after every move.
  CHECK(*parse_opening_line("", none, false, o) == "no position");
  CHECK(parse_opening_line("sfen xyz", none, false, o)->rfind("bad SFEN", 0) == 0);
  CHECK(*parse_opening_line("startpos moves 7g7f 7g7f", none, false, o) ==
        "illegal move 7g7f in lnsgkgsnl/1r5b1/ppppppppp/9/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL w - 2");
  int asked = 0;
  const OpeningCheck third = [&](const Position&) -> std::optional<std::string> {
    if (++asked == 3) return "stop here";
    return std::nullopt;
  };
  CHECK(*parse_opening_line("startpos moves 7g7f 3c3d 2g2f", third, false, o) == "stop here after 3c3d");
}
