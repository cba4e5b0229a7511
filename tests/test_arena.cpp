// The in-process arena (match/arena.h) against a match of two jiriki USI processes: the same games
// move for move at the same node count, openings and seed; and what every arena match must hold
// (legal games, endings judged by the referee, colours swapped in each pair, the summary's counts
// those of the records).
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "common/platform.h"
#include "match/arena.h"
#include "match/report.h"
#include "match/tournament.h"
#include "nn/model_file.h"
#include "nn_random.h"
#include "shogi/csa.h"
#include "shogi/hcpe3.h"
#include "temp_dir.h"
#include "tests/scripted_match.h"

using namespace jiriki;
using namespace jiriki::match;
using jiriki::testing::TempDir;
using nlohmann::json;

namespace {

// Two different random networks, written to `dir`.
void write_models(const TempDir& dir) {
  nn::save_model(nn::testing::random_model(1, 16, nn::Activation::RELU, 11), dir.file("a.jnn"));
  nn::save_model(nn::testing::random_model(1, 16, nn::Activation::RELU, 12), dir.file("b.jnn"));
}

// A match of networks `a` and `b`: `games` games from `plies` random plies, records in dir/`out`.
TournamentConfig match_config(const TempDir& dir, const std::string& out, int games, int nodes, int max_plies) {
  TournamentConfig c;
  c.games = games;
  c.concurrency = games;
  c.seed = 5;
  c.random_plies = 6;
  c.game.tc.nodes = nodes;
  c.game.rules.max_plies = max_plies;
  c.game.timeout_ms = 120000;
  c.progress = false;
  c.records.dir = dir.file(out);
  return c;
}

// The games.jsonl lines by game number.
std::map<int64_t, json> games_by_number(const std::string& dir) {
  std::map<int64_t, json> out;
  std::ifstream in(dir + "/games.jsonl");
  for (std::string line; std::getline(in, line);) {
    json j = json::parse(line);
    out[j["game"].get<int64_t>()] = j;
  }
  return out;
}

// A CSA record with the times left out (the T lines and the comments' "time S.MMM"), which only
// the clock decides.
std::string csa_without_times(const std::string& path) {
  std::ifstream in(path);
  std::string out;
  static const std::regex time_word("time [0-9]+\\.[0-9]+ ?");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("T", 0) != 0 && line.rfind("$START_TIME", 0) != 0 && line.rfind("$END_TIME", 0) != 0)
      out += std::regex_replace(line, time_word, "") + "\n";
  return out;
}

}  // namespace

TEST_CASE("arena: the same games as two jiriki USI processes at the same nodes, openings and seed, and against one",
          "[arena]") {
  // One search thread on each side, the reference backend (whose answer for a position does not
  // depend on the batch around it: the engine evaluates each root alone, the arena with other
  // games' leaves) and no df-pn root search (the engine's runs on a thread beside the search, so
  // its effect depends on timing).
  TempDir dir("arena_same");
  write_models(dir);
  TournamentConfig usi = match_config(dir, "usi", 4, 12, 36);
  auto usi_engine = [&](const char* name) {
    EngineSpec e;
    e.name = name;
    e.cmd = JIRIKI_BINARY;
    e.options = {{"ModelFile", dir.file(std::string(name) + ".jnn")},
                 {"Backend", "reference"},
                 {"Threads", "1"},
                 {"BatchSize", "4"},
                 {"RootMateSearch", "false"},
                 {"USI_Hash", "64"}};
    return e;
  };
  for (const char* name : {"a", "b"}) usi.engines.push_back(usi_engine(name));
  usi.concurrency = 2;
  const TournamentResult by_usi = run_tournament(usi);
  INFO(by_usi.error);
  REQUIRE(by_usi.error.empty());

  // Three times: a worker and an evaluator of each network per GPU (each worker runs its calls
  // itself); two workers per GPU sharing one evaluator (its queue's worker thread merges their
  // calls); and network a in the arena against b as the same USI process as above, one per game slot.
  for (const std::string out : {"arena", "arena-shared", "arena-mixed"}) {
    const int workers = out == "arena" ? 1 : 2;
    INFO(out << ": " << workers << " worker(s) a GPU");
    TournamentConfig in_process = match_config(dir, out, 4, 12, 36);
    for (const char* name : {"a", "b"}) {
      if (out == "arena-mixed" && std::string(name) == "b") {
        in_process.engines.push_back(usi_engine(name));
        continue;
      }
      EngineSpec e;
      e.name = name;
      e.model = dir.file(std::string(name) + ".jnn");
      e.options = {{"BatchSize", "4"}, {"RootMateSearch", "false"}};
      in_process.engines.push_back(e);
    }
    ArenaSettings settings;
    settings.backend = nn::BackendKind::REFERENCE;
    settings.gpus = {0, 1};  // two queues of each network: the games spread over both
    settings.threads = workers;
    settings.evaluators = workers == 1 ? 2 : 1;
    const TournamentResult by_arena = run_arena(in_process, settings);
    INFO(by_arena.error);
    REQUIRE(by_arena.error.empty());

    REQUIRE(by_arena.games == 4);
    CHECK(by_arena.pairings[0].wins == by_usi.pairings[0].wins);
    CHECK(by_arena.pairings[0].draws == by_usi.pairings[0].draws);
    CHECK(by_arena.pairings[0].losses == by_usi.pairings[0].losses);
    const auto usi_games = games_by_number(dir.file("usi")), arena_games = games_by_number(dir.file(out));
    REQUIRE(usi_games.size() == 4);
    REQUIRE(arena_games.size() == 4);
    int64_t searched = 0;
    for (const auto& [number, u] : usi_games) {
      INFO("game " << number);
      const json& a = arena_games.at(number);
      for (const char* k : {"black", "white", "opening", "reason", "result", "plies", "moves", "nodes"})
        CHECK(a[k] == u[k]);
      // Moves, scores (the comments) and the ending, record for record.
      CHECK(csa_without_times(dir.file(out + "/") + a["csa"].get<std::string>()) ==
            csa_without_times(dir.file("usi/") + u["csa"].get<std::string>()));
      searched += a["moves"]["black"].get<int64_t>() + a["moves"]["white"].get<int64_t>();
    }
    CHECK(searched > 40);  // the games were played, not ended at once
    // The summaries agree, but for the thinking time.
    json su = summary_json(usi, by_usi), sa = summary_json(in_process, by_arena);
    for (const char* k : {"wins", "losses", "draws", "score", "elo", "penta"}) CHECK(sa[k] == su[k]);
  }
}

TEST_CASE("arena: a USI engine beside a network, on the clock: a crash is its loss, and its slot starts it afresh",
          "[arena]") {
  // A scripted engine (tests/data/fake_usi.sh) against network a at 8 nodes of its own, byoyomi 10 s,
  // one game slot. Game 1, the network Black: the engine crashes at its first move (ply 1). Game 2,
  // the engine Black: a started-afresh process plays 7g7f at ply 0 and resigns at ply 2.
  TempDir dir("arena_usi");
  write_models(dir);
  TournamentConfig c = match_config(dir, "out", 2, 0, 320);
  c.concurrency = 1;
  c.random_plies = 0;
  c.game.tc = {};
  c.game.tc.byoyomi_ms = 10000;
  EngineSpec net;
  net.name = "net";
  net.model = dir.file("a.jnn");
  net.nodes = 8;
  c.engines = {net, jiriki::match::testing::fake(dir, "fake", {"7g7f", "crash-once 3c3d"})};
  ArenaSettings settings;
  settings.backend = nn::BackendKind::REFERENCE;
  const TournamentResult r = run_arena(c, settings);
  INFO(r.error);
  REQUIRE(r.error.empty());
  REQUIRE(r.games == 2);
  CHECK(r.pairings[0].wins == 2);
  CHECK(r.faults[1].crash == 1);
  const auto games = games_by_number(dir.file("out"));
  REQUIRE(games.size() == 2);
  CHECK(games.at(1)["reason"] == "crash");
  CHECK(games.at(1)["plies"] == 1);  // the network's move, then the crash
  CHECK(games.at(2)["reason"] == "resign");
  CHECK(games.at(2)["plies"] == 2);  // 7g7f from the fresh process, the network's reply
  // The network searched its moves on the clock's match at its own node count.
  CHECK(r.search[0].moves == 2);
  CHECK(r.search[0].nodes_per_move() == Approx(8).margin(1));
}

TEST_CASE("arena: under --cpus-per-game each game slot's USI engine runs on the slot's CPUs", "[arena]") {
  const std::vector<int> allowed = jiriki::affinity_cpus();
  REQUIRE(!allowed.empty());
  TempDir dir("arena_cpus");
  write_models(dir);
  TournamentConfig c = match_config(dir, "out", 0, 8, 320);
  c.concurrency = int(std::min<size_t>(2, allowed.size()));
  c.games = 2 * c.concurrency;
  c.random_plies = 0;
  c.cpus_per_game = 1;
  c.log = dir.file("traffic.log");
  EngineSpec net;
  net.name = "net";
  net.model = dir.file("a.jnn");
  c.engines = {net, jiriki::match::testing::fake(dir, "fake", {"7g7f", "3c3d", "resign", "resign"})};
  ArenaSettings settings;
  settings.backend = nn::BackendKind::REFERENCE;
  const TournamentResult r = run_arena(c, settings);  // one worker, stepping every game slot
  INFO(r.error);
  REQUIRE(r.error.empty());
  CHECK(r.games == c.games);
  auto reported = jiriki::match::testing::reported_cpus(c.log);
  for (int slot = 0; slot < c.concurrency; ++slot) {
    INFO("slot " << slot);
    CHECK(reported["fake#" + std::to_string(slot)] == std::set<std::string>{std::to_string(allowed[size_t(slot)])});
  }
  CHECK(jiriki::affinity_cpus() == allowed);  // the runner keeps every CPU it had
}

TEST_CASE("arena: legal games judged by the referee, colours swapped per pair, counts as in the records", "[arena]") {
  TempDir dir("arena_games");
  write_models(dir);
  TournamentConfig c = match_config(dir, "out", 8, 16, 80);
  c.concurrency = 3;  // fewer at once than games: slots are refilled as games end
  c.records.kif = true;
  c.records.hcpe3 = dir.file("games.hcpe3");
  for (const char* name : {"a", "b"}) {
    EngineSpec e;
    e.name = name;
    e.model = dir.file(std::string(name) + ".jnn");
    c.engines.push_back(e);
  }
  ArenaSettings settings;  // the CPU backend, the engine's defaults (root mate search included)
  const TournamentResult r = run_arena(c, settings);
  INFO(r.error);
  REQUIRE(r.error.empty());
  REQUIRE(r.games == 8);
  const PairingResult& p = r.pairings[0];
  CHECK(p.wins + p.draws + p.losses == 8);
  const auto games = games_by_number(dir.file("out"));
  REQUIRE(games.size() == 8);
  const std::set<std::string> referee = {"mate", "sennichite", "perpetual check", "max plies", "declaration"};
  int64_t a_points2 = 0;
  for (const auto& [number, g] : games) {
    INFO("game " << number << ": " << g.dump());
    CHECK(referee.count(g["reason"].get<std::string>()) == 1);
    // Game 2k-1 and 2k share an opening with colours swapped.
    const json& partner = games.at(number % 2 ? number + 1 : number - 1);
    CHECK(g["opening"] == partner["opening"]);
    CHECK(g["black"] == partner["white"]);
    CHECK(g["black"] == (number % 2 ? "a" : "b"));
    // Every move legal (the reader checks each) and the ending as the record says.
    GameRecord rec;
    std::ifstream csa(dir.file("out/") + g["csa"].get<std::string>());
    const std::string text((std::istreambuf_iterator<char>(csa)), {});
    REQUIRE_FALSE(read_csa(text, rec));
    CHECK(int(rec.moves.size()) == g["plies"].get<int>());
    CHECK(g["plies"].get<int>() <= 80);
    if (g["reason"] == "max plies") CHECK(g["plies"] == 80);
    const std::string winner = g["winner"].is_string() ? g["winner"].get<std::string>() : "";
    a_points2 += winner == "a" ? 2 : winner.empty() ? 1 : 0;
    std::string kif = g["csa"].get<std::string>();
    kif.replace(0, 3, "kif");
    kif.replace(kif.size() - 3, 3, "kif");
    CHECK(std::ifstream(dir.file("out/") + kif).good());
  }
  CHECK(a_points2 == 2 * p.wins + p.draws);
  std::vector<Hcpe3Game> hcpe3;
  REQUIRE_FALSE(read_hcpe3_file(dir.file("games.hcpe3"), hcpe3));
  CHECK(hcpe3.size() == 8);
}

TEST_CASE("arena: an engine spec's search options, and those it refuses", "[arena]") {
  EngineSpec spec;
  REQUIRE_FALSE(
      parse_engine_spec("model=nets/best.jnn option.C_init=144 option.BatchSize=8 "
                        "option.RootMateSearch=false option.LeafMateSearchPly=5",
                        spec));
  CHECK(spec.name == "best");
  CHECK(spec.cmd.empty());
  ArenaEngine e;
  REQUIRE_FALSE(arena_engine(spec, nn::BackendKind::CPU, e));
  CHECK(e.params.c_init == Approx(1.44f));
  CHECK(e.params.batch_size == 8);
  CHECK_FALSE(e.params.root_mate_search);
  CHECK(e.params.leaf_mate_plies == 5);
  CHECK(e.params.threads == 1);
  // Defaults: the engine's, its leaf mate search by backend.
  REQUIRE_FALSE(parse_engine_spec("model=x.jnn", spec));
  REQUIRE_FALSE(arena_engine(spec, nn::BackendKind::CUDA, e));
  CHECK(e.params.leaf_mate_plies == 1);
  CHECK(e.params.c_init == search::SearchParams().c_init);
  CHECK(e.params.root_mate_search);
  // Threads and the like shape a process or a clock: taken, and the search stays one thread.
  REQUIRE_FALSE(parse_engine_spec("model=x option.Threads=2 option.USI_Hash=256", spec));
  REQUIRE_FALSE(arena_engine(spec, nn::BackendKind::CPU, e));
  CHECK(e.params.threads == 1);
  for (const char* bad : {"model=x option.GPU=1", "model=x option.C_init=abc", "model=x option.BatchSize=0",
                          "model=x option.ModelFile=y"}) {
    INFO(bad);
    REQUIRE_FALSE(parse_engine_spec(bad, spec));
    CHECK(arena_engine(spec, nn::BackendKind::CPU, e));
  }
  CHECK(parse_engine_spec("model=x cmd=y", spec));     // one of them
  CHECK(parse_engine_spec("name=x", spec));            // neither
  CHECK(parse_engine_spec("model=x dir=/tmp", spec));  // a process's field
}

TEST_CASE("match: option.GPU as a list gives game slot k its k-th GPU, round robin", "[arena][match]") {
  EngineSpec spec;
  REQUIRE_FALSE(parse_engine_spec("cmd=jiriki option.GPU=0,1,2,3 option.Threads=2", spec));
  for (int slot = 0; slot < 9; ++slot) {
    const EngineSpec s = spec_for_slot(spec, slot);
    REQUIRE(s.options.size() == 2);
    CHECK(s.options[0].second == std::to_string(slot % 4));
    CHECK(s.options[1].second == "2");
  }
  REQUIRE_FALSE(parse_engine_spec("cmd=jiriki option.gpu=3", spec));
  CHECK(spec_for_slot(spec, 5).options[0].second == "3");
}

TEST_CASE("match command: networks in one process, with the CPU queues of two 'GPUs'", "[arena][match]") {
  TempDir dir("arena_cli");
  write_models(dir);
  const std::string bin = JIRIKI_BINARY;
  const std::string engines =
      " --engine \"model=" + dir.file("a.jnn") + " name=a\" --engine \"model=" + dir.file("b.jnn") + " name=b\"";
  auto run = [](const std::string& cmd) {
    const int status = std::system((cmd + " > /dev/null 2>&1").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  CHECK(run(bin + " match" + engines + " --games 4 --concurrency 4 --tc nodes=8 --max-plies 30 --random-plies 4" +
            " --backend cpu --gpus 0,1 --out " + dir.file("out")) == 0);
  std::ifstream in(dir.file("out/summary.json"));
  const json s = json::parse(in);
  CHECK(s["wins"].get<int>() + s["losses"].get<int>() + s["draws"].get<int>() == 4);
  // Networks play at a node count only: their own nodes=N, or --tc nodes=N.
  CHECK(run(bin + " match" + engines + " --games 2 --tc byoyomi=100") == 2);
  // Beside a USI engine process, in a round robin: every pairing played.
  CHECK(run(bin + " match" + engines + " --engine \"cmd=" + bin + " name=c option.Threads=1\" --games 2" +
            " --tc nodes=8 --max-plies 30 --random-plies 4 --backend cpu --out " + dir.file("mixed")) == 0);
  std::ifstream mixed_in(dir.file("mixed/summary.json"));
  const json mixed = json::parse(mixed_in);
  CHECK(mixed["games"] == 6);
  CHECK(mixed["pairings"].size() == 3);
  CHECK(run(bin + " match --engine \"model=" + dir.file("a.jnn") +
            " name=a option.Backend=cpu\" --engine \"model=" + dir.file("b.jnn") + "\" --games 2 --tc nodes=8") == 2);
  // A network that cannot be loaded resigns every game, as the USI engine does.
  std::ofstream(dir.file("spoiled.jnn")) << "not a network";
  CHECK(run(bin + " match --engine \"model=" + dir.file("spoiled.jnn") + " name=s\" --engine \"model=" +
            dir.file("b.jnn") + " name=b\" --games 2 --tc nodes=8 --backend cpu --out " + dir.file("spoiled")) == 0);
  std::ifstream spoiled(dir.file("spoiled/summary.json"));
  const json t = json::parse(spoiled);
  CHECK(t["losses"] == 2);
}
