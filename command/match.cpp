// `jiriki match`: tournaments between USI engines with Elo, SPRT, adjudication by our own rules
// code and game records (see match/ for the parts).
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "book/book.h"
#include "book/policy.h"
#include "command/commands.h"
#include "common/args.h"
#include "common/atomic_file.h"
#include "match/report.h"
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

// --summarize: the table and summary.json of games.jsonl files instead of a tournament.
int summarize(const Args& args) {
  if (args.has("engine")) {
    std::cerr << "error: --summarize plays no games: give it no --engine\n";
    return 2;
  }
  GameFilesSummary s;
  try {
    s = summarize_game_files(args.all("summarize"));
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  for (const std::string& where : s.cut_lines)
    std::cerr << "warning: " << where << ": the last line is cut short (a run killed while writing it): left out\n";
  std::cout << final_table(s.config, s.result);
  if (s.estimated_games > 0)
    std::cout << "(" << s.estimated_games << " of the " << s.result.games
              << " games come from lines without each side's "
              << "answered moves: a side's moves are counted from its plies after the opening)\n";
  if (args.has("out") && !write_summary(args.str("out"), summary_json(s.config, s.result))) return 1;
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
  args.option("engine", "",
              "an engine: \"cmd=PATH name=NAME [dir=DIR] [args=\\\"a b\\\"] [nodes=N] [env.VAR=VALUE ...] "
              "[option.NAME=VALUE ...]\" (repeat; nodes=: its own count under --tc nodes)",
              true)
      .flag("gauntlet", "the first engine against each other one")
      .flag("round-robin", "every engine against every other one (the default with more than two)")
      .option("games", "10", "games per pairing (pairs of colour-swapped games; an odd count is rounded up)")
      .option("concurrency", "1", "games at once, each with its own engine processes")
      .option("seed", "1", "seed of the opening order and of random openings")
      .option("tc", "byoyomi=1000",
              "time control: byoyomi=MS | time=MS[+INC] | time=MS byoyomi=MS | movetime=MS | nodes=N")
      .option("margin", "0",
              "milliseconds an answer may come late before it loses on time (gpsshogi uses all its byoyomi)")
      .option("timeout", "60000", "milliseconds for each start-up answer (usiok, readyok) and for a move under nodes=N")
      .option("openings", "",
              "file of start positions: \"sfen ... [moves ...]\", \"startpos [moves ...]\" or a bare SFEN")
      .option("random-plies", "0", "without --openings: this many random legal plies from the start")
      .option("book", "", "opening book (YaneuraOu's format): each pair of games starts from a line drawn from it")
      .option("book-plies", "16", "--book: plies drawn from the book for each opening, in proportion to its counts")
      .option("start-within", "0",
              "seconds: a pair of games starts only this soon after the match did, and every pair started is played "
              "out (0: no limit)")
      .option("max-plies", std::to_string(GameRules{}.max_plies),
              "a game reaching this many plies is a draw (0: no limit)")
      .option("resign", "", "resign adjudication \"moves=K score=CP\": both engines agree for K moves each")
      .option("draw", "",
              "draw adjudication \"moves=K score=CP plies=P\": both within +-CP for K moves each, after ply P")
      .option("sprt", "", "\"elo0=E0 elo1=E1 alpha=A beta=B\": pentanomial SPRT in normalized Elo; stops when decided")
      .option("out", "", "directory for games.jsonl, summary.json and csa/ (kif/ with --kif)")
      .flag("kif", "also write each game as KIF")
      .option("hcpe3", "", "append every game to this hcpe3 file (evals: the engines' own scores)")
      .option("hcpe", "", "append every engine move to this hcpe file (evals: the engines' own scores)")
      .option("log", "", "write every line to and from the engines, time-stamped, to this file")
      .option("summarize", "",
              "plays nothing: the summary of the games in this games.jsonl of an earlier run (repeat: "
              "several runs together; a stopped run's finished games), summary.json to --out",
              true);
  if (int rc = args.parse(argc, argv); rc >= 0) return rc;
  if (args.has("summarize")) return summarize(args);

  TournamentConfig config;
  try {
    for (const auto& text : args.all("engine")) {
      EngineSpec spec;
      if (auto err = parse_engine_spec(text, spec)) throw std::invalid_argument("--engine: " + *err);
      config.engines.push_back(spec);
    }
    if (config.engines.size() < 2) throw std::invalid_argument("at least two --engine are needed");
    std::set<std::string> names;
    for (const auto& e : config.engines)
      if (!names.insert(e.name).second)
        throw std::invalid_argument("two engines are named '" + e.name + "': give name=...");
    if (args.has("gauntlet") && args.has("round-robin"))
      throw std::invalid_argument("--gauntlet or --round-robin, not both");
    config.gauntlet = args.has("gauntlet");
    config.games = args.integer("games");
    config.concurrency = int(args.integer("concurrency"));
    config.seed = uint64_t(args.integer("seed"));
    if (config.games < 1 || config.concurrency < 1)
      throw std::invalid_argument("--games and --concurrency must be positive");
    if (config.games % 2) {
      ++config.games;
      std::cerr << "note: --games rounded up to " << config.games << " (games come in colour-swapped pairs)\n";
    }
    // More game threads than games would only start engines that never play.
    if (config.concurrency > config.games) {
      config.concurrency = int(config.games);
      std::cerr << "note: --concurrency lowered to " << config.concurrency << ", the number of games\n";
    }
    config.game.tc = parse_tc(args.str("tc"));
    for (const auto& e : config.engines)
      if (e.nodes > 0 && config.game.tc.nodes == 0)
        throw std::invalid_argument("engine '" + e.name + "': nodes= applies under --tc nodes=N only");
    config.game.margin_ms = whole("margin", "margin", args.str("margin"));
    config.game.timeout_ms = whole("timeout", "timeout", args.str("timeout"));
    config.game.rules.max_plies = int(whole("max-plies", "max-plies", args.str("max-plies")));
    config.start_within_ms = 1000 * whole("start-within", "start-within", args.str("start-within"));
    if (args.has("resign")) {
      auto f = fields("resign", args.str("resign"), {"moves", "score"});
      config.game.scores.resign_moves = int(whole("resign", "moves", f["moves"]));
      config.game.scores.resign_cp = int(whole("resign", "score", f["score"]));
    }
    if (args.has("draw")) {
      auto f = fields("draw", args.str("draw"), {"moves", "score", "plies"});
      config.game.scores.draw_moves = int(whole("draw", "moves", f["moves"]));
      config.game.scores.draw_cp = int(whole("draw", "score", f["score"]));
      config.game.scores.draw_plies = f.count("plies") ? int(whole("draw", "plies", f["plies"])) : 0;
    }
    config.random_plies = int(whole("random-plies", "random-plies", args.str("random-plies")));
    if (int(args.has("openings")) + int(args.has("book")) + int(config.random_plies > 0) > 1)
      throw std::invalid_argument("--openings, --book or --random-plies: one of them");
    if (args.has("openings")) config.openings = load_openings(args.str("openings"));
    if (args.has("book"))
      config.openings = book_openings(args.str("book"), int(whole("book-plies", "book-plies", args.str("book-plies"))),
                                      config.games, config.seed);
    if (args.has("sprt")) {
      if (config.engines.size() != 2) throw std::invalid_argument("--sprt needs exactly two engines");
      config.sprt = parse_sprt(args.str("sprt"));
    }
    config.records = {args.str("out"), args.has("kif"), args.str("hcpe3"), args.str("hcpe")};
    config.log = args.str("log");
    if (args.has("kif") && !args.has("out")) throw std::invalid_argument("--kif needs --out");
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
    result = run_tournament(config);
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
