// `jiriki loop`: the overnight self-play / train / gate loop (loop/ does the work), and
// `jiriki loop worker`: self-play for a run from another host or GPU, `jiriki loop eval`: the
// evaluation matches a run lacks, played elsewhere, and `jiriki loop plot`: the plots drawn again.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <iostream>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "command/commands.h"
#include "common/args.h"
#include "loop/child.h"
#include "loop/config.h"
#include "loop/loop.h"
#include "loop/report.h"

namespace jiriki {

namespace {
std::atomic<bool> g_stop{false};
// The first Ctrl-C or SIGTERM stops the loop: the phase in flight is interrupted (training writes its
// checkpoint, self-play its finished games) and is redone by the next start. A second one ends it at
// once. The phase runs in a process group of its own, so Ctrl-C and SIGTERM are both passed on to it as SIGINT.
void on_signal(int sig) {
  g_stop = true;
  loop::interrupt_child();
  std::signal(sig, SIG_DFL);
}

int loop_worker(int argc, char** argv) {
  Args args("jiriki loop worker --dir RUN [--name NAME] [--selfplay-args \"...\"]",
            "Self-play for a run of `jiriki loop` (on a shared filesystem, from another host or another GPU): plays\n"
            "with the run's current best network, round after round of the config's worker_positions, and writes\n"
            "the games to RUN/selfplay/workers/NAME, where the loop's training finds them. Ctrl-C stops.");
  std::string dir, name, selfplay_args;
  args.bind("dir", dir, "the run directory (required)")
      .bind("name", name, "the worker's name (default: HOST-PID)")
      .bind("selfplay-args", selfplay_args, "more `jiriki selfplay` options, e.g. \"--gpus 1 --backend cuda\"");
  if (int rc = args.parse(argc, argv); rc >= 0) return rc;
  if (!args.has("dir")) throw std::invalid_argument("--dir RUN is required");
  if (name.empty()) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    name = std::string(host) + "-" + std::to_string(::getpid());
  }
  if (name.find('/') != std::string::npos) throw std::invalid_argument("--name must be a plain name");
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  return loop::run_worker(dir, name, selfplay_args, g_stop, std::cout);
}

int loop_plot(int argc, char** argv) {
  Args args("jiriki loop plot --dir RUN",
            "Draws RUN/plots/*.png again from the run's state and training logs, with gnuplot: for a run made on a\n"
            "machine without gnuplot, or copied from one (the records and networks are not needed).");
  std::string dir;
  args.bind("dir", dir, "the run directory (required)");
  if (int rc = args.parse(argc, argv); rc >= 0) return rc;
  if (!args.has("dir")) throw std::invalid_argument("--dir RUN is required");
  const std::string warning = loop::redraw_plots(dir);
  if (!warning.empty()) {
    std::cerr << "jiriki loop plot: " << warning << "\n";
    return 1;
  }
  std::cout << "plots drawn in " << dir << "/plots\n";
  return 0;
}
int loop_eval(int argc, char** argv) {
  Args args("jiriki loop eval --dir RUN [--games N] [--anchor-games N] [OPTIONS]",
            "Plays the evaluation matches that a run's finished generations lack: each generation's network against\n"
            "generation 0 (the Elo curve), against the anchor engine and against each of the config's anchors, then\n"
            "writes the history, metrics.jsonl and plots. For a run made without them (eval_first_games, anchor_games\n"
            "0, or anchors added to RUN/config.json since) on a busy GPU machine, evaluated here on idle cores. The\n"
            "options replace the run's config keys for these matches only.");
  std::string dir, anchor, anchor_tc, backend, engine_options;
  std::optional<int64_t> games, anchor_games, nodes, concurrency;
  args.bind("dir", dir, "the run directory (required)")
      .bind("games", games, "games against generation 0 per generation (eval_first_games)")
      .bind("anchor-games", anchor_games, "games against the anchor per generation (anchor_games)")
      .bind("anchor", anchor, "the anchor engine (anchor), e.g. \"cmd=/usr/games/gpsusi env.OSL_HOME=/tmp/gps\"")
      .bind("anchor-tc", anchor_tc, "the anchor matches' time control (anchor_tc)")
      .bind("nodes", nodes, "playouts per move against generation 0 (gate_nodes)")
      .bind("concurrency", concurrency, "games at once (gate_concurrency)")
      .bind("backend", backend, "the engines' network backend: cpu, cuda or auto (backend)")
      .bind("engine-options", engine_options, "more USI options of jiriki, e.g. \"option.Threads=1\" (engine_options)");
  if (int rc = args.parse(argc, argv); rc >= 0) return rc;
  if (!args.has("dir")) throw std::invalid_argument("--dir RUN is required");
  nlohmann::json overrides = nlohmann::json::object();
  for (const auto& [value, key] : {std::pair{&games, "eval_first_games"}, std::pair{&anchor_games, "anchor_games"},
                                   std::pair{&nodes, "gate_nodes"}, std::pair{&concurrency, "gate_concurrency"}})
    if (*value) overrides[key] = **value;
  for (const auto& [option, value, key] :
       {std::tuple{"anchor", &anchor, "anchor"}, std::tuple{"anchor-tc", &anchor_tc, "anchor_tc"},
        std::tuple{"backend", &backend, "backend"}, std::tuple{"engine-options", &engine_options, "engine_options"}})
    if (args.has(option)) overrides[key] = *value;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  return loop::evaluate_run(dir, overrides, g_stop, std::cout);
}
}  // namespace

int cmd_loop(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "worker") return loop_worker(argc - 1, argv + 1);
  if (argc >= 2 && std::string(argv[1]) == "plot") return loop_plot(argc - 1, argv + 1);
  if (argc >= 2 && std::string(argv[1]) == "eval") return loop_eval(argc - 1, argv + 1);
  Args args(
      "jiriki loop --dir RUN [--config FILE] [--teacher \"USI ENGINE COMMAND\"] [--generations N]\n"
      "       jiriki loop worker --dir RUN [OPTIONS]\n"
      "       jiriki loop eval --dir RUN [OPTIONS]\n"
      "       jiriki loop plot --dir RUN",
      "The overnight loop: self-play with the best network, training on a sliding window of the newest\n"
      "positions, a gate match of the candidate against the best, promotion; generation after generation.\n"
      "RUN holds everything (config.json, state.json, models/, records, metrics.jsonl, tensorboard/, plots/).\n"
      "Starting it again continues where it stopped; Ctrl-C or a kill loses only the phase in flight.");
  std::string dir, config_file, teacher;
  std::optional<int64_t> generations;
  bool config_help = false;
  args.bind("dir", dir, "the run directory (required)")
      .bind("config", config_file,
            "a JSON config (keys: --config-help); stored as RUN/config.json, which later starts reuse")
      .bind("teacher", teacher, "bootstrap generation 0 from this USI engine's games (sets the config's teacher)")
      .bind("generations", generations, "stop after this many generations (sets the config's generations)")
      .flag("config-help", config_help, "print every config key with its default and meaning");
  if (int rc = args.parse(argc, argv); rc >= 0) return rc;
  if (config_help) {
    std::cout << "jiriki loop config keys (a JSON object; keys left out take their defaults):\n" << loop::config_help();
    return 0;
  }
  if (!args.has("dir")) throw std::invalid_argument("--dir RUN is required");
  loop::Config config = args.has("config") ? loop::Config::load(config_file) : loop::read_config(dir);
  if (args.has("teacher")) config.set("teacher", teacher);
  if (generations) config.set("generations", *generations);
  loop::write_config(dir, config);
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  return loop::run_loop(dir, g_stop, std::cout);
}

}  // namespace jiriki
