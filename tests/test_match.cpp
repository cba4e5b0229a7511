// `jiriki match`: statistics against independent figures, the referee through scripted fake
// engines (tests/data/fake_usi.sh) for every way a game ends, the tournament scheduler (pairings,
// colour swap, crash recovery, SPRT stop), the records, and the command's exit codes.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "common/platform.h"
#include "match/adjudicate.h"
#include "match/game.h"
#include "match/report.h"
#include "match/stats.h"
#include "match/tournament.h"
#include "shogi/csa.h"
#include "shogi/hcpe3.h"
#include "shogi/kif.h"
#include "tests/scripted_match.h"
#include "tests/temp_dir.h"

using namespace jiriki;
using namespace jiriki::match;
using jiriki::testing::TempDir;
using namespace jiriki::match::testing;

namespace {

// A round robin of `engines`: 4 games a pairing, 2 at once, records in dir/out; it must finish.
TournamentResult round_robin(const TempDir& dir, std::vector<EngineSpec> engines, TournamentConfig& c) {
  c.engines = std::move(engines);
  c.games = 4;
  c.concurrency = 2;
  c.progress = false;
  c.game = fast_settings();
  c.records.dir = dir.file("out");
  TournamentResult r = run_tournament(c);
  INFO(r.error);
  REQUIRE(r.error.empty());
  return r;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The exit code of a shell command.
int run(const std::string& cmd) {
  int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

const std::vector<std::string> SENNICHITE = {"5i5h", "5a5b", "5h5i", "5b5a", "5i5h", "5a5b",
                                             "5h5i", "5b5a", "5i5h", "5a5b", "5h5i", "5b5a"};

}  // namespace

// ---- statistics ------------------------------------------------------------------------------

TEST_CASE("match stats: Elo, interval and LOS from wins, draws and losses", "[match]") {
  // W 30, D 40, L 25 worked by hand (python3, math module): score 50/95 = 0.526316, per-game
  // variance 0.236842, standard error 0.049930; Elo -400 log10(1/s - 1); interval from the score
  // +- 1.959964 standard errors; LOS = Phi((s - 1/2) / se).
  EloEstimate e = estimate_wdl(30, 40, 25);
  CHECK(e.score == Approx(0.5263157895));
  CHECK(e.elo == Approx(18.30300).epsilon(1e-5));
  CHECK(e.lo == Approx(-34.86253).epsilon(1e-5));
  CHECK(e.hi == Approx(72.34596).epsilon(1e-5));
  CHECK(e.los == Approx(0.7504221).epsilon(1e-5));
  CHECK(e.nelo == Approx(24.09032).epsilon(1e-5));
  CHECK(elo_from_score(0.75) == Approx(190.8485).epsilon(1e-6));  // 400 log10(3)
  CHECK(std::isinf(estimate_wdl(5, 0, 0).elo));
  // Wilson's score interval, by hand (python3): centre (p + z^2/2n) / (1 + z^2/n), half-width
  // z / (1 + z^2/n) sqrt(p (1 - p) / n + z^2 / 4n^2).
  CHECK(e.score_lo == Approx(0.4268535).epsilon(1e-5));
  CHECK(e.score_hi == Approx(0.6237326).epsilon(1e-5));
  const EloEstimate swept = estimate_wdl(0, 0, 20);  // 0 of 20: no Elo interval, still a score bound
  CHECK(std::isinf(swept.lo));
  CHECK(swept.score_lo == 0);
  CHECK(swept.score_hi == Approx(0.1611252).epsilon(1e-5));
  const EloEstimate w14 = estimate_wdl(14, 0, 6);
  CHECK(w14.score_lo == Approx(0.4810272).epsilon(1e-5));
  CHECK(w14.score_hi == Approx(0.8545228).epsilon(1e-5));
}

TEST_CASE("match stats: pentanomial Elo from pair counts", "[match]") {
  // Pairs LL 3, LD 10, DD/WL 20, WD 12, WW 5 by hand (python3): mean 0.53 per game, pair variance
  // 0.0546 per game squared, se 0.033045; nElo = (s - 1/2) / sqrt(2 var) * 800 / ln 10.
  EloEstimate e = estimate_penta({3, 10, 20, 12, 5});
  CHECK(e.score == Approx(0.53));
  CHECK(e.elo == Approx(20.87120).epsilon(1e-5));
  CHECK(e.lo == Approx(-28.92602).epsilon(1e-5));
  CHECK(e.hi == Approx(71.54609).epsilon(1e-5));
  CHECK(e.los == Approx(0.7944601).epsilon(1e-5));
  CHECK(e.nelo == Approx(28.55903).epsilon(1e-5));
}

TEST_CASE("match stats: pentanomial SPRT against fastchess's published figures", "[match]") {
  // fastchess app/tests/sprt_test.cpp, "normalized pentanomial" 1 and 2 (LLR to two decimals).
  SprtParams p{0, 2, 0.05, 0.05};
  CHECK(p.lower() == Approx(-2.944439));  // log(0.05 / 0.95)
  CHECK(p.upper() == Approx(2.944439));
  CHECK(sprt_llr({365, 16618, 36029 + 200, 16974, 390}, p) == Approx(2.25).epsilon(0.01));
  CHECK(sprt_llr({127, 4883, 10311 + 401, 5150, 104}, {-1.75, 0.25, 0.05, 0.05}) == Approx(3.01).epsilon(0.01));
  // Its third case, 104 WW pairs and nothing else at elo 0 vs 5, lists 2.94; Van den Bergh's
  // iteration run to convergence in python3 (empty classes as 0.001 pairs) gives 2.09495, which
  // we keep. Mirrored counts give the mirrored test.
  CHECK(sprt_llr({0, 0, 0, 0, 104}, {0, 5, 0.05, 0.05}) == Approx(2.09495).epsilon(1e-4));
  CHECK(sprt_llr({104, 0, 0, 0, 0}, {-5, 0, 0.05, 0.05}) == Approx(-2.09495).epsilon(1e-4));
  CHECK(sprt_result(3.0, p) == SprtResult::H1);
  CHECK(sprt_result(-3.0, p) == SprtResult::H0);
  CHECK(sprt_result(0.0, p) == SprtResult::NONE);
}

TEST_CASE("match: info score parsing", "[match]") {
  CHECK(parse_info_score("info depth 3 score cp -35 pv 7g7f") == -35);
  CHECK(parse_info_score("info depth 3 score mate 3 pv 7g7f") == MATE_SCORE - 3);
  CHECK(parse_info_score("info depth 3 score mate -4") == -(MATE_SCORE - 4));
  CHECK(parse_info_score("info score mate -") == -MATE_SCORE);
  CHECK_FALSE(parse_info_score("info string score cp 5"));
  CHECK_FALSE(parse_info_score("info depth 3 nodes 100"));
}

TEST_CASE("match: info nodes parsing", "[match]") {
  CHECK(parse_info_nodes("info depth 3 nodes 100") == 100);
  CHECK(parse_info_nodes("info depth 3 score cp 5 nodes 1234567890123 nps 9 pv 7g7f") == 1234567890123);
  CHECK_FALSE(parse_info_nodes("info string nodes 5"));
  CHECK_FALSE(parse_info_nodes("info depth 3 pv 7g7f nodes 5"));  // after pv: moves
  CHECK_FALSE(parse_info_nodes("info nodes abc"));
  CHECK_FALSE(parse_info_nodes("info nodes -5"));
  CHECK_FALSE(parse_info_nodes("info nodes 99999999999999999999"));
  CHECK_FALSE(parse_info_nodes("info nodes"));
  CHECK_FALSE(parse_info_nodes("bestmove 7g7f"));
}

TEST_CASE("match: engine spec parsing", "[match]") {
  EngineSpec s;
  REQUIRE_FALSE(parse_engine_spec("cmd=/usr/games/gpsusi name=gps dir=/tmp/x args=\"-a b\" option.Threads=2", s));
  CHECK(s.cmd == "/usr/games/gpsusi");
  CHECK(s.name == "gps");
  CHECK(s.dir == "/tmp/x");
  CHECK(s.args == std::vector<std::string>{"-a", "b"});
  REQUIRE(s.options.size() == 1);
  CHECK(s.options[0] == std::make_pair(std::string("Threads"), std::string("2")));
  REQUIRE_FALSE(parse_engine_spec("cmd=build/jiriki", s));
  CHECK(s.name == "jiriki");
  CHECK(parse_engine_spec("name=x", s));
  CHECK(parse_engine_spec("cmd=x colour=red", s));
  CHECK(s.nodes == 0);
  REQUIRE_FALSE(parse_engine_spec("cmd=x nodes=4190", s));
  CHECK(s.nodes == 4190);
  for (const char* bad :
       {"cmd=x nodes=0", "cmd=x nodes=-3", "cmd=x nodes=12k", "cmd=x nodes=", "cmd=x nodes=99999999999999999999"})
    CHECK_THAT(parse_engine_spec(bad, s).value_or(""), Catch::Matchers::Contains("not a positive count"));
}

TEST_CASE("match: an engine's own node count under --tc nodes", "[match]") {
  // Black searches 300 nodes a move by its nodes= field, White the match's 100: the traffic log
  // shows each side's go.
  TempDir dir("match_nodes");
  EngineSpec spec = fake(dir, "fake", {"7g7f", "3c3d", "resign"});
  EngineSpec own = spec;
  own.nodes = 300;
  TrafficLog log(dir.file("traffic.log"));
  EngineProcess black(own, &log, "b"), white(spec, &log, "w");
  REQUIRE_FALSE(black.start(std::chrono::milliseconds(20000)));
  REQUIRE_FALSE(white.start(std::chrono::milliseconds(20000)));
  GameSettings s = fast_settings();
  s.tc = TimeControl{};
  s.tc.nodes = 100;
  PlayedGame g = play_game(black, white, opening("startpos"), s);
  CHECK(g.verdict.reason == "resign");
  const std::string traffic = slurp(dir.file("traffic.log"));
  CHECK(traffic.find("b < go nodes 300") != std::string::npos);
  CHECK(traffic.find("w < go nodes 100") != std::string::npos);
  CHECK(traffic.find("b < go nodes 100") == std::string::npos);
}

// ---- adjudication through scripted engines ---------------------------------------------------

TEST_CASE("match adjudication: illegal and unparsable moves lose", "[match]") {
  PlayedGame g = play({"7g7f", "5a5b", "2g2f"});  // 5a5b is legal for White: the game goes on
  CHECK(g.verdict.reason == "resign");
  g = play({"7g7f", "3c3d", "5a5b"});  // Black moving White's king
  CHECK(g.verdict.winner == WHITE);
  CHECK(g.verdict.reason == "illegal move 5a5b");
  CHECK(g.record.end == GameEnd::ILLEGAL_MOVE);
  CHECK(g.record.moves.size() == 2);
  g = play({"7g7f", "xyz"});
  CHECK(g.verdict.winner == BLACK);
  CHECK(g.verdict.reason == "unparsable move 'xyz'");
}

TEST_CASE("match adjudication: resignation", "[match]") {
  PlayedGame g = play({"7g7f", "3c3d", "resign"});
  CHECK(g.verdict.winner == WHITE);
  CHECK(g.verdict.reason == "resign");
  CHECK(game_result(g.record) == WHITE_WIN);
}

TEST_CASE("match: each side's moves, time and reported nodes are counted", "[match]") {
  // Black: 7g7f after 100 nodes, 2g2f with no node count; White: 3c3d after 50 nodes, then resigns.
  PlayedGame g = play({"nodes=100 7g7f", "nodes=50 3c3d", "2g2f", "resign"});
  REQUIRE(g.verdict.reason == "resign");
  CHECK(g.search[BLACK].moves == 2);
  CHECK(g.search[BLACK].counted == 1);
  CHECK(g.search[BLACK].nodes == 100);
  CHECK(g.search[WHITE].moves == 2);  // the resignation was an answer too
  CHECK(g.search[WHITE].counted == 1);
  CHECK(g.search[WHITE].nodes == 50);
  CHECK(g.search[BLACK].nodes_per_move() == 100);
  CHECK(g.search[BLACK].nodes_ms <= g.search[BLACK].ms);
  SearchStats sum = g.search[BLACK];
  sum.add(g.search[WHITE]);
  CHECK(sum.moves == 4);
  CHECK(sum.nodes_per_move() == 75);
  REQUIRE(g.search[BLACK].move_nps.size() == 1);  // one rate a move that reported nodes
  CHECK(g.search[BLACK].move_nps[0] == 100 * 1000 / std::max<int64_t>(g.search[BLACK].nodes_ms, 1));
  CHECK(SearchStats{}.nodes_per_second() == 0);  // nothing reported: no rate, no division by zero
  CHECK(SearchStats{}.median_nodes_per_second() == 0);
  SearchStats timed{10, 5000, 10, 30000, 5000, {}};
  CHECK(timed.nodes_per_second() == 6000);
  CHECK(timed.ms_per_move() == 500);
}

TEST_CASE("match: the median of the moves' nodes/s is not moved by a few decided positions", "[match]") {
  // Eight ordinary moves at 1,000 nodes/s, then two in a decided position where the playouts end in
  // proven results without network calls: 40,000 nodes a second.
  SearchStats s;
  for (int i = 0; i < 8; ++i) s.record(500, 500);
  s.record(500, 20000);
  s.record(500, 20000);
  s.record(300, std::nullopt);  // a move without a node count: in the time, not in the rates
  CHECK(s.moves == 11);
  CHECK(s.counted == 10);
  CHECK(s.nodes_per_second() == 1000 * (8 * 500 + 2 * 20000) / (10 * 500));  // 8,800: the mean
  CHECK(s.median_nodes_per_second() == 1000);
  SearchStats odd;
  for (int64_t n : {300, 100, 200}) odd.record(1000, n);
  CHECK(odd.median_nodes_per_second() == 200);
  SearchStats even;
  for (int64_t n : {400, 100, 300, 200}) even.record(1000, n);
  CHECK(even.median_nodes_per_second() == 250);
  even.add(odd);  // 100 100 200 200 300 300 400
  CHECK(even.median_nodes_per_second() == 200);
  SearchStats instant;
  instant.record(0, 7);  // answered within the millisecond: counted as 1 ms
  CHECK(instant.median_nodes_per_second() == 7000);
}

TEST_CASE("match adjudication: a true and a false entering-king declaration", "[match]") {
  // Black's king on 5b with ten pieces in the camp and 28 points (four major pieces, six minor
  // ones, two pawns in hand): the CSA 27-point rule holds.
  PlayedGame g = play({"win"}, fast_settings(), "sfen RRBBGGGGS/S3K4/9/9/9/9/9/9/4k4 b 2P2s4n4l16p 1");
  CHECK(g.verdict.winner == BLACK);
  CHECK(g.verdict.reason == "declaration");
  CHECK(g.record.end == GameEnd::DECLARATION);
  g = play({"7g7f", "win"});
  CHECK(g.verdict.winner == BLACK);
  CHECK(g.verdict.reason == "false declaration");
}

TEST_CASE("match adjudication: checkmate", "[match]") {
  PlayedGame g = play({"G*5b"}, fast_settings(), "sfen 4k4/9/4G4/9/9/9/9/9/4K4 b G2r2b2g4s4n4l18p 1");
  CHECK(g.verdict.winner == BLACK);
  CHECK(g.verdict.reason == "mate");
  CHECK(g.record.end == GameEnd::MATE);
}

TEST_CASE("match adjudication: sennichite is a draw at the fourth occurrence", "[match]") {
  std::vector<std::string> lines = SENNICHITE;
  lines.push_back("7g7f");
  PlayedGame g = play(lines);
  CHECK_FALSE(g.verdict.winner);
  CHECK(g.verdict.reason == "sennichite");
  CHECK(g.record.moves.size() == 12);
  CHECK(game_result(g.record) == DRAW);
}

TEST_CASE("match adjudication: perpetual check loses", "[match]") {
  // Black's rook checks from 5i and 4i while White's king steps between 5a and 4a.
  std::vector<std::string> lines;
  for (int i = 0; i < 3; ++i) lines.insert(lines.end(), {"4i5i", "5a4a", "5i4i", "4a5a"});
  PlayedGame g = play(lines, fast_settings(), "sfen 4k4/9/9/9/9/9/9/9/K4R3 b r2b4g4s4n4l18p 1");
  CHECK(g.verdict.winner == WHITE);
  CHECK(g.verdict.reason == "perpetual check");
  CHECK(g.record.moves.size() == 12);
  CHECK(game_result(g.record) == WHITE_WIN);
}

TEST_CASE("match adjudication: the ply limit draws", "[match]") {
  GameSettings s = fast_settings();
  s.rules.max_plies = 4;
  PlayedGame g = play({"7g7f", "3c3d", "2g2f", "8c8d", "2f2e"}, s);
  CHECK_FALSE(g.verdict.winner);
  CHECK(g.verdict.reason == "max plies");
  CHECK(g.record.moves.size() == 4);
}

TEST_CASE("match adjudication: resign and draw by agreed scores", "[match]") {
  const std::vector<std::string> moves = {"7g7f", "3c3d", "2g2f", "8c8d", "2f2e", "8d8e", "6i7h", "4a3b", "2e2d"};
  GameSettings s = fast_settings();
  s.scores.resign_moves = 2;
  s.scores.resign_cp = 400;
  std::vector<std::string> lines;
  for (size_t i = 0; i < moves.size(); ++i) lines.push_back((i % 2 ? "score=-500 " : "score=500 ") + moves[i]);
  PlayedGame g = play(lines, s);
  // After five moves White (to move) has said -500 twice and Black +500 twice.
  CHECK(g.verdict.winner == BLACK);
  CHECK(g.verdict.reason == "resign adjudication");
  CHECK(g.record.moves.size() == 5);
  CHECK(g.scores[4] == 500);

  s = fast_settings();
  s.scores.draw_moves = 2;
  s.scores.draw_cp = 10;
  s.scores.draw_plies = 6;
  lines.clear();
  for (const auto& m : moves) lines.push_back("score=3 " + m);
  g = play(lines, s);
  CHECK_FALSE(g.verdict.winner);
  CHECK(g.verdict.reason == "draw adjudication");
  CHECK(g.record.moves.size() == 6);
  // One side disagreeing keeps the game going to its scripted end.
  lines[3] = "score=50 " + moves[3];
  lines[5] = "score=50 " + moves[5];
  lines[7] = "score=50 " + moves[7];
  lines.resize(8);
  g = play(lines, s);
  CHECK(g.verdict.reason == "resign");
}

TEST_CASE("match adjudication: a crash and a silent engine lose", "[match]") {
  PlayedGame g = play({"7g7f", "crash 3c3d"});
  CHECK(g.verdict.winner == BLACK);
  CHECK(g.verdict.reason == "crash");
  CHECK(g.failed[WHITE]);
  CHECK_FALSE(g.failed[BLACK]);
  // Black started first: White, started later, must not hold a copy of Black's pipes (the crash
  // would then look like silence, and the reader would wait for an end that never comes).
  g = play({"crash 7g7f"});
  CHECK(g.verdict.reason == "crash");
  CHECK(g.failed[BLACK]);

  GameSettings s = fast_settings();
  s.tc.byoyomi_ms = 500;
  s.grace_ms = 300;
  g = play({"hang"}, s);  // the first move: no other answer has to beat the short limit
  CHECK(g.verdict.winner == WHITE);
  CHECK(g.verdict.reason == "no answer");
  CHECK(g.record.end == GameEnd::TIME_UP);
  CHECK(g.failed[BLACK]);
}

TEST_CASE("match adjudication: time forfeit beyond the margin only", "[match]") {
  // A limit of 500 ms and a first move that comes after 1.5 s (the first, so that no other answer
  // has to beat the short limit on a loaded machine).
  GameSettings s = fast_settings();
  s.tc.byoyomi_ms = 500;
  s.grace_ms = 10000;  // the late answer comes 1 s after the forfeit
  const std::vector<std::string> lines = {"sleep=1.5 7g7f", "3c3d", "resign"};
  PlayedGame g = play(lines, s);
  CHECK(g.verdict.winner == WHITE);
  CHECK(g.verdict.reason == "time forfeit");
  CHECK(g.record.moves.empty());
  CHECK_FALSE(g.failed[BLACK]);  // it answered stop
  s.margin_ms = 5000;
  g = play(lines, s);
  CHECK(g.verdict.reason == "resign");
  CHECK(g.record.moves.size() == 2);
  CHECK(g.move_ms[0] >= 1500);
  // Fischer: 500 ms on the clock, so a 1.5 s move loses without a margin.
  s.margin_ms = 0;
  s.tc = {500, 100, 0, 0};
  g = play(lines, s);
  CHECK(g.verdict.reason == "time forfeit");
}

// ---- the tournament --------------------------------------------------------------------------

TEST_CASE("match tournament: pairings of a match, a gauntlet and a round robin", "[match]") {
  using P = std::vector<std::pair<int, int>>;
  CHECK(make_pairings(2, false) == P{{0, 1}});
  CHECK(make_pairings(3, true) == P{{0, 1}, {0, 2}});
  CHECK(make_pairings(3, false) == P{{0, 1}, {0, 2}, {1, 2}});
}

TEST_CASE("match tournament: round robin with colours swapped in every pair", "[match]") {
  TempDir dir("match_rr");
  TournamentConfig c;
  // Every engine resigns at once: Black loses every game, so each pair splits 1-1.
  std::vector<EngineSpec> engines;
  for (const char* n : {"a", "b", "c"}) engines.push_back(fake(dir, n, {"resign", "resign"}));
  TournamentResult r = round_robin(dir, engines, c);
  CHECK(r.games == 12);
  REQUIRE(r.pairings.size() == 3);
  for (const auto& p : r.pairings) {
    CHECK(p.wins == 2);
    CHECK(p.losses == 2);
    CHECK(p.penta == Penta{0, 0, 2, 0, 0});
  }
  // games.jsonl: within each pair the two games have the colours swapped.
  std::ifstream in(dir.file("out/games.jsonl"));
  std::map<std::pair<int64_t, std::string>, std::vector<std::string>> blacks;
  int lines = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    auto j = nlohmann::json::parse(line);
    CHECK(j["result"] == "white");
    CHECK(j["reason"] == "resign");
    std::string players = std::min(j["black"].get<std::string>(), j["white"].get<std::string>()) +
                          std::max(j["black"].get<std::string>(), j["white"].get<std::string>());
    blacks[{j["pair"].get<int64_t>(), players}].push_back(j["black"]);
  }
  CHECK(lines == 12);
  CHECK(blacks.size() == 6);
  for (const auto& [key, b] : blacks) {
    REQUIRE(b.size() == 2);
    CHECK(b[0] != b[1]);
  }
  auto summary = summary_json(c, r);
  CHECK(summary["crosstable"]["points"][0][1] == 2.0);
  CHECK(summary["crosstable"]["games"][2][1] == 4);
  // Each engine played 8 games, 4 as Black, and answered only as Black (its resignation), with no
  // node counts.
  for (const char* n : {"a", "b", "c"}) {
    CHECK(summary["search"][n]["moves"] == 4);
    CHECK(summary["search"][n]["moves_with_nodes"] == 0);
  }
  CHECK_THAT(final_table(c, r), Catch::Contains("a thought ") && Catch::Contains("reported no nodes (4 moves)"));
}

TEST_CASE("match tournament: a crashed engine is restarted and the match goes on", "[match]") {
  TempDir dir("match_crash");
  TournamentConfig c;
  c.engines = {fake(dir, "crasher", {"crash-once 7g7f", "3c3d", "resign"}),
               fake(dir, "steady", {"7g7f", "3c3d", "resign"})};
  c.games = 4;
  c.progress = false;
  c.game = fast_settings();
  TournamentResult r = run_tournament(c);
  INFO(r.error);
  REQUIRE(r.error.empty());
  CHECK(r.games == 4);
  CHECK(r.faults[0].crash == 1);
  CHECK(r.faults[1].crash == 0);
  // Game 1 is lost by the crash; games 2-4 end with Black resigning at ply 2: "crasher" wins 2 and 4.
  CHECK(r.pairings[0].wins == 2);
  CHECK(r.pairings[0].losses == 2);
}

TEST_CASE("match tournament: --cpus-per-game gives each game slot's engines CPUs of their own", "[match]") {
  // The runs of CPUs, in the order of the runner's own, wrapping around.
  CHECK(cpus_for_slot({0, 1, 2, 3, 8, 9}, 2, 0) == std::vector<int>{0, 1});
  CHECK(cpus_for_slot({0, 1, 2, 3, 8, 9}, 2, 2) == std::vector<int>{8, 9});
  CHECK(cpus_for_slot({0, 1, 2, 3, 8, 9}, 2, 3) == std::vector<int>{0, 1});
  CHECK(cpus_for_slot({4, 5, 6}, 2, 1) == std::vector<int>{6, 4});
  CHECK(cpus_for_slot({0, 1}, 0, 1).empty());

  // Real engine processes: each slot's engines report the one CPU they were given.
  const std::vector<int> allowed = jiriki::affinity_cpus();
  REQUIRE(!allowed.empty());
  TempDir dir("match_cpus");
  TournamentConfig c;
  c.engines = {fake(dir, "a", {"7g7f", "3c3d", "resign"}), fake(dir, "b", {"7g7f", "3c3d", "resign"})};
  c.concurrency = int(std::min<size_t>(2, allowed.size()));
  c.cpus_per_game = 1;
  c.games = 2 * c.concurrency;
  c.progress = false;
  c.game = fast_settings();
  c.log = dir.file("traffic.log");
  TournamentResult r = run_tournament(c);
  INFO(r.error);
  REQUIRE(r.error.empty());
  CHECK(r.games == c.games);
  auto reported = reported_cpus(c.log);
  for (int slot = 0; slot < c.concurrency; ++slot)
    for (const std::string engine : {"a", "b"}) {
      const std::string label = engine + "#" + std::to_string(slot);
      INFO(label);
      CHECK(reported[label] == std::set<std::string>{std::to_string(allowed[size_t(slot)])});
    }
  // The runner's own threads keep every CPU they had.
  CHECK(jiriki::affinity_cpus() == allowed);
}

TEST_CASE("match tournament: the SPRT stops the match once decided", "[match]") {
  TempDir dir("match_sprt");
  TournamentConfig c;
  c.engines = {fake(dir, "strong", {"7g7f", "3c3d"}), fake(dir, "weak", {})};
  c.games = 400;
  c.concurrency = 2;
  c.progress = false;
  c.game = fast_settings();
  c.sprt = SprtParams{0, 100, 0.05, 0.05};
  c.records.dir = dir.file("out");
  TournamentResult r = run_tournament(c);
  INFO(r.error << slurp(dir.file("out/games.jsonl")));
  REQUIRE(r.error.empty());
  CHECK(r.sprt == SprtResult::H1);
  CHECK(r.llr >= c.sprt->upper());
  CHECK(r.games < 100);
  CHECK(r.pairings[0].losses == 0);
  CHECK(r.pairings[0].penta[4] * 2 + 2 >= r.games);  // pairs finished, plus at most one in flight per thread
}

TEST_CASE("match tournament: losses by fault are counted by their cause", "[match]") {
  TempDir dir("match_faults");
  TournamentConfig c;
  // "bad" answers an unparsable third move (as Black); "slow" answers after 0.35 s, past the 0.2 s
  // byoyomi but within the grace after `stop`: a time forfeit for each of its 4 games. "good"
  // resigns its third move (as Black), which is no fault.
  c.engines = {fake(dir, "good", {"7g7f", "3c3d", "resign"}), fake(dir, "bad", {"7g7f", "3c3d", "9z9z"}),
               fake(dir, "slow", {"sleep=0.35 7g7f", "sleep=0.35 3c3d", "resign"})};
  c.games = 2;
  c.progress = false;
  c.game = fast_settings();
  c.game.tc.byoyomi_ms = 200;
  c.game.grace_ms = 2000;
  TournamentResult r = run_tournament(c);
  INFO(r.error);
  REQUIRE(r.error.empty());
  REQUIRE(r.games == 6);
  CHECK(r.faults[0].time + r.faults[0].illegal + r.faults[0].crash + r.faults[0].no_answer == 0);
  CHECK(r.faults[1].illegal == 1);
  CHECK(r.faults[1].time + r.faults[1].crash + r.faults[1].no_answer == 0);
  CHECK(r.faults[2].time == 4);
  CHECK(r.faults[2].illegal + r.faults[2].crash + r.faults[2].no_answer == 0);
}

TEST_CASE("match tournament: --start-within starts no pair late and plays out every pair it started", "[match]") {
  TempDir dir("match_start_within");
  TournamentConfig c;
  // Each game lasts at least 0.4 s (two moves of 0.2 s, then Black resigns): 40 games at 2 at once
  // take 8 s or more, far beyond the 1 s in which pairs may start.
  std::vector<std::string> slow = {"sleep=0.2 7g7f", "sleep=0.2 3c3d", "resign"};
  c.engines = {fake(dir, "p", slow), fake(dir, "q", slow)};
  c.games = 40;
  c.concurrency = 2;
  c.progress = false;
  c.game = fast_settings();
  c.start_within_ms = 1000;
  TournamentResult r = run_tournament(c);
  INFO(r.error);
  REQUIRE(r.error.empty());
  CHECK(r.games >= 2);
  CHECK(r.games < 40);
  const Penta& penta = r.pairings[0].penta;
  CHECK(2 * (penta[0] + penta[1] + penta[2] + penta[3] + penta[4]) == r.games);  // no pair left half played
  CHECK(penta[2] * 2 == r.games);  // Black resigns every game: each pair splits 1-1
}

TEST_CASE("match tournament: records in CSA, KIF, hcpe3 and hcpe with the engines' scores", "[match]") {
  TempDir dir("match_records");
  TournamentConfig c;
  std::vector<std::string> lines = {"score=120 7g7f", "mate=-5 3c3d", "score=-30 2g2f", "resign"};
  c.engines = {fake(dir, "x", lines), fake(dir, "y", lines)};
  c.games = 2;
  c.progress = false;
  c.game = fast_settings();
  c.openings = {opening("startpos moves 5g5f")};
  c.records = {dir.file("out"), true, dir.file("out/games.hcpe3"), dir.file("out/games.hcpe")};
  TournamentResult r = run_tournament(c);
  REQUIRE(r.games == 2);
  GameRecord rec;
  std::string csa = slurp(dir.file("out/csa/000001.csa"));
  REQUIRE_FALSE(read_csa(csa, rec));
  CHECK(rec.moves.size() == 3);  // the opening's move and two engine moves, then White resigns
  CHECK(game_result(rec) == BLACK_WIN);
  CHECK(csa.find("'time 0.") != std::string::npos);
  CHECK(csa.find("score mate -5") != std::string::npos);
  GameRecord kif;
  REQUIRE_FALSE(read_kif(slurp(dir.file("out/kif/000002.kif")), kif));
  CHECK(kif.moves == rec.moves);  // the second game of the pair: same opening and script, colours swapped
  CHECK(kif.black == "y");
  std::vector<Hcpe3Game> games;
  REQUIRE_FALSE(read_hcpe3_file(dir.file("out/games.hcpe3"), games));
  REQUIRE(games.size() == 2);
  REQUIRE(games[0].moves.size() == 3);
  CHECK(games[0].moves[0].candidates.empty());  // the opening's move
  // Ply 1 (White, script line 1): mate -5 from its own view; ply 2 (Black): -30.
  CHECK(games[0].moves[1].eval == -(MATE_SCORE - 5));
  CHECK(games[0].moves[2].eval == -30);
  REQUIRE(games[0].moves[1].candidates.size() == 1);
  CHECK(games[0].moves[1].candidates[0].visits == 1);
  std::vector<HcpeRecord> positions;
  REQUIRE_FALSE(read_hcpe_file(dir.file("out/games.hcpe"), positions));
  CHECK(positions.size() == 4);  // two engine moves per game
  CHECK(positions[1].eval == -30);
}

// ---- summaries of games.jsonl ----------------------------------------------------------------

TEST_CASE("match summaries: games.jsonl read back gives the runner's own figures", "[match]") {
  TempDir dir("match_summary");
  TournamentConfig c;
  // "a" crashes once (its first game), then every engine answers two moves with node counts and
  // resigns: a round robin with results, pairs, a fault and search figures to compare.
  TournamentResult live = round_robin(dir,
                                      {fake(dir, "a", {"crash-once nodes=700 7g7f", "nodes=500 3c3d", "resign"}),
                                       fake(dir, "b", {"nodes=300 7g7f", "nodes=200 3c3d", "resign"}),
                                       fake(dir, "c", {"nodes=100 7g7f", "3c3d", "resign"})},
                                      c);
  REQUIRE(live.games == 12);
  REQUIRE(live.faults[0].crash == 1);

  // Each game thread's instances: together they are the engine's figures.
  REQUIRE(live.instances.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    INFO(c.engines[i].name);
    CHECK(live.instances[i].size() <= 2);  // 2 game threads
    SearchStats sum;
    for (const SearchStats& t : live.instances[i]) sum.add(t);
    CHECK(sum.moves == live.search[i].moves);
    CHECK(sum.nodes == live.search[i].nodes);
  }
  const auto live_json = summary_json(c, live);
  size_t b_instances = 0;
  for (const SearchStats& t : live.instances[1]) b_instances += t.moves > 0;
  CHECK(live_json["search"]["b"]["instances_nodes_per_second"].size() == b_instances);

  GameFilesSummary s = summarize_game_files({dir.file("out/games.jsonl")});
  CHECK(s.result.instances.empty());  // a file does not say which thread played a game
  CHECK(s.estimated_games == 0);
  REQUIRE(s.config.engines.size() == 3);
  CHECK(s.config.engines[0].name == "a");  // game 1: the first engine as Black
  CHECK(s.result.games == 12);
  REQUIRE(s.result.pairings.size() == live.pairings.size());
  for (const auto& lp : live.pairings) {
    const std::string first = c.engines[lp.first].name, second = c.engines[lp.second].name;
    bool found = false;
    for (const auto& sp : s.result.pairings) {
      const std::string f = s.config.engines[sp.first].name, g = s.config.engines[sp.second].name;
      if (f == first && g == second) {
        found = true;
        CHECK(sp.wins == lp.wins);
        CHECK(sp.losses == lp.losses);
        CHECK(sp.draws == lp.draws);
        CHECK(sp.penta == lp.penta);
      }
    }
    CHECK(found);
  }
  for (size_t i = 0; i < c.engines.size(); ++i)
    for (size_t k = 0; k < s.config.engines.size(); ++k)
      if (s.config.engines[k].name == c.engines[i].name) {
        INFO(c.engines[i].name);
        CHECK(s.result.faults[k].crash == live.faults[i].crash);
        CHECK(s.result.search[k].moves == live.search[i].moves);
        CHECK(s.result.search[k].ms == live.search[i].ms);
        CHECK(s.result.search[k].counted == live.search[i].counted);
        CHECK(s.result.search[k].nodes == live.search[i].nodes);
        CHECK(s.result.search[k].nodes_ms == live.search[i].nodes_ms);
        CHECK(s.result.search[k].move_nps.size() == size_t(live.search[i].counted));  // read back, every rate
        CHECK(s.result.search[k].median_nodes_per_second() == live.search[i].median_nodes_per_second());
      }
}

TEST_CASE("match summaries: several files, pairs kept per file, and lines without move counts", "[match]") {
  TempDir dir("match_summary_files");
  // Lines as runs before the answered-move counts wrote them. In each file pair 1 has one game only:
  // "x" wins the first file's, "y" the second's; counted as one pair they would make a WL pair.
  const std::string common =
      R"("opening":"startpos moves 7g7f","opening_plies":1,"plies":4,"reason":"resign",)"
      R"("time_ms":{"black":300,"white":500},"nodes":{"black":1000,"white":0},"csa":"csa/000001.csa"})";
  std::ofstream(dir.file("one.jsonl")) << R"({"game":1,"pair":1,"black":"x","white":"y","result":"black","winner":"x",)"
                                       << common << "\n";
  std::ofstream(dir.file("two.jsonl")) << "\n"
                                       << R"({"game":1,"pair":1,"black":"y","white":"x","result":"black","winner":"y",)"
                                       << common << "\n";
  GameFilesSummary s = summarize_game_files({dir.file("one.jsonl"), dir.file("two.jsonl")});
  REQUIRE(s.config.engines.size() == 2);
  CHECK(s.config.engines[0].name == "x");
  CHECK(s.estimated_games == 2);
  REQUIRE(s.result.pairings.size() == 1);
  CHECK(s.result.pairings[0].wins == 1);
  CHECK(s.result.pairings[0].losses == 1);
  CHECK(s.result.pairings[0].penta == Penta{0, 0, 0, 0, 0});  // no pair finished in either file
  // After the opening's one ply White moved first: 3 plies are White 2, Black 1, and White's
  // resignation was one more answer. x was Black once and White once: 1 + 3 moves.
  CHECK(s.result.search[0].moves == 4);
  CHECK(s.result.search[1].moves == 4);
  CHECK(s.result.search[0].ms == 800);
  CHECK(s.result.search[0].nodes == 1000);
  CHECK(s.result.search[0].counted == 1);  // only its game as Black reported nodes
  CHECK(s.result.search[0].nodes_ms == 300);
  CHECK(s.result.search[0].move_nps.empty());  // those lines have no moves' rates: no median
  CHECK_THAT(final_table(s.config, s.result), !Catch::Contains("median"));

  // A line with the moves' rates beside those without: the median is of the moves that have one,
  // and the table says how many those are.
  std::ofstream(dir.file("three.jsonl"))
      << R"({"game":1,"pair":1,"black":"x","white":"y","result":"black","winner":"x","opening":"startpos moves 7g7f",)"
      << R"("opening_plies":1,"plies":3,"reason":"resign","time_ms":{"black":200,"white":100},)"
      << R"("nodes":{"black":300,"white":0},"moves":{"black":1,"white":2},"nodes_moves":{"black":1,"white":0},)"
      << R"("nodes_ms":{"black":200,"white":0},"nps_moves":{"black":[1500],"white":[]},"csa":"csa/000001.csa"})"
      << "\n";
  s = summarize_game_files({dir.file("one.jsonl"), dir.file("three.jsonl")});
  CHECK(s.result.search[0].counted == 2);
  CHECK(s.result.search[0].median_nodes_per_second() == 1500);
  CHECK_THAT(final_table(s.config, s.result),
             Catch::Contains("x thought") && Catch::Contains("median of its 1 moves with rates 1500 nodes/s"));
  s = summarize_game_files({dir.file("three.jsonl")});
  CHECK_THAT(final_table(s.config, s.result), Catch::Contains("median of its moves 1500 nodes/s"));

  std::ofstream(dir.file("bad.jsonl")) << R"({"game":1,"pair":1,"black":"x","white":"y","result":"black","winner":"x",)"
                                       << common << "\n{\"game\":2}\n";
  CHECK_THROWS_WITH(summarize_game_files({dir.file("bad.jsonl")}), Catch::Contains("bad.jsonl:2: not a game line"));
  CHECK_THROWS_WITH(summarize_game_files({dir.file("missing.jsonl")}), Catch::Contains("cannot read"));
  std::ofstream(dir.file("empty.jsonl")) << "";
  CHECK_THROWS_WITH(summarize_game_files({dir.file("empty.jsonl")}), Catch::Contains("no games"));
}

TEST_CASE("match summaries: an SPRT continued over runs, in the order the games were written", "[match]") {
  TempDir dir("match_summary_sprt");
  const SprtParams sprt{.elo0 = 0, .elo1 = 50, .alpha = 0.05, .beta = 0.05};
  // The pairs of x winning both games it takes to accept H1, from the counts alone.
  int needed = 1;
  while (sprt_llr(Penta{0, 0, 0, 0, needed}, sprt) < sprt.upper()) ++needed;
  REQUIRE(needed <= 20);
  auto line = [](int game, int pair, bool x_black, bool x_wins) {
    const char* b = x_black ? "x" : "y";
    const char* w = x_black ? "y" : "x";
    return "{\"game\":" + std::to_string(game) + ",\"pair\":" + std::to_string(pair) + ",\"black\":\"" + b +
           "\",\"white\":\"" + w + "\",\"result\":\"" + (x_black == x_wins ? "black" : "white") +
           "\",\"opening\":\"startpos\",\"opening_plies\":0,\"plies\":10,\"reason\":\"resign\","
           "\"time_ms\":{\"black\":1,\"white\":1},\"nodes\":{\"black\":0,\"white\":0},\"csa\":\"c.csa\"}\n";
  };
  // The first run: 20 pairs that x wins, written two pairs interleaved (pair 1's first game, pair
  // 2's first, pair 1's second, pair 2's second, ...): pairs end at lines 3, 4, 7, 8, 11, 12, ...
  {
    std::ofstream one(dir.file("one.jsonl"));
    for (int p = 1; p <= 20; p += 2)
      one << line(2 * p - 1, p, true, true) << line(2 * p + 1, p + 1, true, true) << line(2 * p, p, false, true)
          << line(2 * p + 2, p + 1, false, true);
    // The second run: 60 pairs that x loses, which bring the LLR back down.
    std::ofstream two(dir.file("two.jsonl"));
    for (int p = 1; p <= 60; ++p) two << line(2 * p - 1, p, true, false) << line(2 * p, p, false, false);
  }
  const int64_t decided_at = 4 * ((needed - 1) / 2) + 3 + (needed - 1) % 2;  // the line where pair `needed` ends
  GameFilesSummary s = summarize_game_files({dir.file("one.jsonl"), dir.file("two.jsonl")}, sprt);
  CHECK(s.result.games == 160);
  REQUIRE(s.result.pairings.size() == 1);
  CHECK(s.result.pairings[0].penta == Penta{60, 0, 0, 0, 20});
  CHECK(s.result.sprt == SprtResult::H1);
  CHECK(s.sprt_decided_games == decided_at);
  CHECK(s.result.llr == Approx(sprt_llr(Penta{0, 0, 0, 0, needed}, sprt)));
  CHECK(summary_json(s.config, s.result)["sprt"]["result"] == "H1");
  // The runs the other way round: the losses first decide H0 before any win.
  GameFilesSummary r = summarize_game_files({dir.file("two.jsonl"), dir.file("one.jsonl")}, sprt);
  CHECK(r.result.sprt == SprtResult::H0);
  CHECK(r.sprt_decided_games > 0);
  CHECK(r.sprt_decided_games <= 120);
  CHECK(r.sprt_decided_games % 2 == 0);  // written pair by pair: a pair ends at an even line
  // Without a bound crossed: the LLR of all the games, no decision.
  GameFilesSummary u =
      summarize_game_files({dir.file("one.jsonl")}, SprtParams{.elo0 = 0, .elo1 = 1, .alpha = 0.01, .beta = 0.01});
  CHECK(u.result.sprt == SprtResult::NONE);
  CHECK(u.sprt_decided_games == 0);
  CHECK(u.result.llr ==
        Approx(sprt_llr(Penta{0, 0, 0, 0, 20}, SprtParams{.elo0 = 0, .elo1 = 1, .alpha = 0.01, .beta = 0.01})));
  // Three engines: no SPRT.
  std::ofstream(dir.file("three.jsonl"))
      << line(1, 1, true, true)
      << "{\"game\":2,\"pair\":1,\"black\":\"z\",\"white\":\"x\",\"result\":\"draw\",\"opening\":\"startpos\","
         "\"opening_plies\":0,\"plies\":10,\"reason\":\"resign\",\"time_ms\":{\"black\":1,\"white\":1},\"nodes\":{"
         "\"black\":0,\"white\":0},\"csa\":\"c.csa\"}\n";
  CHECK_THROWS_WITH(summarize_game_files({dir.file("three.jsonl")}, sprt), Catch::Contains("exactly two engines"));
}

// ---- the command -----------------------------------------------------------------------------

TEST_CASE("match command: exit codes and summary.json", "[match]") {
  TempDir dir("match_cli");
  fake(dir, "strong", {"7g7f", "3c3d"});
  fake(dir, "weak", {});
  const std::string bin = JIRIKI_BINARY;
  const std::string strong = "--engine \"cmd=" + FAKE + " name=strong args=" + dir.file("strong.script") + "\"";
  const std::string weak = "--engine \"cmd=" + FAKE + " name=weak args=" + dir.file("weak.script") + "\"";
  const std::string quiet = " >/dev/null 2>&1";
  CHECK(run(bin + " match " + strong + " " + weak + " --tc bogus=1" + quiet) == 2);
  // An engine's nodes= needs a node-count time control.
  const std::string own_nodes =
      "--engine \"cmd=" + FAKE + " name=own nodes=300 args=" + dir.file("strong.script") + "\"";
  CHECK(run(bin + " match " + own_nodes + " " + weak + " --tc byoyomi=100" + quiet) == 2);
  CHECK(run(bin + " match " + own_nodes + " " + weak + " --tc nodes=100 --games 2" + quiet) == 0);
  CHECK(run(bin + " match " + strong + quiet) == 2);
  CHECK(run(bin + " match --help" + quiet) == 0);
  CHECK(run(bin + " match " + strong + " --engine \"cmd=/nonexistent/engine name=x\" --games 2" + quiet) == 1);
  const std::string sprt =
      " --games 200 --concurrency 2 --tc byoyomi=10000 --sprt \"elo0=0 elo1=100 alpha=0.05 beta=0.05\"";
  CHECK(run(bin + " match " + strong + " " + weak + sprt + " --out " + dir.file("h1") + quiet) == 10);
  CHECK(run(bin + " match " + weak + " " + strong + sprt + quiet) == 11);
  CHECK(run(bin + " match " + strong + " " + weak + " --games 2 --log " + dir.file("traffic.log") + quiet) == 0);
  const std::string log = slurp(dir.file("traffic.log"));
  CHECK(log.find(" strong#0 < usi\n") != std::string::npos);
  CHECK(log.find(" weak#0 > bestmove resign\n") != std::string::npos);
  auto j = nlohmann::json::parse(slurp(dir.file("h1/summary.json")));
  CHECK(j["engines"] == nlohmann::json({"strong", "weak"}));
  CHECK(j["sprt"]["result"] == "H1");
  CHECK(j["wins"] == j["games"]);
  CHECK(j["losses"] == 0);
  CHECK(j["elo"].is_null());  // a score of 1: infinite
  // --summarize: the same figures from the run's games.jsonl, without playing.
  const std::string games = " --summarize " + dir.file("h1/games.jsonl");
  CHECK(run(bin + " match" + games + " " + strong + quiet) == 2);
  CHECK(run(bin + " match --summarize " + dir.file("none.jsonl") + quiet) == 1);
  CHECK(run(bin + " match" + games + " --out " + dir.file("again") + quiet) == 0);
  auto again = nlohmann::json::parse(slurp(dir.file("again/summary.json")));
  CHECK(again["wins"] == j["wins"]);
  CHECK(again["games"] == j["games"]);
  CHECK(again["penta"] == j["penta"]);
  CHECK(j["penta"][4].get<int64_t>() * 2 <= j["games"].get<int64_t>());
  CHECK(j["los"] == 1.0);
}

TEST_CASE("match command: a write that fails (a full disk) keeps the games written, says why, exits 1", "[match]") {
  // The full disk is a file size limit (RLIMIT_FSIZE, `ulimit -f` in 512-byte blocks) with SIGXFSZ
  // ignored, so that a write past it fails with EFBIG as one on a full disk fails with ENOSPC. The
  // match aborted (terminate, exit 134, no summary.json); with --hcpe3 it exited 0 with an empty file.
  TempDir dir("match_full");
  fake(dir, "strong", {"7g7f", "3c3d"});
  fake(dir, "weak", {});
  const std::string engines = " --engine \"cmd=" + FAKE + " name=strong args=" + dir.file("strong.script") +
                              "\" --engine \"cmd=" + FAKE + " name=weak args=" + dir.file("weak.script") +
                              "\" --games 16 --tc byoyomi=10000";
  // The limit binds the match alone: its stderr goes through a pipe to a file written outside it.
  auto limited = [&](int blocks, const std::string& options, const std::string& err) {
    const std::string rc = err + ".rc";
    run("( ( trap '' XFSZ; ulimit -f " + std::to_string(blocks) + "; exec " + JIRIKI_BINARY + " match" + engines +
        options + " ); echo $? > " + rc + " ) 2>&1 >/dev/null | cat > " + err);
    return std::stoi(slurp(rc));
  };
  // games.jsonl (about 340 bytes a game) reaches 2048 bytes at the 7th game.
  CHECK(limited(4, " --out " + dir.file("out"), dir.file("out.err")) == 1);
  std::string err = slurp(dir.file("out.err"));
  CHECK_THAT(
      err, Catch::Contains("games.jsonl") && Catch::Contains("File too large") && Catch::Contains("the match stopped"));
  // Every line kept is whole and its CSA file is there; summary.json counts at least those games.
  std::ifstream games(dir.file("out/games.jsonl"));
  int lines = 0;
  for (std::string l; std::getline(games, l); ++lines) {
    auto j = nlohmann::json::parse(l);
    CHECK(std::filesystem::exists(dir.file("out/" + j["csa"].get<std::string>())));
  }
  CHECK(lines >= 1);
  CHECK(lines < 16);
  auto summary = nlohmann::json::parse(slurp(dir.file("out/summary.json")));
  CHECK(summary["games"].get<int>() >= lines);

  // --hcpe3 alone: the file keeps whole games only (41 bytes each here, 512 allowed).
  CHECK(limited(1, " --hcpe3 " + dir.file("g.hcpe3"), dir.file("hcpe3.err")) == 1);
  CHECK_THAT(slurp(dir.file("hcpe3.err")), Catch::Contains("g.hcpe3") && Catch::Contains("File too large"));
  std::vector<Hcpe3Game> read;
  CHECK_FALSE(read_hcpe3_file(dir.file("g.hcpe3"), read));
  CHECK(read.size() >= 1);
  CHECK(read.size() < 16);
  // --hcpe with nothing allowed: the first game's write fails and says so.
  CHECK(limited(0, " --hcpe " + dir.file("g.hcpe"), dir.file("hcpe.err")) == 1);
  CHECK_THAT(slurp(dir.file("hcpe.err")), Catch::Contains("g.hcpe") && Catch::Contains("File too large"));
  CHECK(std::filesystem::file_size(dir.file("g.hcpe")) == 0);
}

TEST_CASE("match command: --concurrency above the games, Ctrl-C, and a killed run's cut last line", "[match]") {
  TempDir dir("match_misc");
  fake(dir, "strong", {"7g7f", "3c3d"});
  fake(dir, "weak", {});
  fake(dir, "slow", {"hang"});
  const std::string bin = JIRIKI_BINARY;
  const std::string strong = " --engine \"cmd=" + FAKE + " name=strong args=" + dir.file("strong.script") + "\"";
  const std::string weak = " --engine \"cmd=" + FAKE + " name=weak args=" + dir.file("weak.script") + "\"";
  // 100000 game threads for 2 games aborted the runner.
  CHECK(run(bin + " match" + strong + weak + " --games 2 --concurrency 100000 --out " + dir.file("c") +
            " >/dev/null 2>" + dir.file("c.err")) == 0);
  CHECK_THAT(slurp(dir.file("c.err")), Catch::Contains("--concurrency lowered to 2"));
  // Ctrl-C: 130, as the other long commands (it was 1). SIGINT goes once the engine thinks.
  const std::string slow = " --engine \"cmd=" + FAKE + " name=slow args=" + dir.file("slow.script") + "\"";
  const std::string log = dir.file("traffic.log");
  const std::string cmd = "sh -c '" + bin + " match" + slow + weak +
                          " --games 2 --tc byoyomi=60000 --timeout 60000 --log " + log +
                          " >/dev/null 2>&1 & pid=$!; i=0; while ! grep -q \"< go\" " + log +
                          " 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; kill -INT $pid; wait $pid'";
  auto started = std::chrono::steady_clock::now();
  const int status = std::system(cmd.c_str());
  CHECK(WEXITSTATUS(status) == 130);
  // The wait for the move ended on the interrupt, not at the move's 60 s deadline.
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(30));
  // The same while an engine starts up: one that takes 100 s to answer isready (engines starting on
  // busy cores can take a minute) does not hold the runner for its start-up time-out of 60 s.
  const std::string starting = dir.file("starting.sh");
  std::ofstream(starting) << "#!/usr/bin/env bash\nwhile IFS= read -r line; do case \"$line\" in\n"
                          << "  usi) echo 'id name starting'; echo usiok ;;\n  isready) sleep 100; echo readyok ;;\n"
                          << "  quit) exit 0 ;;\nesac; done\n";
  REQUIRE(run("chmod +x " + starting) == 0);
  const std::string start_log = dir.file("start.log");
  const std::string start_cmd =
      "sh -c '" + bin + " match --engine \"cmd=" + starting + " name=starting\"" + weak +
      " --games 2 --tc byoyomi=1000 --timeout 60000 --log " + start_log +
      " >/dev/null 2>&1 & pid=$!; i=0; while ! grep -q \"< isready\" " + start_log +
      " 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; kill -INT $pid; wait $pid'";
  started = std::chrono::steady_clock::now();
  CHECK(WEXITSTATUS(std::system(start_cmd.c_str())) == 130);
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(30));
  // A killed run's games.jsonl ends in a cut line: --summarize leaves it out and says so.
  std::string text = slurp(dir.file("c/games.jsonl"));
  REQUIRE(!text.empty());
  std::ofstream(dir.file("cut.jsonl"), std::ios::binary) << text << text.substr(0, 40);
  CHECK(run(bin + " match --summarize " + dir.file("cut.jsonl") + " >/dev/null 2>" + dir.file("cut.err")) == 0);
  CHECK_THAT(slurp(dir.file("cut.err")), Catch::Contains("cut.jsonl:3: the last line is cut short"));
  // A bad line that is not the last is still an error.
  std::ofstream(dir.file("bad.jsonl"), std::ios::binary) << text.substr(0, 40) << "\n" << text;
  CHECK(run(bin + " match --summarize " + dir.file("bad.jsonl") + " >/dev/null 2>&1") == 1);
}
