// `jiriki records`: hcpe3 -> CSA -> hcpe3, hcpe3 -> hcpe and hcpe3 -> openings through the real binary.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "match/openings.h"
#include "shogi/hcpe3.h"
#include "shogi/movegen.h"
#include "tests/temp_dir.h"

using namespace jiriki;
namespace fs = std::filesystem;

namespace {
// A random game that ends by the rules (mate) or is cut and given the result `cut_result`.
Hcpe3Game random_game(std::mt19937& rng, uint8_t cut_result) {
  Position pos;
  Hcpe3Game g;
  g.start = encode_hcp(pos);
  for (int ply = 0; ply < 120; ++ply) {
    MoveList legal = legal_moves(pos);
    if (legal.size() == 0) {
      g.result = pos.side_to_move() == BLACK ? WHITE_WIN : BLACK_WIN;
      return g;
    }
    Move m = legal.moves[rng() % legal.size()];
    g.moves.push_back(
        {m, int16_t(ply), ply % 3 ? std::vector<Hcpe3Candidate>{{uint16_t(m), 3}} : std::vector<Hcpe3Candidate>{}});
    pos.do_move(m);
  }
  g.result = cut_result;
  return g;
}
int run(const std::string& args) {
  return std::system((std::string(JIRIKI_BINARY) + " " + args + " > /dev/null 2>&1").c_str());
}
}  // namespace

TEST_CASE("records CLI: hcpe3 to CSA and back keeps moves and results", "[records][cli]") {
  const jiriki::testing::TempDir tmp("records_cli");
  const fs::path& dir = tmp.path;
  std::mt19937 rng(5);
  std::vector<Hcpe3Game> games;
  // Cut games end with Black to move: Black resigns, the game is drawn at the length limit or by
  // repetition, Black declares, or White made an illegal move.
  const uint8_t cut_results[] = {WHITE_WIN, uint8_t(DRAW | hcpe3::MAX_MOVES), uint8_t(DRAW | hcpe3::SENNICHITE),
                                 uint8_t(BLACK_WIN | hcpe3::DECLARATION), BLACK_WIN};
  for (int i = 0; i < 15; ++i) games.push_back(random_game(rng, cut_results[i % 5]));
  REQUIRE_FALSE(write_hcpe3_file((dir / "in.hcpe3").string(), games));

  REQUIRE(run("records convert --to csa -o " + (dir / "csa").string() + " " + (dir / "in.hcpe3").string()) == 0);
  REQUIRE(run("records convert --to hcpe3 -o " + (dir / "back.hcpe3").string() + " " + (dir / "csa").string()) == 0);
  std::vector<Hcpe3Game> back;
  REQUIRE_FALSE(read_hcpe3_file((dir / "back.hcpe3").string(), back));
  REQUIRE(back.size() == games.size());
  for (size_t i = 0; i < games.size(); ++i) {
    INFO("game " << i);
    CHECK(back[i].start == games[i].start);
    CHECK(back[i].result == games[i].result);
    REQUIRE(back[i].moves.size() == games[i].moves.size());
    for (size_t j = 0; j < games[i].moves.size(); ++j) CHECK(back[i].moves[j].move == games[i].moves[j].move);
  }

  // hcpe keeps only the positions with search targets (2 of every 3 plies here).
  REQUIRE(run("records convert --to hcpe -o " + (dir / "pos.hcpe").string() + " " + (dir / "in.hcpe3").string()) == 0);
  std::vector<HcpeRecord> positions;
  REQUIRE_FALSE(read_hcpe_file((dir / "pos.hcpe").string(), positions));
  size_t expected = 0;
  for (const auto& g : games)
    for (const auto& m : g.moves) expected += !m.candidates.empty();
  CHECK(positions.size() == expected);
  CHECK(positions[0].result == games[0].winner());

  // openings: each game's position every 7 plies before its last move, as lines jiriki match reads,
  // in the order of the games.
  REQUIRE(run("records convert --to openings --every 7 -o " + (dir / "o.txt").string() + " " +
              (dir / "in.hcpe3").string()) == 0);
  std::ifstream lines_in(dir / "o.txt");
  std::vector<std::string> lines;
  for (std::string line; std::getline(lines_in, line);) lines.push_back(line);
  size_t line = 0;
  for (const auto& g : games)
    for (size_t k = 7; k < g.moves.size(); k += 7, ++line) {
      INFO("line " << line << ", ply " << k);
      REQUIRE(line < lines.size());
      match::Opening o;
      REQUIRE_FALSE(match::parse_opening(lines[line], o));
      REQUIRE(o.moves.size() == k);
      for (size_t j = 0; j < k; ++j) CHECK(o.moves[j] == g.moves[j].move);
    }
  CHECK(line == lines.size());
  CHECK(line > 20);
  CHECK(run("records convert --to openings --every 0 -o " + (dir / "o0.txt").string() + " " +
            (dir / "in.hcpe3").string()) != 0);

  // Bad input: an unknown format and a missing file are errors, not crashes.
  CHECK(run("records convert --to xyz -o " + (dir / "x").string() + " " + (dir / "in.hcpe3").string()) != 0);
  CHECK(run("records summary " + (dir / "missing.hcpe3").string()) != 0);
  CHECK(run("records summary " + (dir / "in.hcpe3").string()) == 0);
}

TEST_CASE("records CLI and nn: outputs go through a temporary file, so a full disk leaves no cut one",
          "[records][cli]") {
  // The full disk is a file size limit of 512 bytes (RLIMIT_FSIZE, `ulimit -f 1`) with SIGXFSZ
  // ignored: a write past it fails with EFBIG. `nn init`, `nn convert` and `records convert --to
  // hcpe` wrote the target directly and left a cut file there.
  const jiriki::testing::TempDir tmp("records_full");
  const fs::path& dir = tmp.path;
  std::mt19937 rng(7);
  std::vector<Hcpe3Game> games;
  for (int i = 0; i < 3; ++i) games.push_back(random_game(rng, WHITE_WIN));
  REQUIRE_FALSE(write_hcpe3_file((dir / "in.hcpe3").string(), games));
  auto limited = [&](const std::string& args, std::string* err) {
    const std::string e = (dir / "err.txt").string(), rc = (dir / "rc.txt").string();
    std::system(("( ( trap '' XFSZ; ulimit -f 1; exec " + std::string(JIRIKI_BINARY) + " " + args + " ); echo $? > " +
                 rc + " ) 2>&1 >/dev/null | cat > " + e)
                    .c_str());
    std::ifstream in(e), status(rc);
    *err = std::string(std::istreambuf_iterator<char>(in), {});
    int code = -1;
    status >> code;
    return code;
  };
  auto content = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  std::string err;
  // A target that was there keeps its bytes.
  std::ofstream(dir / "pos.hcpe") << "old";
  CHECK(limited("records convert --to hcpe -o " + (dir / "pos.hcpe").string() + " " + (dir / "in.hcpe3").string(),
                &err) != 0);
  CHECK_THAT(err, Catch::Contains("pos.hcpe") && Catch::Contains("File too large"));
  CHECK(content(dir / "pos.hcpe") == "old");
  // A network: none at all rather than a cut one.
  CHECK(limited("nn init --blocks 2 --channels 32 -o " + (dir / "net.jnn").string(), &err) != 0);
  CHECK_THAT(err, Catch::Contains("net.jnn") && Catch::Contains("File too large"));
  CHECK_FALSE(fs::exists(dir / "net.jnn"));
  REQUIRE(run("nn init --blocks 2 --channels 32 -o " + (dir / "net.jnn").string()) == 0);
  CHECK(limited("nn convert " + (dir / "net.jnn").string() + " -o " + (dir / "bf16.jnn").string() + " --weights bf16",
                &err) != 0);
  CHECK_THAT(err, Catch::Contains("bf16.jnn") && Catch::Contains("File too large"));
  CHECK_FALSE(fs::exists(dir / "bf16.jnn"));
  // And no temporary file is left behind.
  for (const auto& f : fs::directory_iterator(dir))
    CHECK(f.path().filename().string().find(".tmp.") == std::string::npos);
}

TEST_CASE("records CLI: random bytes are not counted as hcpe positions", "[records][cli]") {
  // hcpe has no header: 380 random bytes read as 10 records, and `records summary` counted them.
  const jiriki::testing::TempDir tmp("records_random");
  const fs::path& dir = tmp.path;
  std::mt19937 rng(3);
  {
    std::ofstream out(dir / "noise.hcpe", std::ios::binary);
    for (int i = 0; i < 380; ++i) out.put(char(rng()));
  }
  const std::string out = (dir / "out.txt").string();
  CHECK(std::system(
            (std::string(JIRIKI_BINARY) + " records summary " + (dir / "noise.hcpe").string() + " > " + out + " 2>&1")
                .c_str()) != 0);
  std::ifstream in(out);
  const std::string text(std::istreambuf_iterator<char>(in), {});
  CHECK_THAT(text, Catch::Contains("record 1 (byte 0) is not an hcpe position"));
  CHECK_THAT(text, !Catch::Contains("hcpe positions: 10"));
  // Real positions still count, from every file given.
  std::vector<Hcpe3Game> games{random_game(rng, WHITE_WIN)};
  REQUIRE_FALSE(write_hcpe3_file((dir / "g.hcpe3").string(), games));
  REQUIRE(run("records convert --to hcpe -o " + (dir / "a.hcpe").string() + " " + (dir / "g.hcpe3").string()) == 0);
  fs::copy_file(dir / "a.hcpe", dir / "b.hcpe");
  CHECK(std::system((std::string(JIRIKI_BINARY) + " records summary " + (dir / "a.hcpe").string() + " " +
                     (dir / "b.hcpe").string() + " > " + out + " 2>&1")
                        .c_str()) == 0);
  std::ifstream again(out);
  const std::string counted(std::istreambuf_iterator<char>(again), {});
  CHECK_THAT(counted, Catch::Contains("hcpe positions: " + std::to_string(2 * fs::file_size(dir / "a.hcpe") / 38)));
}
