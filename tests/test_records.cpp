// Record formats: hcp/hcpe against hand-worked and published bytes, CSA and KIF reading of small
// hand-made games (checked against the same games given as USI moves), round trips, KIF<->CSA
// equivalence, Shift_JIS input, and the rejection of every kind of malformed input.
#include <iconv.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <random>

#include "shogi/csa.h"
#include "shogi/hcpe.h"
#include "shogi/kif.h"
#include "shogi/movegen.h"

using namespace jiriki;
using Catch::Contains;

namespace {

// The SFEN of `sfen` as Position writes it (so expectations need not guess its spacing).
std::string normal_sfen(const std::string& sfen) {
  Position p;
  auto err = p.set_sfen(sfen);
  REQUIRE_FALSE(err);
  return p.sfen();
}

std::vector<Move> usi_moves(const Position& start, std::vector<std::string> usi) {
  Position pos = start;
  std::vector<Move> moves;
  for (const auto& u : usi) {
    Move m = move_from_usi(pos, u);
    REQUIRE(pos.is_legal(m));
    moves.push_back(m);
    pos.do_move(m);
  }
  return moves;
}

void check_same(const GameRecord& a, const GameRecord& b) {
  CHECK(a.start.sfen(false) == b.start.sfen(false));  // records do not keep the move number
  CHECK(a.moves == b.moves);
  CHECK(a.end == b.end);
  CHECK(a.black == b.black);
  CHECK(a.white == b.white);
}

// UTF-8 -> CP932 with iconv directly, independent of the code under test.
std::string to_sjis(const std::string& utf8) {
  iconv_t cd = iconv_open("CP932", "UTF-8");
  REQUIRE(cd != (iconv_t)-1);
  std::string out(utf8.size() * 2 + 16, '\0');
  char* src = const_cast<char*>(utf8.data());
  char* dst = out.data();
  size_t in_left = utf8.size(), out_left = out.size();
  REQUIRE(iconv(cd, &src, &in_left, &dst, &out_left) != (size_t)-1);
  iconv_close(cd);
  out.resize(out.size() - out_left);
  return out;
}

HuffmanCodedPos hcp_from_hex(const std::string& hex) {
  REQUIRE(hex.size() == 64);
  HuffmanCodedPos h;
  for (int i = 0; i < 32; ++i) h.data[i] = uint8_t(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return h;
}

GameRecord random_game(std::mt19937& rng, int max_plies) {
  GameRecord rec;
  Position pos = rec.start;
  for (int ply = 0; ply < max_plies; ++ply) {
    MoveList legal = legal_moves(pos);
    if (legal.size() == 0) break;
    Move m = legal.moves[rng() % legal.size()];
    rec.add_move(m, int(rng() % 700));
    pos.do_move(m);
  }
  return rec;
}

// A short real opening in which Black wins a bishop tempo: 7g7f 3c3d 8h2b+ 3a2b B*4e, then White
// resigns. After it (worked out by hand): lnsgkg1nl/1r5s1/pppppp1pp/6p2/5B3/2P6/PP1PPPPPP/7R1/LNSGKGSNL w b 6.
const std::vector<std::string> OPENING_USI = {"7g7f", "3c3d", "8h2b+", "3a2b", "B*4e"};
const char* OPENING_AFTER = "lnsgkg1nl/1r5s1/pppppp1pp/6p2/5B3/2P6/PP1PPPPPP/7R1/LNSGKGSNL w b 6";

// The opening as CSA: the position given as P1-P9 rows, comments, commas, an ignored $ line.
const char* OPENING_CSA =
    "'a comment line\n"
    "V2.2\n"
    "N+Sente\n"
    "N-Gote\n"
    "$EVENT:jiriki test\n"
    "$START_TIME:2024/05/01 10:00:00\n"
    "$TIME_LIMIT:00:10+10\n"
    "P1-KY-KE-GI-KI-OU-KI-GI-KE-KY\n"
    "P2 * -HI *  *  *  *  * -KA * \n"
    "P3-FU-FU-FU-FU-FU-FU-FU-FU-FU\n"
    "P4 *  *  *  *  *  *  *  *  * \n"
    "P5 *  *  *  *  *  *  *  *  * \n"
    "P6 *  *  *  *  *  *  *  *  * \n"
    "P7+FU+FU+FU+FU+FU+FU+FU+FU+FU\n"
    "P8 * +KA *  *  *  *  * +HI * \n"
    "P9+KY+KE+GI+KI+OU+KI+GI+KE+KY\n"
    "+\n"
    "+7776FU,T1\n"
    "-3334FU\r\n"
    "T2\n"
    "'** 50 3a2b\n"
    "+8822UM,T3,-3122GI,T4\n"
    "+0045KA\n"
    "T5\n"
    "%TORYO\n";

// The same game as KIF (Kifu for Windows layout).
const char* OPENING_KIF =
    "# ---- Kifu for Windows V7 V7.70 棋譜ファイル ----\n"
    "開始日時：2024/05/01 10:00:00\n"
    "棋戦：jiriki test\n"
    "手合割：平手　\n"
    "先手：Sente\n"
    "後手：Gote\n"
    "手数----指手---------消費時間--\n"
    "   1 ７六歩(77)   ( 0:01/00:00:01)\n"
    "   2 ３四歩(33)   ( 0:02/00:00:02)\n"
    "*a comment\n"
    "   3 ２二角成(88) ( 0:03/00:00:04)\n"
    "   4 同　銀(31)   ( 0:04/00:00:06)\n"
    "   5 ４五角打     ( 0:05/00:00:09)\n"
    "   6 投了         ( 0:06/00:00:12)\n"
    "まで5手で先手の勝ち\n";

}  // namespace

// ---- hcp / hcpe ---------------------------------------------------------------------------------

TEST_CASE("hcp of the start position matches bytes worked out by hand", "[records][hcpe]") {
  // Stream (first bit first) from the published table, kings 5i = square 44, 5a = square 36:
  //   side 0 | Black king 44 = 0011010 | White king 36 = 0010010            (15 bits)
  //   file 1: 1a wL 110010, 1b 0, 1c wP 1010, 1d-1f 000, 1g bP 1000, 1h 0, 1i bL 110000   (25)
  //   file 2: 2a wN 111010, 2b wB 11111010, 2c wP 1010, 000, 2g bP 1000,
  //           2h bR 11111100, 2i bN 111000                                            (39)
  //   file 3: wS 110110, 0, 1010, 000, 1000, 0, bS 110100                             (25)
  //   file 4: wG 111101, 0, 1010, 000, 1000, 0, bG 111100                             (25)
  //   file 5: (5a king) 0, 1010, 000, 1000, 0 (5i king)                               (13)
  //   files 6, 7 as 4, 3; file 8: wN 111010, wR 11111110, 1010, 000, 1000,
  //           bB 11111000, bN 111000 (39); file 9 as 1.   15+25+39+25+25+13+25+25+39+25 = 256.
  // Cut into bytes, each byte's first bit being its least significant:
  //   00011010 00100101 10010010 10000100 00110000 11101011 11101010 10000100
  //   = 0x58 0xa4 0x49 0x21 0x0c 0xd7 0x57 0x21, and so on for the other 24 bytes.
  const std::array<uint8_t, 32> expected = {0x58, 0xa4, 0x49, 0x21, 0x0c, 0xd7, 0x57, 0x21, 0x7e, 0x8e, 0x4d,
                                            0x21, 0x2c, 0xaf, 0x42, 0x78, 0x14, 0xc2, 0xab, 0x10, 0x9e, 0x4d,
                                            0x21, 0x2c, 0xd7, 0x5f, 0x21, 0x3e, 0x8e, 0x49, 0x21, 0x0c};
  Position start;
  CHECK(encode_hcp(start).data == expected);
  Position decoded;  // starts as another position, so decoding must overwrite it
  REQUIRE_FALSE(decoded.set_sfen("9/9/9/9/4k4/9/9/9/4K4 b - 1"));
  REQUIRE_FALSE(decode_hcp(HuffmanCodedPos{expected}, decoded));
  CHECK(decoded.sfen() == start.sfen());
}

TEST_CASE("hcp matches cshogi's bytes for positions with hands and promoted pieces", "[records][hcpe]") {
  // Test vectors published in a Rust shogi project, stated there to be cshogi Board.to_hcp output.
  const std::pair<const char*, const char*> cases[] = {
      {"ln5nl/2rs1kgs1/3ppg1p1/2p3p1p/p4p3/1PPPP2PP/P2SKSNR1/1B7/LN3G2L w B2Pgp 1",
       "559c89120cd756c40f5ec58157593c1481ad88057f4ae082f0714c2861003ebc"},
      {"1+L3+R1+Np/2g1+Ln2s/5s3/l2p2pP1/1gp4N1/P1PPb1G2/b+s1Sp2G1/L8/K3k4 w N6Pr3p 1",
       "a1acda002771784079f07b6d80115f052516bc5460c46b0793f81a00001824ff"},
  };
  for (auto [sfen, hex] : cases) {
    Position pos;
    REQUIRE_FALSE(pos.set_sfen(sfen));
    CHECK(encode_hcp(pos) == hcp_from_hex(hex));
    Position decoded;
    REQUIRE_FALSE(decode_hcp(hcp_from_hex(hex), decoded));
    CHECK(decoded.sfen() == pos.sfen());
  }
}

TEST_CASE("hcp round trip over the positions of random games", "[records][hcpe]") {
  std::mt19937 rng(20240501);
  int positions = 0, with_hands = 0, with_promoted = 0;
  for (int game = 0; game < 300; ++game) {
    Position pos;
    for (int ply = 0; ply < 160; ++ply) {
      HuffmanCodedPos hcp = encode_hcp(pos);
      Position decoded;
      auto err = decode_hcp(hcp, decoded);
      REQUIRE_FALSE(err);
      REQUIRE(decoded.sfen(false) == pos.sfen(false));
      REQUIRE(decoded.key() == pos.key());
      REQUIRE(encode_hcp(decoded) == hcp);
      ++positions;
      with_hands += !pos.hand(BLACK).empty() || !pos.hand(WHITE).empty();
      with_promoted += bool(pos.pieces(PRO_PAWN) | pos.pieces(HORSE) | pos.pieces(DRAGON) | pos.pieces(PRO_SILVER));
      MoveList legal = legal_moves(pos);
      if (legal.size() == 0) break;
      pos.do_move(legal.moves[rng() % legal.size()]);
    }
  }
  CHECK(positions > 20000);
  CHECK(with_hands > positions / 2);  // the test reaches hand and promotion codes
  CHECK(with_promoted > positions / 10);
}

TEST_CASE("hcpe files: layout, round trip, truncation", "[records][hcpe]") {
  Position pos;
  std::vector<HcpeRecord> recs(3);
  for (int i = 0; i < 3; ++i) {
    recs[i].hcp = encode_hcp(pos);
    recs[i].eval = int16_t(-100 * i - 7);
    recs[i].move16 = legal_moves(pos).moves[0];
    recs[i].result = uint8_t(i);
    pos.do_move(legal_moves(pos).moves[0]);
  }
  auto path =
      (std::filesystem::temp_directory_path() / ("jiriki_records_" + std::to_string(getpid()) + ".hcpe")).string();
  REQUIRE_FALSE(write_hcpe_file(path, recs));
  REQUIRE(std::filesystem::file_size(path) == 3 * 38);
  {
    // Little-endian fields at offsets 32 (eval), 34 (move16), 36 (result), 37 (pad).
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    const uint8_t* r1 = reinterpret_cast<const uint8_t*>(bytes.data()) + 38;
    CHECK(int16_t(r1[32] | r1[33] << 8) == -107);
    CHECK((r1[34] | r1[35] << 8) == recs[1].move16);
    CHECK(r1[36] == 1);
    CHECK(r1[37] == 0);
  }
  std::vector<HcpeRecord> back;
  REQUIRE_FALSE(read_hcpe_file(path, back));
  CHECK(back == recs);

  REQUIRE_FALSE(write_hcpe_file(path, {recs[0]}, true));
  REQUIRE_FALSE(read_hcpe_file(path, back));
  CHECK(back.size() == 4);

  std::filesystem::resize_file(path, 4 * 38 - 10);
  auto err = read_hcpe_file(path, back);
  REQUIRE(err);
  CHECK_THAT(*err, Contains(path) && Contains("truncated") && Contains("byte offset 114") && Contains("28 of 38"));
  std::filesystem::remove(path);

  err = read_hcpe_file(path, back);
  REQUIRE(err);
  CHECK_THAT(*err, Contains(path) && Contains("cannot open"));
}

TEST_CASE("hcp: invalid bit streams are rejected with their reason", "[records][hcpe]") {
  Position pos;
  Position decoded;
  HuffmanCodedPos h;

  h.data.fill(0xff);  // Black's king square would be 127
  auto err = decode_hcp(h, decoded);
  REQUIRE(err);
  CHECK_THAT(*err, Contains("king square 127 is off the board"));

  h.data.fill(0);  // both kings on square 0
  err = decode_hcp(h, decoded);
  REQUIRE(err);
  CHECK_THAT(*err, Contains("both kings on square 1a"));

  // One Black pawn in hand: its code 000 fills bits 253-255. Setting bit 254 makes it 010, which
  // no hand piece has (a promoted pawn in hand).
  REQUIRE_FALSE(pos.set_sfen("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPP1/1B5R1/LNSGKGSNL b P 1"));
  h = encode_hcp(pos);
  REQUIRE_FALSE(decode_hcp(h, decoded));
  h.data[31] |= 1 << 6;  // bit 254
  err = decode_hcp(h, decoded);
  REQUIRE(err);
  CHECK_THAT(*err, Contains("invalid hand piece code at bit 253"));

  // Turning the empty square 1b (bit 21) into the start of a piece code shifts the rest of the
  // stream: it no longer ends on a code boundary.
  h = encode_hcp(Position());
  h.data[2] |= 1 << 5;  // bit 21
  err = decode_hcp(h, decoded);
  REQUIRE(err);
  CHECK_THAT(*err, Contains("hcp: the bit stream ends inside the code of square"));

  // A code changed into another code of the same length: the stream stays well formed but the
  // position it describes is not. 1a's White lance 110010 (bits 15-20) becomes a White knight
  // 111010 by setting bit 17: five knights.
  h = encode_hcp(Position());
  h.data[2] |= 1 << 1;  // bit 17
  err = decode_hcp(h, decoded);
  REQUIRE(err);
  CHECK_THAT(*err, Contains("5 pieces of type N, at most 4 exist"));
  // 1c's White pawn 1010 (bits 22-25) becomes a Black pawn 1000 by clearing bit 24: two Black
  // pawns on file 1.
  h = encode_hcp(Position());
  h.data[3] &= ~1;  // bit 24
  err = decode_hcp(h, decoded);
  REQUIRE(err);
  CHECK_THAT(*err, Contains("hcp: invalid position lnsgkgsnl/1r5b1/ppppppppP/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL"));

  // The decoded position is left untouched on error.
  decoded.set_startpos();
  h.data.fill(0);
  REQUIRE(decode_hcp(h, decoded));
  CHECK(decoded.sfen() == Position().sfen());
}

// ---- CSA ----------------------------------------------------------------------------------------

TEST_CASE("csa: a short real opening ending in %TORYO", "[records][csa]") {
  GameRecord rec;
  auto err = read_csa(OPENING_CSA, rec);
  REQUIRE_FALSE(err);
  CHECK(rec.start.sfen() == Position().sfen());
  CHECK(rec.moves == usi_moves(rec.start, OPENING_USI));
  CHECK(rec.seconds == std::vector<int>{1, 2, 3, 4, 5});
  CHECK(rec.end == GameEnd::RESIGN);
  CHECK(rec.black == "Sente");
  CHECK(rec.white == "Gote");
  CHECK(rec.event == "jiriki test");
  CHECK(rec.start_time == "2024/05/01 10:00:00");
  CHECK(rec.final_position().sfen() == normal_sfen(OPENING_AFTER));
  CHECK(game_result(rec) == BLACK_WIN);  // White, to move, resigned

  // Written back: the exact text, which reads back to the same record.
  const std::string expected =
      "V2.2\nN+Sente\nN-Gote\n$EVENT:jiriki test\n$START_TIME:2024/05/01 10:00:00\nPI\n+\n"
      "+7776FU\nT1\n-3334FU\nT2\n+8822UM\nT3\n-3122GI\nT4\n+0045KA\nT5\n%TORYO\n";
  CHECK(write_csa(rec) == expected);
  GameRecord back;
  REQUIRE_FALSE(read_csa(write_csa(rec), back));
  check_same(rec, back);
  CHECK(back.seconds == rec.seconds);
}

TEST_CASE("csa: move notation", "[records][csa]") {
  Position pos;
  REQUIRE_FALSE(pos.set_sfen(OPENING_AFTER));
  Move m = MOVE_NONE;
  // White drops the bishop from its hand; the silver on 2b steps to 3c.
  REQUIRE_FALSE(move_from_csa(pos, "-0055KA", m));
  CHECK(m == make_drop(BISHOP, make_square(4, 4)));
  CHECK(move_to_csa(pos, m) == "-0055KA");
  REQUIRE_FALSE(move_from_csa(pos, "-2233GI", m));
  CHECK(move_to_usi(m) == "2b3c");
  // A promotion is read from the piece change; a non-promotion keeps the piece.
  Position p2;
  REQUIRE_FALSE(p2.set_sfen("4k4/9/4P4/9/9/9/9/9/4K4 b - 1"));
  REQUIRE_FALSE(move_from_csa(p2, "+5352TO", m));
  CHECK(move_to_usi(m) == "5c5b+");
  CHECK(move_to_csa(p2, m) == "+5352TO");
  REQUIRE_FALSE(move_from_csa(p2, "+5352FU", m));
  CHECK(move_to_usi(m) == "5c5b");
}

TEST_CASE("csa: handicap PI line, P+/P- with 00AL, %TSUMI", "[records][csa]") {
  GameRecord rec;
  REQUIRE_FALSE(read_csa("V2.2\nPI82HI22KA\n-\n-3334FU\n+7776FU\n%CHUDAN\n", rec));
  CHECK(rec.start.sfen() == normal_sfen("lnsgkgsnl/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"));
  CHECK(rec.moves.size() == 2);
  CHECK(rec.end == GameEnd::ABORT);
  CHECK_FALSE(game_result(rec));

  // White king 1a, Black gold 1c and a gold in hand, every other piece in White's hand.
  const char* mate =
      "P1 *  *  *  *  *  *  *  * -OU\n"
      "P2 *  *  *  *  *  *  *  *  * \n"
      "P3 *  *  *  *  *  *  *  * +KI\n"
      "P4 *  *  *  *  *  *  *  *  * \n"
      "P5 *  *  *  *  *  *  *  *  * \n"
      "P6 *  *  *  *  *  *  *  *  * \n"
      "P7 *  *  *  *  *  *  *  *  * \n"
      "P8 *  *  *  *  *  *  *  *  * \n"
      "P9 *  *  *  * +OU *  *  *  * \n"
      "P+00KI\n"
      "P-00AL\n"
      "+\n"
      "+0012KI\n"
      "%TSUMI\n";
  REQUIRE_FALSE(read_csa(mate, rec));
  CHECK(rec.start.sfen() == normal_sfen("8k/9/8G/9/9/9/9/9/4K4 b G2r2b2g4s4n4l18p 1"));
  CHECK(move_to_usi(rec.moves.at(0)) == "G*1b");
  CHECK(legal_moves(rec.final_position()).size() == 0);  // really mate
  CHECK(game_result(rec) == BLACK_WIN);
  // Written with P rows and hands, and read back the same.
  GameRecord back;
  std::string text = write_csa(rec);
  CHECK_THAT(text, Contains("P1 *  *  *  *  *  *  *  * -OU\n") && Contains("P+00KI\n") &&
                       Contains("P-00HI00HI00KA00KA00KI00KI00GI"));
  REQUIRE_FALSE(read_csa(text, back));
  check_same(rec, back);
}

TEST_CASE("csa: sennichite and the game result", "[records][csa]") {
  // Rooks shuttle 2h-3h and 8b-7b: the start position occurs for the fourth time after 12 moves.
  std::string csa = "PI\n+\n";
  for (int i = 0; i < 3; ++i) csa += "+2838HI\n-8272HI\n+3828HI\n-7282HI\n";
  GameRecord rec;
  REQUIRE_FALSE(read_csa(csa + "%SENNICHITE\n", rec));
  CHECK(rec.moves.size() == 12);
  CHECK(game_result(rec) == DRAW);
  REQUIRE_FALSE(read_csa(csa + "%KACHI\n", rec));
  CHECK(game_result(rec) == BLACK_WIN);  // Black to move declared
  REQUIRE_FALSE(read_csa(csa + "%-ILLEGAL_ACTION\n", rec));
  CHECK(game_result(rec) == BLACK_WIN);
  REQUIRE_FALSE(read_csa(csa + "%TIME_UP\n", rec));
  CHECK(game_result(rec) == WHITE_WIN);
}

TEST_CASE("csa: malformed input is rejected with the line", "[records][csa]") {
  auto error_of = [](const std::string& text) {
    GameRecord rec;
    auto err = read_csa(text, rec);
    REQUIRE(err);
    return *err;
  };
  CHECK_THAT(error_of("PI\n+\n+7776FX\n"), Contains("line 3") && Contains("bad piece code") && Contains("+7776FX"));
  CHECK_THAT(error_of("PI\n+\n+7775FU\n"), Contains("line 3") && Contains("illegal move '+7775FU'"));
  CHECK_THAT(error_of("PI\n+\n+7776FU,+2726FU\n"), Contains("line 3") && Contains("wrong side"));
  CHECK_THAT(error_of("PI\n+\n+7776KA\n"), Contains("FU on 77 cannot become KA"));
  CHECK_THAT(error_of("P1-KY-KE-GI-KI-OU-KI-GI-KE-XX\n"), Contains("line 1") && Contains("bad piece code"));
  CHECK_THAT(error_of("PI\nP5 *  *  *  * +OU *  *  *  * \n+\n"),
             Contains("line 3") && Contains("invalid start position"));
  CHECK_THAT(error_of("PI55HI\n+\n"), Contains("line 1") && Contains("cannot remove '55HI'"));
  CHECK_THAT(error_of("P+00OU\n+\n"), Contains("bad piece in hand '00OU'"));
  CHECK_THAT(error_of("+\n"), Contains("line 1") && Contains("side to move before any position line"));
  CHECK_THAT(error_of("N+a\n"), Contains("no start position"));
  CHECK_THAT(error_of("PI\n+\nT5\n"), Contains("line 3") && Contains("time line before any move"));
  // Found by fuzz_csa: digits past the ninth were dropped, so T6194741327996562090 read as 619474132
  // seconds, which the KIF writer then wrote as a time the KIF reader refused. Too long is refused.
  CHECK_THAT(error_of("PI\n+\n+7776FU\nT6194741327996562090\n"), Contains("line 4") && Contains("time over 99999999"));
  CHECK_THAT(error_of("PI\n+\n+7776FU\nT100000000\n"), Contains("time over 99999999 seconds"));
  {
    GameRecord longest;
    REQUIRE_FALSE(read_csa("PI\n+\n+7776FU\nT99999999\n-3334FU\nT99999999.5\n", longest));
    CHECK(longest.seconds == std::vector<int>{99999999, 99999999});
    GameRecord back;
    REQUIRE_FALSE(read_kif(write_kif(longest), back));  // 1666666:39 per move, and back
    CHECK(back.seconds == longest.seconds);
  }
  CHECK_THAT(error_of("PI\n+\n+7776FU\n%FOO\n"), Contains("line 4") && Contains("unknown end statement '%FOO'"));
  CHECK_THAT(error_of("PI\n+\n%TORYO\n+7776FU\n"), Contains("line 4") && Contains("move after the end"));
  CHECK_THAT(error_of("PI\n+\nhello\n"), Contains("line 3") && Contains("unrecognised statement 'hello'"));
  CHECK_THAT(error_of("PI\n+\n+7776FU\n\xff\xfe\n"), Contains("neither UTF-8"));
}

// ---- KIF ----------------------------------------------------------------------------------------

TEST_CASE("kif: the opening reads the same as the CSA record", "[records][kif]") {
  GameRecord csa, kif;
  REQUIRE_FALSE(read_csa(OPENING_CSA, csa));
  auto err = read_kif(OPENING_KIF, kif);
  REQUIRE_FALSE(err);
  check_same(csa, kif);
  CHECK(kif.seconds == csa.seconds);
  CHECK(kif.event == "jiriki test");
  CHECK(kif.start_time == "2024/05/01 10:00:00");

  // The same bytes in Shift_JIS, and in UTF-8 with a BOM and CRLF line ends.
  std::string sjis = to_sjis(OPENING_KIF);
  REQUIRE(sjis.find("\x8e\xe8\x8d\x87") != std::string::npos);  // 手合 in Shift_JIS
  REQUIRE_FALSE(read_kif(sjis, kif));
  check_same(csa, kif);
  std::string crlf = "\xef\xbb\xbf";
  for (char c : std::string(OPENING_KIF)) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  REQUIRE_FALSE(read_kif(crlf, kif));
  check_same(csa, kif);
}

TEST_CASE("kif: writing", "[records][kif]") {
  GameRecord rec;
  REQUIRE_FALSE(read_csa(OPENING_CSA, rec));
  std::string text = write_kif(rec);
  CHECK(text.starts_with("\xef\xbb\xbf"));
  CHECK_THAT(text, Contains("開始日時：2024/05/01 10:00:00\r\n") && Contains("手合割：平手\r\n") &&
                       Contains("先手：Sente\r\n") && Contains("後手：Gote\r\n"));
  CHECK_THAT(text, Contains("\r\n   1 ７六歩(77)   ( 0:01/00:00:01)\r\n   2 ３四歩(33)   ( 0:02/00:00:02)\r\n"
                            "   3 ２二角成(88) ( 0:03/00:00:04)\r\n   4 同　銀(31)   ( 0:04/00:00:06)\r\n"
                            "   5 ４五角打     ( 0:05/00:00:09)\r\n   6 投了\r\nまで5手で先手の勝ち\r\n"));
  GameRecord back;
  REQUIRE_FALSE(read_kif(text, back));
  check_same(rec, back);
  CHECK(back.seconds == rec.seconds);

  std::string sjis = write_kif(rec, TextEncoding::SHIFT_JIS);
  CHECK(sjis == to_sjis(text.substr(3)));
  REQUIRE_FALSE(read_kif(sjis, back));
  check_same(rec, back);

  rec.black = "\xf0\x9f\x98\x80";  // an emoji: no Shift_JIS code
  CHECK_THROWS_WITH(write_kif(rec, TextEncoding::SHIFT_JIS), Contains("cannot be written in Shift_JIS"));
}

TEST_CASE("kif: handicap, BOD board, 不成 and the end words", "[records][kif]") {
  const char* lance =
      "手合割：香落ち\n下手：Shitate\n上手：Uwate\n手数----指手---------消費時間--\n"
      "   1 ３四歩(33)\n   2 ７六歩(77)\n   3 中断\n";
  GameRecord kif, csa;
  REQUIRE_FALSE(read_kif(lance, kif));
  REQUIRE_FALSE(read_csa("N+Shitate\nN-Uwate\nPI11KY\n-\n-3334FU\n+7776FU\n%CHUDAN\n", csa));
  CHECK(kif.start.sfen() == normal_sfen("lnsgkgsn1/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"));
  check_same(kif, csa);
  std::string text = write_kif(kif);
  CHECK_THAT(text, Contains("手合割：香落ち\r\n下手：Shitate\r\n上手：Uwate\r\n") && Contains("   3 中断\r\n"));
  GameRecord back;
  REQUIRE_FALSE(read_kif(text, back));
  check_same(kif, back);

  // The gold-drop mate as a BOD board, equal to the CSA record with P rows and 00AL.
  const char* bod =
      "後手の持駒：飛二　角二　金二　銀四　桂四　香四　歩十八　\n"
      "  ９ ８ ７ ６ ５ ４ ３ ２ １\n"
      "+---------------------------+\n"
      "| ・ ・ ・ ・ ・ ・ ・ ・v玉|一\n"
      "| ・ ・ ・ ・ ・ ・ ・ ・ ・|二\n"
      "| ・ ・ ・ ・ ・ ・ ・ ・ 金|三\n"
      "| ・ ・ ・ ・ ・ ・ ・ ・ ・|四\n"
      "| ・ ・ ・ ・ ・ ・ ・ ・ ・|五\n"
      "| ・ ・ ・ ・ ・ ・ ・ ・ ・|六\n"
      "| ・ ・ ・ ・ ・ ・ ・ ・ ・|七\n"
      "| ・ ・ ・ ・ ・ ・ ・ ・ ・|八\n"
      "| ・ ・ ・ ・ 玉 ・ ・ ・ ・|九\n"
      "+---------------------------+\n"
      "先手の持駒：金　\n"
      "手数----指手---------消費時間--\n"
      "   1 １二金打\n"
      "   2 詰み\n";
  REQUIRE_FALSE(read_kif(bod, kif));
  CHECK(kif.start.sfen() == normal_sfen("8k/9/8G/9/9/9/9/9/4K4 b G2r2b2g4s4n4l18p 1"));
  CHECK(kif.end == GameEnd::MATE);
  CHECK(move_to_usi(kif.moves.at(0)) == "G*1b");
  REQUIRE_FALSE(read_kif(write_kif(kif), back));  // written as a BOD board again
  check_same(kif, back);

  // White to move on a BOD board, promoted pieces on it, 不成, 成 and 成銀 moves, 千日手 words.
  const char* promo =
      "後手の持駒：なし\n"
      "| ・ ・ ・ ・v玉 ・ ・ ・ ・|一\n"
      "| ・ ・ ・ ・ ・ ・ ・ ・ ・|二\n"
      "| ・ 銀 ・ ・ ・ ・ ・ ・ ・|三\n"
      "| ・ ・ ・ ・ ・ ・ ・ ・ ・|四\n"
      "| ・ ・ ・ ・ ・ ・ ・ ・ ・|五\n"
      "| ・ ・ ・ ・ ・ ・ ・ ・ ・|六\n"
      "| ・ ・ ・ ・ ・ ・ ・ ・ ・|七\n"
      "| ・ ・ ・ ・ ・ ・ ・ ・v全|八\n"
      "| ・ ・ ・ ・ 玉 ・ ・ ・ ・|九\n"
      "先手の持駒：飛二　角二　金四　銀二　桂四　香四　歩十八　\n"
      "後手番\n"
      "   1 ２九成銀(18)\n"
      "   2 ７二銀不成(83)\n"
      "   3 千日手\n";
  REQUIRE_FALSE(read_kif(promo, kif));
  CHECK(kif.start.sfen() == normal_sfen("4k4/9/1S7/9/9/9/9/8+s/4K4 w 2R2B4G2S4N4L18P 1"));
  CHECK(move_to_usi(kif.moves.at(0)) == "1h2i");
  CHECK(move_to_usi(kif.moves.at(1)) == "8c7b");
  CHECK(kif.end == GameEnd::SENNICHITE);
  text = write_kif(kif);
  CHECK_THAT(text, Contains("   1 ２九成銀(18)") && Contains("   2 ７二銀不成(83)") && Contains("後手番\r\n"));
  REQUIRE_FALSE(read_kif(text, back));
  check_same(kif, back);
}

TEST_CASE("kif and csa round trips over random games", "[records][kif][csa]") {
  std::mt19937 rng(7);
  const GameEnd ends[] = {GameEnd::NONE,
                          GameEnd::RESIGN,
                          GameEnd::MATE,
                          GameEnd::SENNICHITE,
                          GameEnd::DECLARATION,
                          GameEnd::IMPASSE,
                          GameEnd::TIME_UP,
                          GameEnd::ILLEGAL_MOVE,
                          GameEnd::BLACK_ILLEGAL_ACTION,
                          GameEnd::WHITE_ILLEGAL_ACTION,
                          GameEnd::ABORT};
  for (int game = 0; game < 44; ++game) {
    GameRecord rec = random_game(rng, 200);
    rec.end = ends[game % 11];
    rec.black = "先手 " + std::to_string(game);
    rec.white = "後手";
    GameRecord back;
    auto err = read_csa(write_csa(rec), back);
    REQUIRE_FALSE(err);
    check_same(rec, back);
    CHECK(back.seconds == rec.seconds);
    for (TextEncoding enc : {TextEncoding::UTF8_BOM, TextEncoding::SHIFT_JIS}) {
      err = read_kif(write_kif(rec, enc), back);
      REQUIRE_FALSE(err);
      CHECK(back.seconds == rec.seconds);
      CHECK(game_result(back) == game_result(rec));
      // KIF names an illegal action only as 反則負け/反則勝ち of the side to move: the loser's own
      // illegal action reads back as ILLEGAL_MOVE.
      if (back.end == GameEnd::ILLEGAL_MOVE && rec.end != GameEnd::ILLEGAL_MOVE) back.end = rec.end;
      check_same(rec, back);
    }
    // A record that starts from a position in the middle of the game, written as P rows / BOD.
    GameRecord mid;
    mid.start = rec.start;
    for (size_t i = 0; i < rec.moves.size() / 2; ++i) mid.start.do_move(rec.moves[i]);
    REQUIRE_FALSE(mid.start.set_sfen(mid.start.sfen()));
    for (size_t i = rec.moves.size() / 2; i < rec.moves.size(); ++i) mid.add_move(rec.moves[i], rec.seconds[i]);
    REQUIRE_FALSE(read_csa(write_csa(mid), back));
    check_same(mid, back);
    REQUIRE_FALSE(read_kif(write_kif(mid), back));
    check_same(mid, back);
  }
}

TEST_CASE("kif: malformed input is rejected with the line", "[records][kif]") {
  auto error_of = [](const std::string& text) {
    GameRecord rec;
    auto err = read_kif(text, rec);
    REQUIRE(err);
    return *err;
  };
  const std::string head = "手合割：平手\n手数----指手---------消費時間--\n";
  CHECK_THAT(error_of(head + "   1 ７五歩(77)\n"), Contains("line 3") && Contains("illegal move 7g7e"));
  CHECK_THAT(error_of(head + "   1 ７六と(77)\n"), Contains("line 3") && Contains("no と of the side to move on 7g"));
  CHECK_THAT(error_of(head + "   1 ７六象(77)\n"), Contains("line 3") && Contains("bad piece name"));
  CHECK_THAT(error_of(head + "   1 ７六歩(77)\n   3 ３四歩(33)\n"),
             Contains("line 4") && Contains("move number 3 where 2 was expected"));
  CHECK_THAT(error_of(head + "   1 同　歩(77)\n"), Contains("同 without a previous move"));
  CHECK_THAT(error_of(head + "   1 ７六歩(77) ( 0:99/00:00:01)\n"), Contains("bad time"));
  CHECK_THAT(error_of(head + "   1 ７六歩(77) (1666667:00/00:00:01)\n"), Contains("time over 99999999 seconds"));
  CHECK_THAT(error_of(head + "   1 ７六歩(77)   xyz\n"), Contains("unexpected text after the move"));
  CHECK_THAT(error_of(head + "   1 ５五角打\n"), Contains("illegal move B*5e"));
  CHECK_THAT(error_of(head + "   1 投了\n   2 ７六歩(77)\n"), Contains("line 4") && Contains("move after the end"));
  CHECK_THAT(error_of("手合割：九枚落ち\n"), Contains("line 1") && Contains("unknown handicap '九枚落ち'"));
  CHECK_THAT(error_of("手合割：その他\n"), Contains("手合割：その他 without a board"));
  CHECK_THAT(error_of("後手の持駒：なし\n| ・ ・ ・ ・v玉 ・ ・ ・ ・|一\n"), Contains("1 rows instead of 9"));
  CHECK_THAT(error_of("| ・ ・ ・ ・v象 ・ ・ ・ ・|一\n"), Contains("line 1") && Contains("bad square 'v象'"));
  CHECK_THAT(error_of("先手の持駒：歩十九\n"), Contains("bad piece in hand '歩十九'"));
  CHECK_THAT(error_of("これは棋譜ではない\n"), Contains("line 1") && Contains("unrecognised line"));
  CHECK_THAT(error_of("\x81\x20\n"), Contains("neither UTF-8") && Contains("nor Shift_JIS"));
}
