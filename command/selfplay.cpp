// `jiriki selfplay`: generates training games by self-play (selfplay/ does the work).
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <thread>

#include "book/policy.h"
#include "command/commands.h"
#include "command/options.h"
#include "common/args.h"
#include "common/atomic_file.h"
#include "common/cpus.h"
#include "selfplay/openings.h"
#include "selfplay/selfplay.h"

namespace jiriki {

namespace {
std::atomic<bool> g_stop{false};
// The first Ctrl-C (or SIGTERM) stops the run: games in progress are dropped, finished games are
// written. A second Ctrl-C ends the process at once.
void on_signal(int sig) {
  g_stop = true;
  std::signal(sig, SIG_DFL);
}

std::string default_name() {
  char buf[64];
  std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "selfplay-%Y%m%d-%H%M%S", std::localtime(&t));
  return std::string(buf) + "-" + std::to_string(::getpid());
}

void require(bool ok, const char* what) {
  if (!ok) throw std::invalid_argument(what);
}
}  // namespace

int cmd_selfplay(int argc, char** argv) {
  Args args("jiriki selfplay --model FILE --out DIR [--games N | --positions N | --seconds S] [--playouts P] [OPTIONS]",
            "Plays the network against itself, many games at once per GPU, and writes the games as hcpe3 records\n"
            "(and CSA with --csa) to DIR, with a progress line and a JSON-lines stats file. Ctrl-C stops: finished\n"
            "games are written, games in progress are dropped.");
  args.option("model", "", "model file (required)")
      .option("out", "", "output directory (required)")
      .option("name", "", "file name prefix (default: selfplay-DATE-TIME-PID)")
      .option("games", "0", "games to play (0: no limit)")
      .option("positions", "0", "or: start no new game once this many training positions are played")
      .option("seconds", "0", "or: stop after this many seconds, dropping the games in progress")
      .option("playouts", "800", "playouts per move (the small cap with --playout-cap-full)")
      .option("playout-cap-full", "0",
              "playout-cap randomisation: full cap (0: off); only full searches are training targets")
      .option("playout-cap-prob", "0.25", "probability of a full search")
      .option("precision", "auto", "auto, fp32, fp16 or bf16")
      .option("evaluators", "0", "network calls in flight per GPU (0: 4 on cuda, 1 on the CPU)")
      .option("batch", "0", "positions per network call (0: 256 on cuda, 32 on the CPU)")
      .option("concurrent", "0",
              "games per GPU (0: enough to fill every batch, or about one per 100 --positions if fewer)")
      .option("leaves-per-game", "1", "new leaves each game adds to one batch")
      .option("nn-threads", "0", "CPU backend: threads per evaluator (0: the cores the workers leave, shared)")
      .option("hash", "0", "node memory of all games in MiB (0: 8 MiB per game)")
      .option("temperature-plies", "30", "plies whose move is drawn by visit counts")
      .option("temperature", "1", "temperature of that draw")
      .option("dirichlet-alpha", "0.15", "Dirichlet noise at the root: alpha")
      .option("dirichlet-weight", "0.25", "Dirichlet noise at the root: weight (0: none)")
      .option("resign", "0.02", "resign below this win rate (0: never)")
      .option("no-resign-fraction", "0.1", "fraction of games played out without resignation (false-resign rate)")
      .option("max-plies", std::to_string(GameRules{}.max_plies), "games reaching this many plies are draws")
      .option("start-sfens", "", "openings file: lines 'startpos | [sfen] SFEN [moves ...]'")
      .option("book", "", "opening book (YaneuraOu format): games start from openings walked in it")
      .option("book-plies", "16", "plies of each opening walked in --book (count-weighted draws)")
      .option("declaration", "27", "entering-king declaration rule: 27 (CSA points), 24 or none")
      .option("root-mate-plies", "3", "mate search before each move's tree search (0: none)")
      .option("leaf-mate-plies", "1", "mate search at new leaves: 0, 1, 3 or 5")
      .flag("csa", "also write every game as a CSA file in DIR/csa")
      .option("games-per-file", "100", "games per hcpe3 file")
      .option("flush-seconds", "60", "write finished games at least this often")
      .option("report-seconds", "10", "seconds between progress lines");
  options::add_backend(args, nn::BackendUse::INFERENCE);
  options::add_gpus(args, "CUDA devices, e.g. 0,1 (one evaluation queue each)");
  options::add_threads(
      args, "worker threads per GPU (0: on cuda 3/4 of the cores shared by the GPUs, at most 12 each; 1 on the CPU)");
  options::add_seed(args, "seed of every random choice (game i uses a stream of its own)");
  if (int rc = args.parse(argc, argv); rc >= 0) return rc;
  require(args.has("model"), "--model FILE is required");
  require(args.has("out"), "--out DIR is required");

  selfplay::SelfPlayConfig c;
  c.model = args.str("model");
  c.out_dir = args.str("out");
  c.name = args.has("name") ? args.str("name") : default_name();
  require(!c.name.empty() && c.name.find('/') == std::string::npos, "--name must be a plain file name prefix");
  c.games = args.integer("games");
  c.positions = args.integer("positions");
  c.seconds = args.real("seconds");
  require(c.games >= 0 && c.positions >= 0 && c.seconds >= 0,
          "--games, --positions and --seconds must not be negative");
  c.precision = nn::parse_precision(args.str("precision"));
  c.cuda = nn::CudaSettings::from_environment();
  c.gpus = options::gpus(args);
  const nn::BackendChoice backend = options::backend(args, nn::BackendUse::INFERENCE);
  c.backend = backend.kind;
  const bool gpu = c.backend == nn::BackendKind::CUDA;
  if (!gpu) c.gpus.resize(1);  // the CPU is one queue
  // GPU defaults: the best of the settings measured on an H100 with 16 cores (bench/results/selfplay_h100.txt).
  const int cores = usable_cpus().count;  // the affinity mask's and cgroup quota's, not the machine's
  // Worker threads are per GPU: three quarters of the cores shared by the GPUs, at most 12 each.
  c.threads = options::threads(args) > 0 ? options::threads(args)
              : gpu                      ? std::clamp(cores * 3 / 4 / int(c.gpus.size()), 1, 12)
                                         : 1;
  require(args.integer("evaluators") >= 0 && args.integer("batch") >= 0,
          "--evaluators and --batch must be 0 (the default for the backend) or more");
  c.evaluators = args.integer("evaluators") > 0 ? int(args.integer("evaluators")) : gpu ? 4 : 1;
  c.batch = args.integer("batch") > 0 ? int(args.integer("batch")) : gpu ? 256 : 32;
  require(c.threads <= 256 && c.evaluators <= 64 && c.batch <= 65536,
          "--threads, --evaluators or --batch is too large");
  c.concurrent = int(args.integer("concurrent"));
  c.nn_threads = int(args.integer("nn-threads"));
  c.hash_bytes = size_t(std::max<int64_t>(args.integer("hash"), 0)) << 20;
  c.csa = args.has("csa");
  c.games_per_file = int(args.integer("games-per-file"));
  c.flush_seconds = args.real("flush-seconds");
  c.report_seconds = args.real("report-seconds");
  require(
      c.concurrent >= 0 && c.nn_threads >= 0 && c.games_per_file >= 1 && c.flush_seconds >= 0 && c.report_seconds > 0,
      "--concurrent, --nn-threads, --games-per-file, --flush-seconds or --report-seconds is out of range");

  selfplay::GameSettings& g = c.game;
  g.playouts = int(args.integer("playouts"));
  g.full_playouts = int(args.integer("playout-cap-full"));
  g.full_probability = args.real("playout-cap-prob");
  g.leaves_per_step = int(args.integer("leaves-per-game"));
  g.temperature_plies = int(args.integer("temperature-plies"));
  g.temperature = float(args.real("temperature"));
  g.dirichlet_alpha = float(args.real("dirichlet-alpha"));
  g.dirichlet_weight = float(args.real("dirichlet-weight"));
  g.resign_winrate = float(args.real("resign"));
  g.no_resign_fraction = args.real("no-resign-fraction");
  g.root_mate_plies = int(args.integer("root-mate-plies"));
  g.seed = options::seed(args);
  g.search.rules.max_plies = int(args.integer("max-plies"));
  g.search.leaf_mate_plies = int(args.integer("leaf-mate-plies"));
  g.search.threads = 1;
  require(g.playouts >= 1 && g.playouts <= 1000000, "--playouts must be between 1 and 1000000");
  require(g.full_playouts >= 0 && g.full_playouts <= 1000000, "--playout-cap-full must be between 0 and 1000000");
  require(g.full_probability >= 0 && g.full_probability <= 1, "--playout-cap-prob must be between 0 and 1");
  require(g.leaves_per_step >= 1 && g.leaves_per_step <= 64, "--leaves-per-game must be between 1 and 64");
  require(g.temperature_plies >= 0 && g.temperature > 0,
          "--temperature-plies must not be negative, --temperature positive");
  require(g.dirichlet_alpha > 0 && g.dirichlet_weight >= 0 && g.dirichlet_weight <= 1,
          "--dirichlet-alpha must be positive, --dirichlet-weight between 0 and 1");
  require(g.resign_winrate >= 0 && g.resign_winrate < 1, "--resign must be in [0, 1)");
  require(g.no_resign_fraction >= 0 && g.no_resign_fraction <= 1, "--no-resign-fraction must be between 0 and 1");
  require(g.root_mate_plies >= 0 && g.root_mate_plies <= 7, "--root-mate-plies must be between 0 and 7");
  require(g.search.rules.max_plies >= 1 && g.search.rules.max_plies <= 65535,
          "--max-plies must be between 1 and 65535");
  const std::string rule = args.str("declaration");
  require(rule == "27" || rule == "24" || rule == "none", "--declaration must be 27, 24 or none");
  g.search.rules.entering_king_rule = rule == "27"   ? EnteringKingRule::POINT27
                                      : rule == "24" ? EnteringKingRule::POINT24
                                                     : EnteringKingRule::NONE;
  const int lm = g.search.leaf_mate_plies;
  require(lm == 0 || lm == 1 || lm == 3 || lm == 5, "--leaf-mate-plies must be 0, 1, 3 or 5");
  if (args.has("start-sfens")) g.openings = selfplay::load_openings(args.str("start-sfens"), g.search.rules);
  if (args.has("book")) {
    require(!args.has("start-sfens"), "--book and --start-sfens exclude each other");
    const int plies = int(args.integer("book-plies"));
    require(plies >= 1 && plies <= 256, "--book-plies must be between 1 and 256");
    // 4096 openings drawn in proportion to the book's counts; each game takes one of them at random.
    const book::Book b = book::Book::load(args.str("book"));
    SplitMix64 rng{splitmix64(g.seed ^ 0x626f6f6bULL)};
    for (int i = 0; i < 4096; ++i) {
      selfplay::Opening o;
      if (!selfplay::parse_opening(book::book_opening(b, plies, rng), g.search.rules, o))
        g.openings.push_back(std::move(o));
    }
    require(!g.openings.empty(), "--book: no opening could be walked from the start position");
  }

  // A folder that cannot take the records (read-only, full) is found now, not after every game.
  std::filesystem::create_directories(c.out_dir);
  const std::string probe = (std::filesystem::path(c.out_dir) / ".jiriki-write-test").string();
  write_file_atomically(probe, "jiriki selfplay checks that its --out folder takes files\n");
  std::filesystem::remove(probe);

  std::cout << backend.line() << std::endl;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  selfplay::SelfPlayResult r = selfplay::run_selfplay(c, g_stop, std::cout);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);

  const selfplay::Snapshot& t = r.totals;
  std::printf("games %lld (black %lld, white %lld, draws %lld), training positions %lld, moves %lld, in %.1f s\n",
              (long long)t.games, (long long)t.winners[1], (long long)t.winners[2], (long long)t.winners[0],
              (long long)t.recorded_positions, (long long)t.moves, t.seconds);
  std::printf("ends:");
  for (size_t i = 0; i < t.ends.size(); ++i)
    std::printf(" %s %lld", selfplay::end_kind_name(selfplay::EndKind(i)), (long long)t.ends[i]);
  std::printf("\nrate: %.1f positions/s, %.0f nodes/s, %.0f network evaluations/s, batch fill %.1f%%\n",
              t.positions / std::max(t.seconds, 1e-9), t.playouts / std::max(t.seconds, 1e-9),
              t.nn_positions / std::max(t.seconds, 1e-9), t.nn_capacity ? 100.0 * t.nn_positions / t.nn_capacity : 0.0);
  if (t.no_resign_games > 0)
    std::printf("resignation: %lld games played out; one side would have resigned in %lld, wrongly in %lld (%.1f%%)\n",
                (long long)t.no_resign_games, (long long)t.would_resign, (long long)t.false_resign,
                t.would_resign ? 100.0 * t.false_resign / t.would_resign : 0.0);
  std::printf("wrote %lld games to %lld hcpe3 file(s) in %s (%s-*.hcpe3)\n", (long long)r.games_written,
              (long long)r.files, c.out_dir.c_str(), c.name.c_str());
  std::fflush(stdout);
  if (!r.error.empty()) {
    std::cerr << "error: " << r.error << "\n";
    return 1;
  }
  return r.stopped && g_stop ? 130 : 0;  // 128 + SIGINT, as a shell reports an interrupted command
}

}  // namespace jiriki
