// `jiriki match`: tournaments between USI engines with Elo, SPRT, adjudication by our own rules
// code and game records (see match/ for the parts).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "book/book.h"
#include "book/policy.h"
#include "command/commands.h"
#include "command/options.h"
#include "common/args.h"
#include "common/atomic_file.h"
#include "common/platform.h"
#include "match/arena.h"
#include "match/report.h"
#include "match/stats.h"
#include "match/tournament.h"

namespace jiriki {

namespace {

using namespace match;

// "k=v k=v ..." with the allowed keys; throws std::invalid_argument naming the problem.
std::map<std::string, std::string> fields(const std::string& option, const std::string& text,
                                          const std::set<std::string>& allowed) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  for (std::string word; in >> word;) {
    size_t eq = word.find('=');
    std::string key = word.substr(0, eq);
    if (eq == std::string::npos || !allowed.count(key) || out.count(key))
      throw std::invalid_argument("--" + option + ": unexpected '" + word + "'");
    out[key] = word.substr(eq + 1);
  }
  return out;
}

int64_t whole(const std::string& option, const std::string& key, const std::string& value) {
  size_t used = 0;
  int64_t v = -1;
  try {
    v = std::stoll(value, &used);
  } catch (const std::exception&) {}
  if (value.empty() || used != value.size() || v < 0)
    throw std::invalid_argument("--" + option + ": " + key + " needs a whole number >= 0, not '" + value + "'");
  return v;
}

TimeControl parse_tc(const std::string& text) {
  auto f = fields("tc", text, {"byoyomi", "time", "movetime", "nodes"});
  TimeControl tc;
  if (f.count("movetime") || f.count("nodes")) {
    if (f.size() != 1) throw std::invalid_argument("--tc: movetime and nodes stand alone");
    if (f.count("movetime")) tc.byoyomi_ms = whole("tc", "movetime", f["movetime"]);  // = byoyomi without main time
    else tc.nodes = whole("tc", "nodes", f["nodes"]);
    if (tc.byoyomi_ms + tc.nodes == 0) throw std::invalid_argument("--tc: movetime and nodes must be positive");
    return tc;
  }
  if (f.count("time")) {
    std::string t = f["time"];
    size_t plus = t.find('+');
    tc.time_ms = whole("tc", "time", t.substr(0, plus));
    if (plus != std::string::npos) tc.inc_ms = whole("tc", "time increment", t.substr(plus + 1));
  }
  if (f.count("byoyomi")) tc.byoyomi_ms = whole("tc", "byoyomi", f["byoyomi"]);
  if (tc.inc_ms > 0 && tc.byoyomi_ms > 0)
    throw std::invalid_argument("--tc: an increment and byoyomi do not go together");
  if (tc.time_ms + tc.byoyomi_ms == 0) throw std::invalid_argument("--tc: no time given (e.g. byoyomi=1000)");
  return tc;
}

// The --tc text of a time control, as parse_tc reads it.
std::string tc_text(const TimeControl& tc) {
  if (tc.nodes) return "nodes=" + std::to_string(tc.nodes);
  if (!tc.time_ms) return "byoyomi=" + std::to_string(tc.byoyomi_ms);
  std::string s = "time=" + std::to_string(tc.time_ms);
  if (tc.inc_ms) s.append("+").append(std::to_string(tc.inc_ms));
  if (tc.byoyomi_ms) s.append(" byoyomi=").append(std::to_string(tc.byoyomi_ms));
  return s;
}

SprtParams parse_sprt(const std::string& text) {
  auto f = fields("sprt", text, {"elo0", "elo1", "alpha", "beta"});
  SprtParams p;
  try {
    if (f.count("elo0")) p.elo0 = std::stod(f["elo0"]);
    if (f.count("elo1")) p.elo1 = std::stod(f["elo1"]);
    if (f.count("alpha")) p.alpha = std::stod(f["alpha"]);
    if (f.count("beta")) p.beta = std::stod(f["beta"]);
  } catch (const std::exception&) {
    throw std::invalid_argument("--sprt: values must be numbers");
  }
  if (!(p.elo0 < p.elo1)) throw std::invalid_argument("--sprt: elo0 must be below elo1");
  if (!(p.alpha > 0 && p.beta > 0 && p.alpha + p.beta < 1))
    throw std::invalid_argument("--sprt: need alpha, beta > 0 and alpha + beta < 1");
  return p;
}

// One opening a pair of games (at most 20,000), each `plies` moves drawn from the book in proportion to
// its counts from a stream seeded by `seed`; the same line drawn twice is kept once.
std::vector<Opening> book_openings(const std::string& path, int plies, int64_t games, uint64_t seed) {
  const auto book = book::open_book(path, false);
  SplitMix64 rng(seed);
  std::set<std::string> seen;
  std::vector<Opening> openings;
  for (int64_t i = 0; i < std::min<int64_t>((games + 1) / 2, 20000); ++i) {
    const std::string line = book::book_opening(*book, plies, rng);
    if (!seen.insert(line).second) continue;
    Opening o;
    if (auto err = parse_opening(line, o)) throw std::runtime_error("--book: " + *err);
    openings.push_back(std::move(o));
  }
  return openings;
}

std::atomic<int> g_signal{0};  // the signal that stopped the match, for the exit status

// summary.json into `dir`; when that fails (a full disk), into the temporary directory instead,
// saying where. Returns whether it was written to `dir`.
bool write_summary(const std::string& dir, const nlohmann::json& summary) {
  const std::string text = summary.dump(2) + "\n";
  const std::string path = (std::filesystem::path(dir) / "summary.json").string();
  try {
    std::filesystem::create_directories(dir);
    write_file_atomically(path, text);
    return true;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
  }
  const std::string elsewhere =
      (std::filesystem::temp_directory_path() / ("jiriki-summary-" + std::to_string(::getpid()) + ".json")).string();
  try {
    write_file_atomically(elsewhere, text);
    std::cerr << "error: " << path << " could not be written; the summary is in " << elsewhere << "\n";
  } catch (const std::exception& e) {
    std::cerr << "error: " << path << " could not be written, nor " << elsewhere << " (" << e.what()
              << "); the table above is the summary\n";
  }
  return false;
}

std::string fmt_llr(double llr) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", llr);
  return buf;
}

// --summarize: the table and summary.json of games.jsonl files instead of a tournament.
int summarize(const Args& args, const std::vector<std::string>& files, const std::string& out,
              const std::optional<SprtParams>& sprt) {
  if (args.has("engine")) {
    std::cerr << "error: --summarize plays no games: give it no --engine\n";
    return 2;
  }
  GameFilesSummary s;
  try {
    s = summarize_game_files(files, sprt);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  for (const std::string& where : s.cut_lines)
    std::cerr << "warning: " << where << ": the last line is cut short (a run killed while writing it): left out\n";
  std::cout << final_table(s.config, s.result);
  if (s.sprt_decided_games > 0)
    std::cout << "(the SPRT decided after " << s.sprt_decided_games
              << " games, in the order they were written; the score counts all " << s.result.games
              << ", over which the LLR is " << fmt_llr(sprt_llr(s.result.pairings[0].penta, *sprt)) << ")\n";
  if (s.estimated_games > 0)
    std::cout << "(" << s.estimated_games << " of the " << s.result.games
              << " games come from lines without each side's "
              << "answered moves: a side's moves are counted from its plies after the opening)\n";
  if (args.has("out") && !write_summary(out, summary_json(s.config, s.result))) return 1;
  return 0;
}

}  // namespace

int cmd_match(int argc, char** argv) {
  Args args(
      "jiriki match --engine \"cmd=PATH name=NAME ...\" --engine ... [OPTIONS]   or   jiriki match --summarize "
      "games.jsonl ...",
      "Plays USI engines against each other: two engines a match, more a round robin (or --gauntlet:\n"
      "the first against each other one). Each opening is played twice with colours swapped. Results are\n"
      "judged by jiriki's own rules code. Exit code: 0 finished (or SPRT undecided), 10 SPRT accepted H1,\n"
      "11 SPRT accepted H0, 2 bad usage, 1 failure (an engine that cannot start).");
  TournamentConfig config;
  config.game.tc = {.byoyomi_ms = 1000};
  ArenaSettings arena;
  options::Device device;
  std::vector<std::string> engines, summarize_files;
  std::string openings, book, resign, draw, sprt;
  bool round_robin = false;
  int book_plies = 16;
  int64_t start_within_s = config.start_within_ms / 1000;
  args.bind("engine", engines,
            "an engine: \"cmd=PATH name=NAME [dir=DIR] [args=\\\"a b\\\"] [nodes=N] [env.VAR=VALUE ...] "
            "[option.NAME=VALUE ...]\" (repeat; nodes=: its own count under --tc nodes), or a jiriki network played "
            "in this process: \"model=PATH name=NAME [nodes=N] [option.NAME=VALUE ...]\" (search options only; "
            "it plays at nodes=N, or --tc nodes=N; USI engines beside it keep their processes and the clock)")
      .flag("gauntlet", config.gauntlet, "the first engine against each other one")
      .flag("round-robin", round_robin, "every engine against every other one (the default with more than two)")
      .bind("games", config.games, "games per pairing (pairs of colour-swapped games; an odd count is rounded up)", 1)
      .bind("concurrency", config.concurrency,
            "games at once, each with its own engine processes (networks: in all, spread over --gpus); a USI "
            "engine's option.GPU=0,1,... gives game slot k the k-th GPU of the list, round robin",
            1)
      .bind("cpus-per-game", config.cpus_per_game,
            "confine each game's engine processes to CPUs of their own: game slot k gets the k-th run of this many "
            "of the CPUs this process may use (taskset), so that games at once never share a core; --concurrency "
            "times it must not pass them (0: no confinement)",
            0)
      .bind("seed", config.seed, "seed of the opening order and of random openings")
      .bind("tc", config.game.tc,
            "time control: byoyomi=MS | time=MS[+INC] | time=MS byoyomi=MS | movetime=MS | nodes=N", parse_tc, tc_text)
      .bind("margin", config.game.margin_ms,
            "milliseconds an answer may come late before it loses on time (gpsshogi uses all its byoyomi)", 0)
      .bind("timeout", config.game.timeout_ms,
            "milliseconds for each start-up answer (usiok, readyok) and for a move under nodes=N", 0)
      .bind("openings", openings,
            "file of start positions: \"sfen ... [moves ...]\", \"startpos [moves ...]\" or a bare SFEN")
      .bind("random-plies", config.random_plies, "without --openings: this many random legal plies from the start", 0)
      .bind("book", book, "opening book (YaneuraOu's format): each pair of games starts from a line drawn from it")
      .bind("book-plies", book_plies, "--book: plies drawn from the book for each opening, in proportion to its counts",
            0)
      .bind("start-within", start_within_s,
            "seconds: a pair of games starts only this soon after the match did, and every pair started is played "
            "out (0: no limit)",
            0)
      .bind("max-plies", config.game.rules.max_plies, "a game reaching this many plies is a draw (0: no limit)", 0)
      .bind("resign", resign, "resign adjudication \"moves=K score=CP\": both engines agree for K moves each")
      .bind("draw", draw,
            "draw adjudication \"moves=K score=CP plies=P\": both within +-CP for K moves each, after ply P")
      .bind("sprt", sprt, "\"elo0=E0 elo1=E1 alpha=A beta=B\": pentanomial SPRT in normalized Elo; stops when decided")
      .bind("out", config.records.dir, "directory for games.jsonl, summary.json and csa/ (kif/ with --kif)")
      .flag("kif", config.records.kif, "also write each game as KIF")
      .bind("hcpe3", config.records.hcpe3, "append every game to this hcpe3 file (evals: the engines' own scores)")
      .bind("hcpe", config.records.hcpe, "append every engine move to this hcpe file (evals: the engines' own scores)")
      .bind("log", config.log, "write every line to and from the engines, time-stamped, to this file")
      .bind("precision", arena.precision, "networks: auto, fp32, fp16, bf16 or int8", nn::parse_precision,
            nn::precision_name)
      .bind("summarize", summarize_files,
            "plays nothing: the summary of the games in this games.jsonl of an earlier run (repeat: several runs "
            "together; a stopped run's finished games), summary.json to --out; with --sprt, one test continued over "
            "the runs "
            "in the order given");
  options::bind_device(args, device, nn::BackendUse::INFERENCE,
                       "networks: the GPUs their games are spread over, e.g. 0,1,2,3");
  options::bind_threads(args, arena.threads, "networks: worker threads per GPU (0: 16 on a GPU, 1 on the CPU)");
  try {
    if (int rc = args.parse(argc, argv); rc >= 0) return rc;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
  if (args.has("summarize"))
    return summarize(args, summarize_files, config.records.dir,
                     args.has("sprt") ? std::optional<SprtParams>(parse_sprt(sprt)) : std::nullopt);

  try {
    for (const auto& text : engines) {
      EngineSpec spec;
      if (auto err = parse_engine_spec(text, spec)) throw std::invalid_argument("--engine: " + *err);
      config.engines.push_back(spec);
    }
    if (config.engines.size() < 2) throw std::invalid_argument("at least two --engine are needed");
    std::set<std::string> names;
    for (const auto& e : config.engines)
      if (!names.insert(e.name).second)
        throw std::invalid_argument("two engines are named '" + e.name + "': give name=...");
    if (config.gauntlet && round_robin) throw std::invalid_argument("--gauntlet or --round-robin, not both");
    if (config.games % 2) {
      ++config.games;
      std::cerr << "note: --games rounded up to " << config.games << " (games come in colour-swapped pairs)\n";
    }
    // More game threads than games would only start engines that never play.
    if (config.concurrency > config.games) {
      config.concurrency = int(config.games);
      std::cerr << "note: --concurrency lowered to " << config.concurrency << ", the number of games\n";
    }
    for (const auto& e : config.engines)
      if (e.nodes > 0 && config.game.tc.nodes == 0 && e.model.empty())
        throw std::invalid_argument("engine '" + e.name +
                                    "': nodes= of a USI engine applies under --tc nodes=N only (a network's always)");
    if (config.cpus_per_game > 0) {
      const size_t cpus = affinity_cpus().size();
      if (cpus == 0) throw std::invalid_argument("--cpus-per-game: this system does not say which CPUs it may use");
      if (size_t(config.cpus_per_game) * size_t(config.concurrency) > cpus)
        throw std::invalid_argument("--cpus-per-game " + std::to_string(config.cpus_per_game) + " with --concurrency " +
                                    std::to_string(config.concurrency) + " needs " +
                                    std::to_string(config.cpus_per_game * config.concurrency) +
                                    " CPUs; this process may use " + std::to_string(cpus));
      if (!set_affinity_cpus(affinity_cpus()))
        throw std::invalid_argument("--cpus-per-game: this system cannot confine an engine to CPUs");
    }
    config.start_within_ms = 1000 * start_within_s;
    if (args.has("resign")) {
      auto f = fields("resign", resign, {"moves", "score"});
      config.game.scores.resign_moves = int(whole("resign", "moves", f["moves"]));
      config.game.scores.resign_cp = int(whole("resign", "score", f["score"]));
    }
    if (args.has("draw")) {
      auto f = fields("draw", draw, {"moves", "score", "plies"});
      config.game.scores.draw_moves = int(whole("draw", "moves", f["moves"]));
      config.game.scores.draw_cp = int(whole("draw", "score", f["score"]));
      config.game.scores.draw_plies = f.count("plies") ? int(whole("draw", "plies", f["plies"])) : 0;
    }
    if (int(args.has("openings")) + int(args.has("book")) + int(config.random_plies > 0) > 1)
      throw std::invalid_argument("--openings, --book or --random-plies: one of them");
    if (args.has("openings")) config.openings = load_openings(openings);
    if (args.has("book")) config.openings = book_openings(book, book_plies, config.games, config.seed);
    if (args.has("sprt")) {
      if (config.engines.size() != 2) throw std::invalid_argument("--sprt needs exactly two engines");
      config.sprt = parse_sprt(sprt);
    }
    if (config.records.kif && config.records.dir.empty()) throw std::invalid_argument("--kif needs --out");
    if (std::any_of(config.engines.begin(), config.engines.end(),
                    [](const EngineSpec& e) { return !e.model.empty(); })) {
      if (config.cpus_per_game > 0 && std::all_of(config.engines.begin(), config.engines.end(),
                                                  [](const EngineSpec& e) { return !e.model.empty(); }))
        throw std::invalid_argument(
            "--cpus-per-game confines engine processes; networks (model=PATH) play in this one");
      if (auto err = network_nodes_error(config)) throw std::invalid_argument(*err);
      arena.backend = options::backend(device, nn::BackendUse::INFERENCE).kind;
      arena.gpus = device.gpus;
      arena.cuda = nn::CudaSettings::from_environment();
      for (const auto& e : config.engines)
        if (ArenaEngine a; auto err = arena_engine(e, arena.backend, a)) throw std::invalid_argument(*err);
    }
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }

  // Ctrl-C or a kill: the engines live in their own process groups, so the runner ends them itself.
  auto on_signal = [](int sig) {
    g_signal = sig;
    request_stop();
  };
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  TournamentResult result;
  try {
    result = any_network(config) ? run_arena(config, arena) : run_tournament(config);
  } catch (const std::exception& e) {  // the records could not be set up (an unwritable --out, say)
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  std::cout << final_table(config, result);
  const bool summary_written =
      config.records.dir.empty() || write_summary(config.records.dir, summary_json(config, result));
  if (result.interrupted) {
    std::cerr << "error: interrupted; the games in progress were dropped\n";
    return 128 + (g_signal ? g_signal.load() : SIGINT);  // as a shell reports a command the signal ended
  }
  if (!result.error.empty()) {
    std::cerr << "error: " << result.error << "\n";
    return 1;
  }
  if (!summary_written) return 1;
  return result.sprt == SprtResult::H1 ? 10 : result.sprt == SprtResult::H0 ? 11 : 0;
}

}  // namespace jiriki
