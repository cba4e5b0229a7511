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
#include "engine/network_setup.h"
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

// --declaration: "27" (CSA points), "24" or "none".
EnteringKingRule parse_declaration(const std::string& s) {
  if (s == "27") return EnteringKingRule::POINT27;
  if (s == "24") return EnteringKingRule::POINT24;
  if (s == "none") return EnteringKingRule::NONE;
  throw std::invalid_argument("--declaration must be 27, 24 or none");
}
const char* declaration_name(EnteringKingRule r) {
  return r == EnteringKingRule::POINT27 ? "27" : r == EnteringKingRule::POINT24 ? "24" : "none";
}
}  // namespace

int cmd_selfplay(int argc, char** argv) {
  Args args("jiriki selfplay --model FILE --out DIR [--games N | --positions N | --seconds S] [--playouts P] [OPTIONS]",
            "Plays the network against itself, many games at once per GPU, and writes the games as hcpe3 records\n"
            "(and CSA with --csa) to DIR, with a progress line and a JSON-lines stats file. Ctrl-C stops: finished\n"
            "games are written, games in progress are dropped.");
  selfplay::SelfPlayConfig c;
  selfplay::GameSettings& g = c.game;
  engine::NetworkSettings net;  // resolved once its options are read
  options::Device device;
  std::string name, start_sfens, book_file;
  int64_t hash_mib = int64_t(c.hash_bytes >> 20);
  int book_plies = 16;
  args.bind("model", net.model, "model file (required)")
      .bind("out", c.out_dir, "output directory (required)")
      .bind("name", name, "file name prefix (default: selfplay-DATE-TIME-PID)")
      .bind("games", c.games, "games to play (0: no limit)", 0)
      .bind("positions", c.positions,
            "or: about this many training positions (no new game once the running ones should make them)", 0)
      .bind("seconds", c.seconds, "or: stop after this many seconds, dropping the games in progress", 0.0)
      .bind("playouts", g.playouts, "playouts per move (the small cap with --playout-cap-full)", 1, 1000000)
      .bind("playout-cap-full", g.full_playouts,
            "playout-cap randomisation: full cap (0: off); only full searches are training targets", 0, 1000000)
      .bind("playout-cap-prob", g.full_probability, "probability of a full search", 0.0, 1.0)
      .bind("precision", net.precision, "auto, fp32, fp16 or bf16", nn::parse_precision, nn::precision_name)
      .bind("evaluators", net.evaluators, "network calls in flight per GPU (0: 4 on cuda, 1 on the CPU)", 0, 64)
      .bind("batch", net.batch, "positions per network call (0: 256 on cuda, 32 on the CPU)", 0, 65536)
      .bind("concurrent", c.concurrent,
            "games per GPU (0: enough to fill every batch, or about one per 100 --positions, 25 under the playout "
            "cap's 0.25, if fewer)",
            0)
      .bind("leaves-per-game", g.leaves_per_step, "new leaves each game adds to one batch", 1, 64)
      .bind("nn-threads", net.cpu_threads,
            "CPU backend: threads per evaluator (0: the cores the workers leave, shared)", 0)
      .bind("hash", hash_mib, "node memory of all games in MiB (0: 8 MiB per game)", 0, int64_t(1) << 40)
      .bind("temperature-plies", g.temperature_plies, "plies whose move is drawn by visit counts", 0)
      .bind("temperature", g.temperature, "temperature of that draw")
      .bind("dirichlet-alpha", g.dirichlet_alpha, "Dirichlet noise at the root: alpha")
      .bind("dirichlet-weight", g.dirichlet_weight, "Dirichlet noise at the root: weight (0: none)", 0.0f, 1.0f)
      .bind("resign", g.resign_winrate, "resign below this win rate (0: never)")
      .bind("no-resign-fraction", g.no_resign_fraction,
            "fraction of games played out without resignation (false-resign rate)", 0.0, 1.0)
      .bind("max-plies", g.search.rules.max_plies, "games reaching this many plies are draws", 1, 65535)
      .bind("start-sfens", start_sfens, "openings file: lines 'startpos | [sfen] SFEN [moves ...]'")
      .bind("book", book_file, "opening book (YaneuraOu format): games start from openings walked in it")
      .bind("book-plies", book_plies, "plies of each opening walked in --book (count-weighted draws)", 1, 256)
      .bind("declaration", g.search.rules.entering_king_rule,
            "entering-king declaration rule: 27 (CSA points), 24 or none", parse_declaration, declaration_name)
      .bind("root-mate-plies", g.root_mate_plies, "mate search before each move's tree search (0: none)", 0, 7)
      .bind("leaf-mate-plies", g.search.leaf_mate_plies, "mate search at new leaves: 0, 1, 3 or 5")
      .flag("csa", c.csa, "also write every game as a CSA file in DIR/csa")
      .bind("games-per-file", c.games_per_file, "games per hcpe3 file", 1)
      .bind("flush-seconds", c.flush_seconds, "write finished games at least this often", 0.0)
      .bind("report-seconds", c.report_seconds, "seconds between progress lines");
  options::bind_device(args, device, nn::BackendUse::INFERENCE, "CUDA devices, e.g. 0,1 (one evaluation queue each)");
  options::bind_threads(
      args, c.threads,
      "worker threads per GPU (0: on cuda 3/4 of the cores shared by the GPUs, at most 12 each; 1 on the CPU)");
  options::bind_seed(args, g.seed, "seed of every random choice (game i uses a stream of its own)");
  if (int rc = args.parse(argc, argv); rc >= 0) return rc;
  require(args.has("model"), "--model FILE is required");
  require(args.has("out"), "--out DIR is required");
  c.name = args.has("name") ? name : default_name();
  require(!c.name.empty() && c.name.find('/') == std::string::npos, "--name must be a plain file name prefix");
  c.hash_bytes = size_t(hash_mib) << 20;
  c.gpus = device.gpus;
  net.backend = device.backend;
  c.network = engine::NetworkSetup::resolve(net);
  const bool gpu = c.network.on_gpu();
  if (!gpu) c.gpus.resize(1);  // the CPU is one queue
  // GPU defaults: the best of the settings measured on an H100 with 16 cores (bench/results/selfplay_h100.txt).
  const int cores = usable_cpus().count;  // the affinity mask's and cgroup quota's, not the machine's
  // Worker threads are per GPU: three quarters of the cores shared by the GPUs, at most 12 each.
  if (c.threads == 0) c.threads = gpu ? std::clamp(cores * 3 / 4 / int(c.gpus.size()), 1, 12) : 1;
  engine::NetworkSettings& n = c.network.settings;
  if (n.evaluators == 0) n.evaluators = gpu ? 4 : 1;
  if (n.batch == 0) n.batch = gpu ? 256 : 32;
  require(c.threads <= 256, "--threads is too large (at most 256 per GPU)");
  require(c.report_seconds > 0, "--report-seconds must be positive");
  require(g.temperature > 0, "--temperature must be positive");
  require(g.dirichlet_alpha > 0, "--dirichlet-alpha must be positive");
  require(g.resign_winrate >= 0 && g.resign_winrate < 1, "--resign must be in [0, 1)");
  const int lm = g.search.leaf_mate_plies;
  require(lm == 0 || lm == 1 || lm == 3 || lm == 5, "--leaf-mate-plies must be 0, 1, 3 or 5");
  if (args.has("start-sfens")) g.openings = selfplay::load_openings(start_sfens, g.search.rules);
  if (args.has("book")) {
    require(!args.has("start-sfens"), "--book and --start-sfens exclude each other");
    // 4096 openings drawn in proportion to the book's counts; each game takes one of them at random.
    const book::Book b = book::Book::load(book_file);
    SplitMix64 rng{splitmix64(g.seed ^ 0x626f6f6bULL)};
    for (int i = 0; i < 4096; ++i) {
      selfplay::Opening o;
      if (!selfplay::parse_opening(book::book_opening(b, book_plies, rng), g.search.rules, o))
        g.openings.push_back(std::move(o));
    }
    require(!g.openings.empty(), "--book: no opening could be walked from the start position");
  }

  // A folder that cannot take the records (read-only, full) is found now, not after every game.
  std::filesystem::create_directories(c.out_dir);
  const std::string probe = (std::filesystem::path(c.out_dir) / ".jiriki-write-test").string();
  write_file_atomically(probe, "jiriki selfplay checks that its --out folder takes files\n");
  std::filesystem::remove(probe);

  std::cout << c.network.backend.line() << std::endl;
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
