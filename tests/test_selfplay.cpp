// Self-play: the shared playout steps over several trees in one batch, and `jiriki selfplay` run
// as a child process with a tiny network. Every game is replayed and judged with the rules core
// alone (Position::repetition, legal_moves, declaration_win), independently of the code that
// ended it; records are read back in both formats; runs are repeated for determinism and killed
// mid-way for durability.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "engine/search/playout.h"
#include "engine/search/search.h"
#include "nn/model_file.h"
#include "selfplay/openings.h"
#include "selfplay/selfplay.h"
#include "shogi/csa.h"
#include "shogi/hcpe3.h"
#include "shogi/movegen.h"
#include "tests/temp_dir.h"

using namespace jiriki;
using jiriki::testing::TempDir;
namespace fs = std::filesystem;

namespace {

constexpr const char* BACKEND = "cpu";
constexpr nn::BackendKind BACKEND_KIND = nn::BackendKind::CPU;

nn::Model tiny_model() {
  nn::Architecture a;
  a.blocks = 1;
  a.channels = 8;
  nn::Model m(a);
  nn::init_model(m, 11);
  return m;
}

// The model file every CLI test uses.
std::string tiny_model_file() {
  static const TempDir dir("selfplay_model");  // removed at exit
  static const std::string path = [] {
    std::string p = dir.file("tiny.jnn");
    nn::save_model(tiny_model(), p);
    return p;
  }();
  return path;
}

int run_cli(const std::string& args) {
  int rc = std::system((std::string(JIRIKI_BINARY) + " selfplay " + args + " > /dev/null 2>&1").c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::vector<fs::path> files_with(const fs::path& dir, const std::string& ext) {
  std::vector<fs::path> out;
  if (fs::exists(dir))
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file() && e.path().extension() == ext) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::string bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Every game of every hcpe3 file of `dir`, in file order; each file must parse completely (which
// replays every move and candidate and checks it legal) and write back to the same bytes.
std::vector<Hcpe3Game> read_games(const fs::path& dir) {
  std::vector<Hcpe3Game> all;
  for (const fs::path& f : files_with(dir, ".hcpe3")) {
    INFO(f);
    std::vector<Hcpe3Game> games;
    REQUIRE_FALSE(read_hcpe3_file(f.string(), games));
    CHECK_FALSE(games.empty());
    std::vector<uint8_t> again;
    for (const auto& g : games) append_hcpe3(g, again);
    CHECK(std::string(again.begin(), again.end()) == bytes_of(f));
    all.insert(all.end(), games.begin(), games.end());
  }
  return all;
}

bool game_over_by_rules(const Position& pos, int max_plies) {
  return pos.repetition(3) != Repetition::NONE || legal_moves(pos).size() == 0 ||
         pos.declaration_win(EnteringKingRule::POINT27) || pos.plies_from_root() >= max_plies;
}

// Replays a game and judges its end with the rules core: nothing ended it earlier, and its
// result and flags are what its final position says. Returns how it ended.
std::string judge(const Hcpe3Game& g, int max_plies, bool resign_allowed) {
  Position pos;
  REQUIRE_FALSE(decode_hcp(g.start, pos));
  for (size_t i = 0; i < g.moves.size(); ++i) {
    INFO("ply " << i << " of " << g.moves.size() << " in " << pos.sfen());
    REQUIRE_FALSE(game_over_by_rules(pos, max_plies));
    const Hcpe3Move& m = g.moves[i];
    if (!m.candidates.empty())
      CHECK(std::any_of(m.candidates.begin(), m.candidates.end(),
                        [&](const Hcpe3Candidate& c) { return c.move16 == m.move; }));
    pos.do_move(m.move);
  }
  INFO("final position " << pos.sfen() << ", result " << int(g.result));
  const Color us = pos.side_to_move();
  const GameResult we_win = us == BLACK ? BLACK_WIN : WHITE_WIN, we_lose = us == BLACK ? WHITE_WIN : BLACK_WIN;
  const uint8_t flags = g.result & ~hcpe3::RESULT_MASK;
  const Repetition rep = pos.repetition(3);
  const bool mated = legal_moves(pos).size() == 0;
  const bool declarable = pos.declaration_win(EnteringKingRule::POINT27);
  if (flags == hcpe3::SENNICHITE) {
    REQUIRE(rep != Repetition::NONE);
    CHECK(g.winner() == (rep == Repetition::DRAW ? DRAW : rep == Repetition::WIN ? we_win : we_lose));
    return rep == Repetition::DRAW ? "sennichite" : "perpetual_check";
  }
  CHECK(rep == Repetition::NONE);  // repetition is judged first
  if (flags == 0 && mated) {
    CHECK(g.winner() == we_lose);
    return "mate";
  }
  CHECK_FALSE(mated);
  if (flags == hcpe3::DECLARATION) {
    CHECK(declarable);
    CHECK(g.winner() == we_win);
    return "declaration";
  }
  CHECK_FALSE(declarable);
  if (flags == hcpe3::MAX_MOVES) {
    CHECK(int(g.moves.size()) == max_plies);
    CHECK(g.winner() == DRAW);
    return "max_moves";
  }
  REQUIRE(flags == 0);  // resigned: the side to move lost, before the game was over by the rules
  CHECK(resign_allowed);
  CHECK(g.winner() == we_lose);
  CHECK(int(g.moves.size()) < max_plies);
  return "resign";
}

nlohmann::json last_stats(const fs::path& dir) {
  auto files = files_with(dir, ".jsonl");
  REQUIRE(files.size() == 1);
  std::ifstream in(files[0]);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return nlohmann::json::parse(last);
}

// Runs self-play, judges every game and checks the stats file against the records. Returns the
// count of each way the games ended.
std::map<std::string, int> run_and_judge(const fs::path& dir, const std::string& args, int games, int max_plies,
                                         bool resign_allowed) {
  REQUIRE(run_cli("--model " + tiny_model_file() + " --out " + dir.string() + " --name t --backend " +
                  std::string(BACKEND) + " --nn-threads 1 --threads 1 --games " + std::to_string(games) +
                  " --max-plies " + std::to_string(max_plies) + " " + args) == 0);
  std::vector<Hcpe3Game> all = read_games(dir);
  REQUIRE(int(all.size()) == games);
  std::map<std::string, int> ends;
  int positions = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    INFO("game " << i);
    ends[judge(all[i], max_plies, resign_allowed)] += 1;
    for (const auto& m : all[i].moves) positions += !m.candidates.empty();
  }
  nlohmann::json stats = last_stats(dir);
  CHECK(stats["games"] == games);
  CHECK(stats["recorded_positions"] == positions);
  for (const char* kind : {"mate", "resign", "sennichite", "perpetual_check", "declaration", "max_moves"})
    CHECK(stats["ends"][kind] == ends[kind]);
  return ends;
}

// White moves, then Black declares: king in the camp, 10 pieces there, 28 points; White cannot
// check or take a piece of the camp in one move.
const std::string DECLARING = "+P+P+PS1S+P+P+P/1R2K2B1/9/9/p7p/l1n3n1l/l1n1g1n1l/1g1sks1g1/r3g3b w 10P 1\n";
const std::string OPENINGS =
    "startpos\n"
    "# Black mates at once with G*1b\n"
    "8k/9/8P/9/9/9/9/9/K8 b G2r2b3g4s4n4l17p 1\n" +
    DECLARING;

// Every piece is locked in place but the kings: deterministic play repeats.
const char* FORMATION = "RBGGSS+P+P+P/PPPPPPLL+N/8N/4k4/9/4K4/n8/+nllpppppp/+p+p+pssggbr b - 1\n";

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream out(p);
  out << text;
}

pid_t spawn_selfplay(const std::vector<std::string>& args) {
  pid_t pid = fork();
  if (pid == 0) {
    int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    std::vector<std::string> all = {JIRIKI_BINARY, "selfplay"};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(JIRIKI_BINARY, argv.data());
    ::_exit(127);
  }
  return pid;
}

// Waits until `dir` holds at least `n` hcpe3 files (false after a minute).
bool wait_for_files(const fs::path& dir, size_t n) {
  for (int i = 0; i < 6000; ++i) {
    if (files_with(dir, ".hcpe3").size() >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace

TEST_CASE("playout steps: leaves of several trees in one batch land on their own trees", "[selfplay][search]") {
  nn::BackendOptions o;
  o.kind = BACKEND_KIND;
  o.threads = 1;
  o.max_batch = 64;
  auto queue = search::make_eval_queue(tiny_model(), o, 1);
  search::SearchParams params;
  search::NodePool pool(size_t(64) << 20);
  const char* sfens[] = {"startpos", "lnsgkgsnl/1r5b1/ppppppppp/9/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL w - 2",
                         "8k/9/7GP/9/9/9/9/9/K8 b 2r2b3g4s4n4l17p 1"};
  std::vector<std::unique_ptr<search::Tree>> trees;
  std::vector<Position> positions(3);
  search::LeafBatch lb(64);
  for (int t = 0; t < 3; ++t) {
    REQUIRE_FALSE(positions[t].set_sfen(sfens[t]));
    trees.push_back(std::make_unique<search::Tree>());
    trees[t]->params = &params;
    trees[t]->pool = &pool;
    REQUIRE(search::queue_root(*trees[t], positions[t], lb));
  }
  REQUIRE(lb.batch.size() == 3);
  queue->evaluate(lb.batch);
  search::finish_batch(lb);
  for (int t = 0; t < 3; ++t) {
    const search::Node* root = trees[t]->root;
    REQUIRE(root->ready());
    CHECK(root->num_edges == legal_moves(positions[t]).size());
    double sum = 0;
    for (const auto& e : *root) sum += e.prior;
    CHECK(sum == Approx(1.0).epsilon(1e-5));
    CHECK(trees[t]->playouts == 0);  // a root's own evaluation is no playout
  }
  // Rounds of 4, 7 and 10 playouts per tree, all in one batch per round.
  int started[3] = {0, 0, 0};
  for (int round = 0; round < 5; ++round) {
    lb.clear();
    for (int t = 0; t < 3; ++t)
      for (int k = 0; k < 4 + 3 * t; ++k) {
        const std::string before = positions[t].sfen();
        search::PlayoutEnd end = search::run_playout(*trees[t], positions[t], lb);
        CHECK(end != search::PlayoutEnd::FULL);
        CHECK(positions[t].sfen() == before);  // the root position is restored
        ++started[t];
      }
    if (lb.batch.size() > 0) {
      queue->evaluate(lb.batch);
      search::finish_batch(lb);
    }
  }
  for (int t = 0; t < 3; ++t) {
    INFO("tree " << t);
    CHECK(trees[t]->playouts == started[t]);  // every playout landed once, on its own tree
    int64_t visits = 0;
    for (const auto& e : *trees[t]->root) {
      visits += e.visits;
      CHECK(e.virtual_loss == 0);
    }
    CHECK(visits == started[t]);
  }
  // The third position has a mate in 1 (2c1b) among its few moves: the playouts prove it.
  search::Edge* best = search::most_visited(trees[2]->root);
  REQUIRE(best);
  CHECK(search::mate_of(*best) == 1);
  CHECK(search::edge_winrate(*best) == 1.0f);
  for (auto& t : trees) pool.release(t->root);
}

TEST_CASE("selfplay: every game is legal, ends as its final position says, and reads back", "[selfplay][cli]") {
  SECTION("mates, declarations and the move limit; CSA files agree with the hcpe3 records") {
    const TempDir tmp("selfplay_ends");
    const fs::path& dir = tmp.path;
    write_text(dir / "openings.txt", OPENINGS);
    auto ends = run_and_judge(
        dir, "--playouts 12 --seed 5 --resign 0 --csa --start-sfens " + (dir / "openings.txt").string(), 18, 40, false);
    CHECK(ends["mate"] > 0);         // the mating opening always ends by mate
    CHECK(ends["declaration"] > 0);  // the declaring opening always ends by declaration
    CHECK(ends["resign"] == 0);
    std::vector<Hcpe3Game> games = read_games(dir);
    std::vector<fs::path> csa = files_with(dir / "csa", ".csa");
    REQUIRE(csa.size() == games.size());
    for (size_t i = 0; i < games.size(); ++i) {
      INFO(csa[i]);
      GameRecord rec;
      REQUIRE_FALSE(read_csa(bytes_of(csa[i]), rec));
      GameRecord expected = record_from_hcpe3(games[i]);
      CHECK(rec.start.sfen() == expected.start.sfen());
      CHECK(rec.moves == expected.moves);
      CHECK(rec.end == expected.end);
      CHECK(game_result(rec) == std::optional<GameResult>(games[i].winner()));
    }
  }
  SECTION("repetition: deterministic play in a locked position") {
    const TempDir tmp("selfplay_sennichite");
    const fs::path& dir = tmp.path;
    write_text(dir / "openings.txt", FORMATION);
    auto ends = run_and_judge(dir,
                              "--playouts 12 --seed 5 --resign 0 --declaration none --temperature-plies 0 "
                              "--dirichlet-weight 0 --start-sfens " +
                                  (dir / "openings.txt").string(),
                              4, 200, false);
    CHECK(ends["sennichite"] == 4);
  }
  SECTION("resignation, and games played out to measure it") {
    // White to move has lost (every move allows the declaration): it resigns unless resignation
    // is disabled for the game, which then ends by declaration with White counted as a would-be
    // resigner that did lose.
    const TempDir tmp("selfplay_resign");
    const fs::path& dir = tmp.path;
    write_text(dir / "openings.txt", DECLARING);
    auto ends = run_and_judge(
        dir,
        "--playouts 12 --seed 5 --resign 0.3 --no-resign-fraction 0.5 --start-sfens " + (dir / "openings.txt").string(),
        16, 40, true);
    CHECK(ends["resign"] > 0);
    CHECK(ends["declaration"] > 0);
    CHECK(ends["resign"] + ends["declaration"] == 16);
    nlohmann::json stats = last_stats(dir);
    CHECK(stats["no_resign_games"] == ends["declaration"]);
    CHECK(stats["would_resign"] == ends["declaration"]);
    CHECK(stats["false_resign"] == 0);
  }
}

TEST_CASE("selfplay: one thread and one seed give bit-identical files", "[selfplay][cli]") {
  const TempDir tmp_a("selfplay_seed_a"), tmp_b("selfplay_seed_b"), tmp_c("selfplay_seed_c");
  const fs::path &a = tmp_a.path, &b = tmp_b.path, &c = tmp_c.path;
  const std::string common = "--model " + tiny_model_file() + " --name same --nn-threads 1 --threads 1 --games 6 " +
                             "--playouts 10 --max-plies 50 --games-per-file 4 --csa --backend " + std::string(BACKEND);
  REQUIRE(run_cli(common + " --seed 9 --out " + a.string()) == 0);
  REQUIRE(run_cli(common + " --seed 9 --out " + b.string()) == 0);
  REQUIRE(run_cli(common + " --seed 10 --out " + c.string()) == 0);
  auto record_files = [](const fs::path& d) {
    auto f = files_with(d, ".hcpe3");
    auto g = files_with(d / "csa", ".csa");
    f.insert(f.end(), g.begin(), g.end());
    return f;
  };
  auto fa = record_files(a), fb = record_files(b);
  REQUIRE(fa.size() == 2 + 6);  // 4 + 2 games in two hcpe3 files, 6 CSA files
  REQUIRE(fb.size() == fa.size());
  for (size_t i = 0; i < fa.size(); ++i) {
    INFO(fa[i]);
    CHECK(fa[i].filename() == fb[i].filename());
    CHECK(bytes_of(fa[i]) == bytes_of(fb[i]));
  }
  std::string all_a, all_c;
  for (const auto& f : files_with(a, ".hcpe3")) all_a += bytes_of(f);
  for (const auto& f : files_with(c, ".hcpe3")) all_c += bytes_of(f);
  CHECK(all_a != all_c);  // the seed matters
}

TEST_CASE("selfplay: automatic games at once fill the batches, or follow a small --positions target", "[selfplay]") {
  selfplay::SelfPlayConfig c;
  c.network.settings.batch = 256;
  c.threads = 12;
  CHECK(selfplay::auto_concurrent(c) == 320 * 12);  // a quarter more games than a batch holds, per worker
  c.positions = 30000;                              // one game per 100 positions wanted
  CHECK(selfplay::auto_concurrent(c) == 300);
  c.positions = 500;  // never fewer games than workers
  CHECK(selfplay::auto_concurrent(c) == 12);
  c.positions = 100000000;  // never more than fill the batches
  CHECK(selfplay::auto_concurrent(c) == 320 * 12);
  // Under the playout cap a game makes training positions of its full searches only: a quarter.
  c.game.full_playouts = 400;
  c.positions = 30000;
  CHECK(selfplay::auto_concurrent(c) == 1200);
  c.game.full_probability = 0.5;
  CHECK(selfplay::auto_concurrent(c) == 600);
}

TEST_CASE("selfplay: the positions the running games will add, estimated as a long run's slots find them",
          "[selfplay]") {
  // 3,000 game slots, each starting a new game when its last ends, for long enough that the games
  // running are as a long run has them (the long ones more likely caught running); game lengths in
  // training positions drawn from a wide spread, as self-play's are (resigned early to played out).
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int> short_game(3, 20), long_game(30, 120);
  auto draw = [&] { return rng() % 4 == 0 ? long_game(rng) : short_game(rng); };
  struct Slot {
    int length, made;
  };
  std::vector<Slot> slots(3000);
  int64_t finished = 0, recorded = 0, squared = 0;
  for (Slot& s : slots) s = {draw(), 0};
  for (int step = 0; step < 2000; ++step)
    for (Slot& s : slots)
      if (++s.made == s.length) {
        ++finished, recorded += s.length, squared += int64_t(s.length) * s.length;
        s = {draw(), 0};
      }
  int64_t running_positions = 0, truth = 0;
  for (const Slot& s : slots) running_positions += s.made, truth += s.length - s.made;
  const double estimate = selfplay::expected_remaining_positions(finished, recorded, squared, int64_t(slots.size()),
                                                                 running_positions, 25.0);
  INFO("true " << truth << ", estimated " << estimate);
  CHECK(std::abs(estimate - double(truth)) < 0.1 * double(truth));
  // The finished games' mean length in its place falls far short: the target overshot.
  const double mean = double(recorded) / double(finished);
  CHECK(double(slots.size()) * std::max(mean - double(running_positions) / double(slots.size()), mean / 2) <
        0.8 * double(truth));
  // Nothing running, nothing to add; before any game has finished, the usual game's length stands in.
  CHECK(selfplay::expected_remaining_positions(finished, recorded, squared, 0, 0, 25.0) == 0.0);
  CHECK(selfplay::expected_remaining_positions(0, 0, 0, 10, 50, 25.0) == 10 * 20.0);
}

TEST_CASE("selfplay: --positions and --seconds end a run", "[selfplay][cli]") {
  const std::string common = "--model " + tiny_model_file() + " --name q --nn-threads 1 --threads 1 --playouts 6 " +
                             "--max-plies 20 --concurrent 3 --backend " + std::string(BACKEND);
  // No new game once 50 training positions are played; the three games in progress then finish.
  const TempDir tmp("selfplay_positions");
  const fs::path& dir = tmp.path;
  REQUIRE(run_cli(common + " --positions 50 --out " + dir.string()) == 0);
  int positions = 0;
  for (const auto& g : read_games(dir))
    for (const auto& m : g.moves) positions += !m.candidates.empty();
  CHECK(positions >= 50);
  CHECK(positions < 50 + 3 * 20);
  // Ten games at once of about 20 positions each (the move limit) and a target of 300: once the
  // first ten have finished, new games start only for the positions still missing, about five, not
  // ten as when games started until 300 positions were played (which ended near 400).
  const TempDir tmp_many("selfplay_positions_many");
  REQUIRE(run_cli(common + " --concurrent 10 --positions 300 --out " + tmp_many.path.string()) == 0);
  int many = 0, games = 0;
  for (const auto& g : read_games(tmp_many.path)) {
    ++games;
    for (const auto& m : g.moves) many += !m.candidates.empty();
  }
  INFO(games << " games");
  CHECK(many >= 300);
  CHECK(many < 300 + 2 * 20);
  // No game limit: the clock ends the run, dropping the games in progress.
  const TempDir tmp_seconds("selfplay_seconds");
  const fs::path& seconds_dir = tmp_seconds.path;
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(run_cli(common + " --seconds 1 --out " + seconds_dir.string()) == 0);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
  for (const auto& g : read_games(seconds_dir)) judge(g, 20, true);
  CHECK(last_stats(seconds_dir)["seconds"].get<double>() >= 1.0);
}

TEST_CASE("selfplay: a run killed mid-way leaves only complete files", "[selfplay][cli]") {
  // 64 playouts a move: about 15 games a second, each its own file and CSA, each written with an
  // fsync. At 6 playouts the run made some 190 a second, and on a disk whose journal commits
  // slow down under that many, the fsyncs stalled this run and any beside it for a minute.
  const std::vector<std::string> args = {"--model",
                                         tiny_model_file(),
                                         "--name",
                                         "k",
                                         "--nn-threads",
                                         "1",
                                         "--threads",
                                         "1",
                                         "--playouts",
                                         "64",
                                         "--max-plies",
                                         "16",
                                         "--games-per-file",
                                         "1",
                                         "--flush-seconds",
                                         "0",
                                         "--concurrent",
                                         "6",
                                         "--csa",
                                         "--backend",
                                         BACKEND};
  for (int sig : {SIGKILL, SIGINT}) {
    INFO("signal " << sig);
    const TempDir tmp("selfplay_kill");
    const fs::path& dir = tmp.path;
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--out", dir.string()});
    pid_t pid = spawn_selfplay(a);
    REQUIRE(pid > 0);
    const bool started = wait_for_files(dir, 3);
    const size_t seen = files_with(dir, ".hcpe3").size();
    ::kill(pid, sig);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(started);
    if (sig == SIGINT) {
      REQUIRE(WIFEXITED(status));
      CHECK(WEXITSTATUS(status) == 130);
    } else {
      CHECK(WIFSIGNALED(status));
    }
    // Whatever the moment of the kill: every hcpe3 file is whole, and anything else is a
    // temporary file (SIGKILL during a write), stats or CSA.
    std::vector<Hcpe3Game> games = read_games(dir);
    CHECK(games.size() >= seen);
    for (const auto& g : games) judge(g, 16, true);
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      const bool known = e.is_directory() || name.ends_with(".hcpe3") || name.ends_with(".stats.jsonl") ||
                         (sig == SIGKILL && name.find(".tmp.") != std::string::npos);
      INFO(name);
      CHECK(known);
    }
    if (sig == SIGINT) CHECK(files_with(dir / "csa", ".csa").size() == games.size());
  }
}

TEST_CASE("selfplay: bad input is a clear error", "[selfplay][cli]") {
  const TempDir tmp("selfplay_bad");
  const fs::path& dir = tmp.path;
  const std::string base = "--model " + tiny_model_file() + " --out " + dir.string() + " --games 1 --playouts 4 ";
  CHECK(run_cli("--out " + dir.string()) == 1);  // no model
  CHECK(run_cli("--model " + (dir / "missing.jnn").string() + " --out " + dir.string()) == 1);
  CHECK(run_cli(base + "--playouts 0") == 1);
  CHECK(run_cli(base + "--resign 1.5") == 1);
  CHECK(run_cli(base + "--no-such-option 3") == 2);
  CHECK(run_cli(base + "--batch -5") == 1);  // it ran with batch 32
  CHECK(run_cli(base + "--evaluators -1") == 1);
  {
    // An --out that takes no file (here a file size limit of 0, RLIMIT_FSIZE with SIGXFSZ ignored; a
    // read-only folder alike) is found before the first game, not after the last.
    const std::string err = (dir / "err.txt").string(), rc = (dir / "rc.txt").string();
    std::system(("( ( trap '' XFSZ; ulimit -f 0; exec " + std::string(JIRIKI_BINARY) + " selfplay " + base + "--out " +
                 (dir / "full").string() + " ); echo $? > " + rc + " ) 2>&1 | cat > " + err)
                    .c_str());
    std::ifstream status(rc), text(err);
    int code = -1;
    status >> code;
    const std::string said(std::istreambuf_iterator<char>(text), {});
    CHECK(code == 1);
    CHECK_THAT(said, Catch::Contains("full") && Catch::Contains("File too large"));
    CHECK_THAT(said, !Catch::Contains("positions/s"));  // the report of a run that played its games
  }
  write_text(dir / "bad.txt", "startpos moves 7g7f 7g7f\n");
  CHECK(run_cli(base + "--start-sfens " + (dir / "bad.txt").string()) == 1);
  write_text(dir / "few.txt", "4k4/9/9/9/9/9/9/9/4K4 b - 1\n");  // two pieces: no record format holds it
  CHECK(run_cli(base + "--start-sfens " + (dir / "few.txt").string()) == 1);
  CHECK(files_with(dir, ".hcpe3").empty());
  // The reader names the file and line of the first bad opening.
  write_text(dir / "second.txt", "# fine, then not\nstartpos moves 7g7f\nstartpos moves 7g7f 7g7f\n");
  try {
    selfplay::load_openings((dir / "second.txt").string(), GameRules{});
    FAIL("no error");
  } catch (const std::runtime_error& e) {
    CHECK_THAT(e.what(), Catch::Contains("second.txt:3: illegal move 7g7f"));
  }
}

TEST_CASE("selfplay: --book starts the games from openings walked in the book", "[selfplay][cli][book]") {
  const TempDir tmp("selfplay_book");
  const fs::path& dir = tmp.path;
  write_text(dir / "b.db",
             "#YANEURAOU-DB2016 1.00\n"
             "sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL w - 2\n"
             "8c8d none 0 0 1\n"
             "sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1\n"
             "7g7f none 0 0 3\n"
             "2g2f none 0 0 1\n");
  const std::string base = "--model " + tiny_model_file() + " --out " + dir.string() +
                           " --games 6 --playouts 4 --max-plies 12 --seed 3 --book " + (dir / "b.db").string();
  REQUIRE(run_cli(base + " --book-plies 2") == 0);
  std::vector<Hcpe3Game> games = read_games(dir);
  REQUIRE(games.size() == 6);
  for (const Hcpe3Game& g : games) {
    const GameRecord rec = record_from_hcpe3(g);
    REQUIRE(rec.moves.size() >= 2);
    const std::string first = move_to_usi(rec.moves[0]);
    CHECK((first == "7g7f" || first == "2g2f"));
    if (first == "7g7f") CHECK(move_to_usi(rec.moves[1]) == "8c8d");
  }
  CHECK(run_cli(base + " --book-plies 0") == 1);
  CHECK(run_cli(base + " --start-sfens " + (dir / "b.db").string()) == 1);
}
