// `jiriki bench KIND`: dispatches to the benchmark of each part of the engine.
#include <iostream>
#include <string>

#include "command/commands.h"

namespace jiriki {

static const Subcommand BENCHES[] = {
    {"perft", "leaves per second of single-threaded perft", bench_perft},
    {"nn", "positions per second and latency of a network backend", bench_nn},
    {"search", "playouts per second and batch fill of the tree search", bench_search},
    {"train", "samples per second of the trainer (CPU or CUDA) and of its data loader", bench_train},
    {"book", "opening book lookups in memory and on the fly, on a generated book", bench_book},
    {"allreduce", "the host all-reduce of `train --allreduce host` between replicas on threads", bench_allreduce},
};

int cmd_bench(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::cout << "usage: jiriki bench KIND [OPTIONS]\n\nkinds:\n";
    for (const auto& b : BENCHES) std::cout << "  " << b.name << "\t" << b.summary << "\n";
    return argc < 2 ? 2 : 0;
  }
  std::string kind = argv[1];
  for (const auto& b : BENCHES)
    if (kind == b.name) return b.run(argc - 1, argv + 1);
  std::cerr << "error: unknown benchmark '" << kind << "' (see jiriki bench --help)\n";
  return 2;
}

}  // namespace jiriki
