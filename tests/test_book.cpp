// Opening books: YaneuraOu's text format read and written back, lookups (move numbers, flipped,
// on the fly against in memory), the book move choice under each engine option, books built from
// hand-made games, and gpsshogi's joseki.dat import.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "book/build.h"
#include "book/gpsshogi.h"
#include "book/policy.h"
#include "shogi/csa.h"
#include "shogi/movegen.h"
#include "temp_dir.h"

using namespace jiriki;
using namespace jiriki::book;
using Catch::Contains;

namespace {

// Written by hand from the format's description: two positions sorted by the text after "sfen "
// ("2P6" sorts before "9/"), each position's moves by count, then value, descending.
const std::string HAND_BOOK =
    "#YANEURAOU-DB2016 1.00\n"
    "sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL w - 2\n"
    "8c8d 2g2f 10 20 3\n"
    "3c3d none -5 18 2\n"
    "sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1\n"
    "7g7f 3c3d 50 32 10\n"
    "2g2f 8c8d 40 32 5\n"
    "5g5f none -100 12 1\n";

Move usi(const Position& pos, const std::string& text) {
  Move m = move_from_usi(pos, text);
  REQUIRE(m != MOVE_NONE);
  return m;
}

Position after(const std::string& moves, const std::string& sfen = "startpos") {
  Position pos;
  REQUIRE(!pos.set_sfen(sfen));
  std::istringstream in(moves);
  for (std::string w; in >> w;) {
    Move m = usi(pos, w);
    REQUIRE(pos.is_legal(m));
    pos.do_move(m);
  }
  return pos;
}

std::set<std::string> texts(const std::vector<BookMove>& moves) {
  std::set<std::string> s;
  for (const BookMove& m : moves) s.insert(move_to_usi(m.move));
  return s;
}

// How often each move is chosen in `n` draws from one seeded generator ("-" when the book is not used).
std::map<std::string, int> draws(const BookSource& b, const Position& pos, const BookOptions& opt, int n) {
  SplitMix64 rng{42};
  std::map<std::string, int> seen;
  for (int i = 0; i < n; ++i) {
    auto c = choose_book_move(b, pos, opt, rng);
    ++seen[c ? move_to_usi(c->move) : "-"];
  }
  return seen;
}

}  // namespace

TEST_CASE("book: a hand-written book reads as written and writes back byte for byte", "[book]") {
  Book b = Book::parse(HAND_BOOK, "hand.db");
  REQUIRE(b.size() == 2);
  const BookPosition& start = b.positions()[1];
  CHECK(start.key == "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b -");
  CHECK(start.ply == 1);
  REQUIRE(start.moves.size() == 3);
  Position pos;
  CHECK(start.moves[0] == BookMove{usi(pos, "7g7f"), usi(pos, "3c3d"), 50, 32, 10});
  CHECK(start.moves[2] == BookMove{usi(pos, "5g5f"), MOVE_NONE, -100, 12, 1});
  CHECK(b.text() == HAND_BOOK);

  // Value, depth and count may be left out: 0, 0 and 1; lines are written out in full.
  Book sparse = Book::parse("#YANEURAOU-DB2016 1.00\n// a comment\nsfen " + std::string(Position::STARTPOS_SFEN) +
                            "\n7g7f none\n\n2g2f 8c8d 12\n");
  REQUIRE(sparse.size() == 1);
  CHECK(sparse.positions()[0].moves[0] == BookMove{usi(pos, "7g7f"), MOVE_NONE, 0, 0, 1});
  CHECK(sparse.positions()[0].moves[1] == BookMove{usi(pos, "2g2f"), usi(pos, "8c8d"), 12, 0, 1});
  CHECK(sparse.text() == "#YANEURAOU-DB2016 1.00\nsfen " + std::string(Position::STARTPOS_SFEN) +
                             "\n2g2f 8c8d 12 0 1\n7g7f none 0 0 1\n");

  // Saved and loaded again through a file.
  testing::TempDir dir("book_roundtrip");
  b.save(dir.file("b.db"));
  CHECK(Book::load(dir.file("b.db")).text() == HAND_BOOK);
}

TEST_CASE("book: lookup by move number, or whatever the move number with IgnoreBookPly", "[book]") {
  Book b = Book::parse(HAND_BOOK);
  LookupOptions exact{false, false}, any_ply{true, false};
  CHECK(texts(probe(b, Position(), exact)) == std::set<std::string>{"7g7f", "2g2f", "5g5f"});
  CHECK(texts(probe(b, after("7g7f"), exact)) == std::set<std::string>{"8c8d", "3c3d"});
  // The start position's board at move 3 (as after 2h2g 8b8a 2g2h... reached by a transposition).
  Position later;
  REQUIRE(!later.set_sfen("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 3"));
  CHECK(probe(b, later, exact).empty());
  CHECK(texts(probe(b, later, any_ply)) == std::set<std::string>{"7g7f", "2g2f", "5g5f"});
  // A position given at two move numbers: the exact one matches, IgnoreBookPly takes the smaller.
  Book twice = Book::parse(
      "#YANEURAOU-DB2016 1.00\nsfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1\n"
      "7g7f none 0 0 1\nsfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 3\n"
      "2g2f none 0 0 1\n");
  CHECK(texts(probe(twice, later, exact)) == std::set<std::string>{"2g2f"});
  CHECK(texts(probe(twice, later, any_ply)) == std::set<std::string>{"7g7f"});
  // A position not in the book.
  CHECK(probe(b, after("7g7f 3c3d"), any_ply).empty());
  // A position written without a move number matches at any.
  Book plyless = Book::parse(
      "#YANEURAOU-DB2016 1.00\nsfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b -\n"
      "7g7f none 0 0 1\n");
  CHECK(texts(probe(plyless, later, exact)) == std::set<std::string>{"7g7f"});
}

TEST_CASE("book: merging books keeps every move and adds the counts of a move in both", "[book]") {
  Book merged = Book::parse(HAND_BOOK);
  const Book other = Book::parse("#YANEURAOU-DB2016 1.00\nsfen " + std::string(Position::STARTPOS_SFEN) +
                                 "\n2g2f none 0 0 7\n1g1f none 0 0 2\n");
  for (const BookPosition& p : other.positions()) merged.add(p);
  REQUIRE(merged.size() == 2);
  std::map<std::string, uint64_t> counts;
  for (const BookMove& m : probe(merged, Position(), {})) counts[move_to_usi(m.move)] = m.count;
  CHECK(counts == std::map<std::string, uint64_t>{{"7g7f", 10}, {"2g2f", 12}, {"5g5f", 1}, {"1g1f", 2}});
}

TEST_CASE("book: flipped lookup finds a White-to-move position as its rotated counterpart", "[book]") {
  // Independent figures: ShogiHome's flippedSFEN test pair, and the first moves by hand.
  CHECK(flip_key("l8/2+P3s1R/b3g1kp1/p2p2psp/2nPSp3/PPP2LP1P/K3P4/2GSG4/LN4+b1L w G2Pr2n2p") ==
        "l1+B4nl/4gsg2/4p3k/p1pl2ppp/3PspN2/PSP2P2P/1PK1G3B/r1S3+p2/8L b R2N2Pg2p");
  CHECK(flip_key("l1+B4nl/4gsg2/4p3k/p1pl2ppp/3PspN2/PSP2P2P/1PK1G3B/r1S3+p2/8L b R2N2Pg2p") ==
        "l8/2+P3s1R/b3g1kp1/p2p2psp/2nPSp3/PPP2LP1P/K3P4/2GSG4/LN4+b1L w G2Pr2n2p");
  CHECK(flip_key(after("7g7f").sfen(false)) == "lnsgkgsnl/1r5b1/pppppp1pp/6p2/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b -");
  Position pos;
  CHECK(flip_move(usi(pos, "7g7f")) == usi(pos, "3c3d"));
  CHECK(flip_move(usi(pos, "8h2b+")) == usi(pos, "2b8h+"));
  CHECK(flip_move(usi(pos, "P*5e")) == usi(pos, "P*5e"));
  CHECK(flip_move(usi(pos, "S*1a")) == usi(pos, "S*9i"));

  // The book holds a Black-to-move position; its rotation with White to move is found through it,
  // with the moves and replies rotated back.
  const std::string black_key = "lnsgkgsnl/1r5b1/pppppp1pp/6p2/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL b -";
  Book b = Book::parse("#YANEURAOU-DB2016 1.00\nsfen " + black_key + " 3\n2g2f 8c8d 30 10 4\n6g6f none 10 10 1\n");
  Position white;
  REQUIRE(!white.set_sfen(flip_key(black_key) + " 3"));
  REQUIRE(white.side_to_move() == WHITE);
  CHECK(probe(b, white, LookupOptions{false, false}).empty());
  std::vector<BookMove> found = probe(b, white, LookupOptions{false, true});
  CHECK(texts(found) == std::set<std::string>{"8c8d", "4c4d"});
  for (const BookMove& m : found) CHECK(white.is_legal(m.move));
  CHECK(found[0].ponder == usi(pos, "2g2f"));  // 2g2f's reply 8c8d, rotated
  // Black to move is never looked up flipped: the rotation of the hand book's White position is not found.
  Book hand = Book::parse(HAND_BOOK);
  Position black;
  REQUIRE(!black.set_sfen(flip_key(after("7g7f").sfen(false)) + " 2"));
  CHECK(probe(hand, black, LookupOptions{true, true}).empty());
}

TEST_CASE("book: each engine option changes the move chosen as YaneuraOu's book options do", "[book]") {
  Book b = Book::parse(HAND_BOOK);
  const Position start;
  const int N = 3000;
  BookOptions opt;  // YaneuraOu's defaults: BookEvalDiff 30, BookEvalBlackLimit 0, BookEvalWhiteLimit -140

  // Defaults: 5g5f (-100) is more than 30 below the best (50); the other two are drawn uniformly.
  auto d = draws(b, start, opt, N);
  CHECK(d.size() == 2);
  CHECK(d["7g7f"] > N * 45 / 100);
  CHECK(d["2g2f"] > N * 45 / 100);

  SECTION("ConsiderBookMoveCount draws in proportion to the counts (10 : 5)") {
    opt.consider_count = true;
    d = draws(b, start, opt, N);
    CHECK(d["7g7f"] > N * 62 / 100);
    CHECK(d["7g7f"] < N * 72 / 100);
    CHECK(d["2g2f"] + d["7g7f"] == N);
  }
  SECTION("BookEvalDiff 0 keeps only the best; a wide one keeps all") {
    opt.eval_diff = 0;
    CHECK(draws(b, start, opt, N) == std::map<std::string, int>{{"7g7f", N}});
    opt.eval_diff = 1000;
    opt.eval_black_limit = -1000;
    CHECK(draws(b, start, opt, N).size() == 3);
  }
  SECTION("BookEvalBlackLimit applies with Black to move, BookEvalWhiteLimit with White") {
    opt.eval_black_limit = 45;
    CHECK(draws(b, start, opt, N) == std::map<std::string, int>{{"7g7f", N}});
    opt.eval_black_limit = 60;
    CHECK(draws(b, start, opt, N) == std::map<std::string, int>{{"-", N}});
    const Position white = after("7g7f");        // 8c8d 10, 3c3d -5
    CHECK(draws(b, white, opt, N).size() == 2);  // the Black limit does not apply; White's -140 keeps both
    opt.eval_white_limit = 0;
    CHECK(draws(b, white, opt, N) == std::map<std::string, int>{{"8c8d", N}});
  }
  SECTION("BookDepthLimit looks at the first move's depth") {
    opt.depth_limit = 32;
    CHECK(draws(b, start, opt, N).count("-") == 0);
    opt.depth_limit = 33;
    CHECK(draws(b, start, opt, N) == std::map<std::string, int>{{"-", N}});
  }
  SECTION("BookMoves: the book is used up to that move number") {
    opt.book_moves = 1;
    CHECK(draws(b, start, opt, N).count("-") == 0);
    CHECK(draws(b, after("7g7f"), opt, N) == std::map<std::string, int>{{"-", N}});
    opt.book_moves = 0;
    CHECK(draws(b, start, opt, N) == std::map<std::string, int>{{"-", N}});
  }
  SECTION("BookIgnoreRate skips the book that often") {
    opt.ignore_rate = 100;
    CHECK(draws(b, start, opt, N) == std::map<std::string, int>{{"-", N}});
    opt.ignore_rate = 30;
    d = draws(b, start, opt, N);
    CHECK(d["-"] > N * 25 / 100);
    CHECK(d["-"] < N * 35 / 100);
  }
  SECTION("USI_OwnBook false never uses the book") {
    opt.own_book = false;
    CHECK(draws(b, start, opt, N) == std::map<std::string, int>{{"-", N}});
  }
  SECTION("IgnoreBookPly and FlippedBook reach the lookup") {
    Position later;
    REQUIRE(!later.set_sfen("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 3"));
    CHECK(draws(b, later, opt, N) == std::map<std::string, int>{{"-", N}});
    opt.lookup.ignore_ply = true;
    CHECK(draws(b, later, opt, N).count("-") == 0);
    Position white;  // the start position's board with White to move: its rotation is the start position
    REQUIRE(!white.set_sfen("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"));
    d = draws(b, white, opt, N);  // 7g7f and 2g2f rotated; 5g5f's rotation is too far below
    CHECK(d.size() == 2);
    CHECK(d["3c3d"] > N * 45 / 100);
    CHECK(d["8c8d"] > N * 45 / 100);
    opt.lookup.flipped = false;
    CHECK(draws(b, white, opt, N) == std::map<std::string, int>{{"-", N}});
  }
  SECTION("the choice carries the reply and says it came from the book") {
    opt.eval_diff = 0;
    SplitMix64 rng{1};
    auto c = choose_book_move(b, start, opt, rng);
    REQUIRE(c);
    CHECK(c->move == usi(start, "7g7f"));
    CHECK(c->ponder == usi(start, "3c3d"));
    REQUIRE(c->info.size() == 2);
    CHECK(c->info[0] == "info depth 32 score cp 50 nodes 0 pv 7g7f 3c3d");
    CHECK_THAT(c->info[1], Contains("book move 7g7f"));
    // 8c8d's reply is its line's 2g2f; 3c3d has none, and the book has no position after it to take
    // a first move from.
    const Position white = after("7g7f");
    opt.eval_white_limit = -140;
    opt.eval_diff = 1000;
    SplitMix64 r2{3};
    for (int i = 0; i < 50; ++i) {
      auto w = choose_book_move(b, white, opt, r2);
      REQUIRE(w);
      CHECK(w->ponder == (w->move == usi(white, "8c8d") ? usi(white, "2g2f") : MOVE_NONE));
    }
  }
  SECTION("the same seed gives the same choices") { CHECK(draws(b, start, opt, 200) == draws(b, start, opt, 200)); }
}

TEST_CASE("book: malformed books are refused with the line and the reason", "[book]") {
  const std::string H = "#YANEURAOU-DB2016 1.00\n";
  const std::string S = "sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1\n";
  auto refused = [](const std::string& text, const std::string& what) {
    INFO(text);
    CHECK_THROWS_WITH(Book::parse(text, "bad.db"), Contains(what));
  };
  refused(S + "7g7f none 0 0 1\n", "bad.db:1: not a YaneuraOu book");
  refused("", "empty file");
  refused(H + "7g7f none 0 0 1\n", "bad.db:2: a move line before any 'sfen' line");
  refused(H + "sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1 b - 1\n", "bad.db:2: bad SFEN");
  refused(H + "sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - x\n",
          "bad.db:2: bad move number 'x'");
  refused(H + S + "7g7f none 0 0 1\n7g7e none 0 0 1\n", "bad.db:4: illegal move 7g7e");
  refused(H + S + "7z7f none 0 0 1\n", "bad.db:3: malformed move '7z7f'");
  refused(H + S + "7g7f 3c3x 0 0 1\n", "bad.db:3: malformed reply '3c3x'");
  refused(H + S + "7g7f\n", "bad.db:3: expected 'MOVE PONDER");
  refused(H + S + "7g7f none ten 0 1\n", "bad.db:3: VALUE, DEPTH and COUNT must be integers");
  refused(H + S + "7g7f none 0 0 -1\n", "bad.db:3: VALUE, DEPTH and COUNT must be integers");
  refused(H + S + "7g7f none 0 0 1\n7g7f none 5 0 1\n", "bad.db:4: move 7g7f given twice");
  refused(H + S + "7g7f none 0 0 1\n" + S + "2g2f none 0 0 1\n", "bad.db:4: position given twice (first at line 2)");
  CHECK_THROWS_WITH(Book::load("/nonexistent/book.db"), Contains("cannot open book /nonexistent/book.db"));
  CHECK_THROWS_WITH(BookFile("/nonexistent/book.db"), Contains("cannot open book"));
  testing::TempDir dir("book_bad");
  std::ofstream(dir.file("x.db")) << S;
  CHECK_THROWS_WITH(BookFile(dir.file("x.db")), Contains("x.db:1: not a YaneuraOu book"));
}

TEST_CASE("book: a book built from hand-made games has the counts and values worked out by hand", "[book]") {
  // Three games; the book takes their first two plies.
  //   7g7f 3c3d 2g2f  Black wins       7g7f 8c8d  White wins       2g2f 8c8d  Black wins
  BookBuilder builder(BuildOptions{1, 2});
  const Position start;
  auto game = [&](const std::string& moves, std::optional<GameResult> r, std::vector<std::optional<int>> scores = {}) {
    std::vector<Move> ms;
    Position pos;
    std::istringstream in(moves);
    for (std::string w; in >> w;) {
      ms.push_back(usi(pos, w));
      pos.do_move(ms.back());
    }
    builder.add_game(start, ms, scores, r);
  };
  game("7g7f 3c3d 2g2f", BLACK_WIN);
  game("7g7f 8c8d", WHITE_WIN);
  game("2g2f 8c8d", BLACK_WIN);
  Book b = builder.build();
  REQUIRE(b.size() == 3);  // the start, after 7g7f, after 2g2f; 2g2f as the third ply is beyond P = 2
  auto moves_at = [&](const Position& pos) {
    std::map<std::string, std::pair<uint64_t, int>> m;  // move -> count, value
    for (const BookMove& bm : probe(b, pos, LookupOptions{false, false}))
      m[move_to_usi(bm.move)] = {bm.count, bm.value};
    return m;
  };
  // Values from win rates with one win and one loss added: 1 of 2 -> 2/4 -> 0 cp;
  // 1 of 1 -> 2/3 -> 756 ln 2 = 524 cp; 0 of 1 -> 1/3 -> -524 cp.
  CHECK(moves_at(start) == std::map<std::string, std::pair<uint64_t, int>>{{"7g7f", {2, 0}}, {"2g2f", {1, 524}}});
  CHECK(moves_at(after("7g7f")) ==
        std::map<std::string, std::pair<uint64_t, int>>{{"3c3d", {1, -524}}, {"8c8d", {1, 524}}});
  CHECK(moves_at(after("2g2f")) == std::map<std::string, std::pair<uint64_t, int>>{{"8c8d", {1, -524}}});
  CHECK(b.positions()[0].ply + b.positions()[1].ply + b.positions()[2].ply == 1 + 2 + 2);

  // K = 2 keeps only the start position (3 moves played from it); engine scores give the values.
  BookBuilder scored(BuildOptions{2, 2});
  std::vector<Move> line{usi(start, "7g7f")};
  scored.add_game(start, line, {100}, DRAW);
  scored.add_game(start, line, {51}, DRAW);
  scored.add_game(start, {usi(start, "2g2f")}, {std::nullopt}, WHITE_WIN);
  Book s = scored.build();
  REQUIRE(s.size() == 1);
  std::map<std::string, std::pair<uint64_t, int>> got;
  for (const BookMove& bm : s.positions()[0].moves) got[move_to_usi(bm.move)] = {bm.count, bm.value};
  CHECK(got == std::map<std::string, std::pair<uint64_t, int>>{{"7g7f", {2, 76}}, {"2g2f", {1, -524}}});
}

TEST_CASE("book: on-the-fly lookup in the sorted file equals lookup in memory", "[book]") {
  // A book of random games' positions, plus one position at two move numbers, the file's first and
  // last keys included in the comparison.
  SplitMix64 rng{7};
  Book b;
  std::vector<Position> probes;
  for (int g = 0; g < 60; ++g) {
    Position pos;
    for (int ply = 0; ply < 30; ++ply) {
      MoveList ms = legal_moves(pos);
      if (ms.size() == 0) break;
      const Move m = ms.moves[random_below(rng, ms.size())];
      b.add({pos.sfen(false),
             pos.game_ply(),
             {BookMove{m, MOVE_NONE, int(random_below(rng, 200)) - 100, 8, 1 + random_below(rng, 9)}}});
      probes.push_back(pos);
      pos.do_move(m);
    }
    probes.push_back(pos);  // the game's last position: not in the book
  }
  Position start;
  b.add({start.sfen(false), 9, {BookMove{usi(start, "2g2f"), MOVE_NONE, 0, 0, 1}}});
  testing::TempDir dir("book_fly");
  b.save(dir.file("r.db"));
  const Book mem = Book::load(dir.file("r.db"));
  const BookFile file(dir.file("r.db"));
  REQUIRE(mem.size() > 1500);
  for (const BookPosition& p : mem.positions()) {
    INFO(p.key);
    CHECK(file.find(p.key) == mem.find(p.key));
  }
  CHECK(file.find(start.sfen(false)).size() == 2);
  int hits = 0;
  for (const Position& pos : probes)
    for (bool ignore : {false, true})
      for (bool flip : {false, true}) {
        LookupOptions lo{ignore, flip};
        auto m = probe(mem, pos, lo);
        hits += !m.empty();
        CHECK(probe(file, pos, lo) == m);
      }
  CHECK(hits > 1000);
  // Keys before the first and after the last of the file, and between two of them.
  CHECK(file.find("").empty());
  CHECK(file.find("~").empty());
  CHECK(file.find(mem.positions()[10].key + "x").empty());
}

TEST_CASE("book: walking the book gives openings drawn by counts", "[book]") {
  Book b = Book::parse(HAND_BOOK);
  SplitMix64 rng{5};
  std::map<std::string, int> seen;
  for (int i = 0; i < 1500; ++i) seen[book_opening(b, 4, rng, LookupOptions{false, false})]++;
  // 7g7f (10 of 16) is followed by 8c8d (3 of 5) or 3c3d; the book ends there.
  CHECK(seen.size() == 4);
  CHECK(seen["startpos moves 7g7f 8c8d"] > 1500 * 10 / 16 * 3 / 5 * 85 / 100);
  CHECK(seen["startpos moves 7g7f 3c3d"] > 0);
  CHECK(seen["startpos moves 2g2f"] > 0);
  CHECK(seen["startpos moves 5g5f"] > 0);
  Book empty;
  CHECK(book_opening(empty, 4, rng) == "startpos");
}

TEST_CASE("book: gpsshogi's weighted book is imported", "[book]") {
  // A hand-made file in OSL's layout: the start state with 7g7f (weight 3) and 1g1f (weight 0),
  // each leading to a state without moves; boards are not read. 7g7f packed as gpsshogi's own
  // joseki.dat stores it: 0x0a007677 (pawn, to 7f, from 7g).
  auto be = [](std::string& s, uint32_t v) {
    for (int i = 3; i >= 0; --i) s += char((v >> (8 * i)) & 0xff);
  };
  std::string f;
  for (uint32_t v : {1u, 3u, 2u, 0u}) be(f, v);
  for (uint32_t v : {0u, 2u, 0u, 0u, 2u, 0u, 0u, 0u, 2u, 0u, 0u, 0u}) be(f, v);
  for (uint32_t v : {0x0a007677u, 1u, 3u, 0x0a001617u, 2u, 0u}) be(f, v);
  f += std::string(164 * 3, '\0');
  testing::TempDir dir("book_gps");
  std::ofstream(dir.file("j.dat"), std::ios::binary) << f;
  GpsImportStats st;
  Book b = import_gpsshogi(dir.file("j.dat"), &st);
  CHECK(st.states == 3);
  CHECK(st.reached == 3);
  CHECK(st.zero_weight == 1);
  REQUIRE(b.size() == 1);
  const Position start;
  CHECK(b.positions()[0].moves == std::vector<BookMove>{BookMove{usi(start, "7g7f"), MOVE_NONE, 0, 0, 3}});
  std::ofstream(dir.file("short.dat"), std::ios::binary) << f.substr(0, f.size() - 1);
  CHECK_THROWS_WITH(import_gpsshogi(dir.file("short.dat")), Contains("the file has"));

  // The real book from the Debian package gpsshogi-data (scripts/install-deps.sh installs it).
  const std::string real = "/usr/share/gpsshogi-data/data/joseki.dat";
  REQUIRE(std::filesystem::exists(real));
  Book g = import_gpsshogi(real, &st);
  CHECK(st.states == 58818);  // the header's counts
  CHECK(st.moves == 73498);
  std::vector<BookMove> top = probe(g, start, LookupOptions{false, false});
  sort_moves(top);
  REQUIRE(top.size() >= 2);
  CHECK(move_to_usi(top[0].move) == "7g7f");
  CHECK(move_to_usi(top[1].move) == "2g2f");
  CHECK(texts(probe(g, after("7g7f"), LookupOptions{false, false})).count("3c3d") == 1);
}

TEST_CASE("book: jiriki book build reads CSA records and counts their moves", "[book]") {
  // Two hand-made games as CSA files: 7g7f 3c3d (White to move resigns: Black wins) and
  // 7g7f 8c8d 2g2f (White to move resigns: Black wins).
  testing::TempDir dir("book_build_cli");
  std::filesystem::create_directories(dir.path / "games");
  int n = 0;
  for (const std::string& line : {std::string("7g7f 3c3d 2g2f"), std::string("7g7f 8c8d 2g2f")}) {
    GameRecord rec;
    Position pos;
    std::istringstream in(line);
    for (std::string w; in >> w;) {
      rec.add_move(usi(pos, w));
      pos.do_move(rec.moves.back());
    }
    rec.end = GameEnd::RESIGN;
    std::ofstream(dir.path / "games" / ("g" + std::to_string(++n) + ".csa")) << write_csa(rec);
  }
  const std::string cmd = std::string(JIRIKI_BINARY) + " book build --plies 2 -o " + dir.file("b.db") + " " +
                          (dir.path / "games").string() + " > /dev/null 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  Book b = Book::load(dir.file("b.db"));
  REQUIRE(b.size() == 2);
  const Position start;
  std::vector<BookMove> at_start = probe(b, start, {});
  REQUIRE(at_start.size() == 1);
  CHECK(at_start[0].count == 2);
  CHECK(at_start[0].value == winrate_value(2, 2));  // (2 + 1) / (2 + 2) = 3/4: 756 ln 3 = 831
  CHECK(at_start[0].value == 831);
  CHECK(texts(probe(b, after("7g7f"), {})) == std::set<std::string>{"3c3d", "8c8d"});

  // Every input unreadable: an error and no book (it exited 0 with an empty one).
  std::ofstream(dir.path / "bad.csa") << "this is not CSA\n";
  const std::string bad = std::string(JIRIKI_BINARY) + " book build -o " + dir.file("empty.db") + " " +
                          dir.file("bad.csa") + " > /dev/null 2>&1";
  CHECK(std::system(bad.c_str()) != 0);
  CHECK_FALSE(std::filesystem::exists(dir.file("empty.db")));
}
