// `jiriki usi` (and `jiriki` with no arguments): the USI engine on stdin/stdout; and
// `jiriki bench search`: playouts per second and batch fill of the tree search.
#include <chrono>
#include <iostream>
#include <sstream>
#include <thread>

#include "command/commands.h"
#include "command/options.h"
#include "common/args.h"
#include "engine/network_setup.h"
#include "engine/search/search.h"
#include "nn/model_file.h"
#include "usi/engine.h"

namespace jiriki {

int cmd_usi(int argc, char** argv) {
  if (argc > 1) {
    Args args("jiriki [usi]", "The USI engine: reads USI commands on stdin and answers on stdout.");
    if (int rc = args.parse(argc, argv); rc >= 0) {
      if (rc == 0) {  // after the help: the engine's options, as `usi` announces them
        std::ostringstream unused;
        const usi::Engine engine(unused);
        std::cout
            << "\nengine options (setoption name NAME value VALUE; also in engine_options.txt beside the binary):\n";
        for (const usi::Option& o : engine.options().all()) std::cout << o.help_line() << "\n";
        std::cout << "aliases:";
        for (const auto& [alias, name] : engine.options().aliases()) std::cout << " " << alias << "=" << name;
        std::cout << "\n";
      }
      return rc;
    }
  }
  std::ios::sync_with_stdio(false);
  usi::Engine engine(std::cout);
  return engine.loop(std::cin);
}

int bench_search(int argc, char** argv) {
  Args args(
      "jiriki bench search [--model FILE | --blocks N --channels C] [--backend B] [--precision P] [--threads T] "
      "[--batch B] [--seconds S]",
      "Searches one position for a fixed time and reports playouts per second and how full the network's "
      "batches were. Without --model the network has random weights of the given size (the network's "
      "speed does not depend on its weights, though the tree's shape does).");
  std::string model_file, sfen = "startpos";
  nn::Architecture arch;
  arch.blocks = engine::DEFAULT_MODEL_BLOCKS;
  arch.channels = engine::DEFAULT_MODEL_CHANNELS;
  search::SearchParams params;
  double seconds = 10;
  int64_t hash_mib = 8192;
  nn::Precision precision = nn::Precision::AUTO;
  options::Device device;
  args.bind("model", model_file, "model file (default: a random network of --blocks x --channels)")
      .bind("blocks", arch.blocks, "residual blocks of the random network", 1, 1024)
      .bind("channels", arch.channels, "channels of the random network", 1, 4096)
      .bind("batch", params.batch_size, "leaves per network call per thread", 1, 65536)
      .bind("seconds", seconds, "search time")
      .bind("hash", hash_mib, "node pool in MiB", 1, int64_t(1) << 30)
      .bind("leaf-mate", params.leaf_mate_plies, "mate search plies at new leaves: 0, 1, 3 or 5")
      .bind("sfen", sfen, "position to search")
      .bind("precision", precision,
            "auto, fp32, bf16 or int8 (auto: what the engine uses: bf16 on the GPU; on a CPU int8 for a ReLU network "
            "where it has AVX2, else bf16 with AVX-512 bf16, else fp32)",
            nn::parse_precision, nn::precision_name);
  options::bind_device(args, device, nn::BackendUse::INFERENCE, "the CUDA device");
  options::bind_threads(args, params.threads, "search threads");
  if (int rc = args.parse(argc, argv); rc >= 0) return rc;
  const int threads = params.threads, batch = params.batch_size, leaf_mate = params.leaf_mate_plies;
  if (threads < 1 || seconds <= 0 || (leaf_mate != 0 && leaf_mate != 1 && leaf_mate != 3 && leaf_mate != 5)) {
    std::cerr << "error: --threads, --batch, --seconds and --hash must be positive; --leaf-mate 0, 1, 3 or 5\n";
    return 2;
  }

  nn::Model model;
  std::string network;
  if (args.has("model")) {
    model = nn::load_model(model_file);
    network = model_file;
  } else {
    model = nn::Model(arch);
    nn::init_model(model, engine::DEFAULT_MODEL_SEED);
    network = "random weights (seed " + std::to_string(engine::DEFAULT_MODEL_SEED) + ")";
  }
  engine::NetworkSettings settings;
  settings.backend = device.backend;
  settings.gpu = options::gpu(device);
  settings.batch = batch;
  settings.evaluators = threads;
  settings.precision = precision;
  const engine::NetworkSetup setup = engine::NetworkSetup::resolve(settings);
  auto queue = setup.make_queue(model);

  search::Searcher searcher(size_t(hash_mib) << 20);
  searcher.set_params(params);
  searcher.set_eval_queue(queue.get());
  if (auto err = searcher.set_position(sfen, {})) {
    std::cerr << "error: " << *err << "\n";
    return 2;
  }
  std::cout << "network: " << model.arch.blocks << " blocks x " << model.arch.channels << " channels, " << network
            << "\n"
            << setup.queue_line(*queue) << "\n"
            << "threads " << threads << ", batch " << batch << ", leaf mate search " << leaf_mate << " plies, "
            << seconds << " s on " << sfen << "\n";

  // Warm-up: the first calls of a backend pay for its setup (kernels chosen, memory allocated).
  const auto warm_start = std::chrono::steady_clock::now();
  queue->warm_up();
  std::cout << "warm-up (every evaluator at each batch size's first use) "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - warm_start).count() << " s\n";
  search::SearchLimits warm;
  warm.nodes = int64_t(batch) * threads * 4;
  searcher.run(warm);
  searcher.clear_tree();
  queue->reset_stats();

  search::SearchLimits limits;
  limits.infinite = true;
  search::SearchResult result;
  searcher.start(limits, nullptr, [&result](const search::SearchResult& r) { result = r; });
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  searcher.stop();
  searcher.wait();

  const search::SearchInfo& info = result.info;
  const auto stats = queue->stats();
  const double avg = stats.calls ? double(stats.positions) / double(stats.calls) : 0.0;
  std::cout << "playouts " << info.nodes << " in " << info.time_ms << " ms: " << info.nps << " nodes/s\n"
            << "network calls " << stats.calls << ", positions " << stats.positions << ", average batch " << avg
            << " of " << queue->max_batch() << " (fill " << 100.0 * avg / queue->max_batch() << "%)\n"
            << "tree memory " << searcher.pool().used() / std::max<int64_t>(info.nodes, 1)
            << " bytes per playout, hashfull " << info.hashfull << " per mille, best move " << move_to_usi(result.best)
            << "\n";
  if (searcher.pool().full()) std::cout << "warning: the node pool filled up; raise --hash\n";
  return 0;
}

}  // namespace jiriki
