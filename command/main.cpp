// jiriki: one binary, many subcommands. With no arguments it is the USI engine a GUI launches.
#include <cstring>
#include <iostream>
#include <stdexcept>

#include "command/commands.h"
#include "common/platform.h"
#include "shogi/position.h"

namespace jiriki {

static const Subcommand SUBCOMMANDS[] = {
    {"perft", "count leaf positions of the legal move tree", cmd_perft},
    {"bench", "benchmarks: perft, nn, search, train, book", cmd_bench},
    {"nn", "create, inspect and evaluate networks", cmd_nn},
    {"usi", "the USI engine for shogi GUIs (also what runs with no arguments)", cmd_usi},
    {"train", "train a network on hcpe / hcpe3 records", cmd_train},
    {"records", "convert records between hcpe3, hcpe, CSA and KIF; summarise them", cmd_records},
    {"selfplay", "generate training games by self-play (hcpe3, CSA)", cmd_selfplay},
    {"play", "show one game of the network against itself, move by move", cmd_play},
    {"match", "tournaments between USI engines: Elo, SPRT, adjudication, records", cmd_match},
    {"book", "opening books (YaneuraOu format): build, merge, info, probe, import", cmd_book},
    {"loop", "the overnight loop: self-play, train, gate, promote, generation after generation", cmd_loop},
    {"version", "the version, the backends compiled in and the embedded networks (also --version)", cmd_version},
};

static void print_help() {
  std::cout << "jiriki - a shogi engine that learns by playing itself\n\n"
               "usage: jiriki [SUBCOMMAND] [OPTIONS]\n"
               "With no subcommand jiriki is the USI engine, as a shogi GUI launches it.\n\n"
               "subcommands:\n";
  for (const auto& s : SUBCOMMANDS)
    std::cout << "  " << s.name << std::string(12 - std::strlen(s.name), ' ') << s.summary << "\n";
  std::cout << "\nRun 'jiriki SUBCOMMAND --help' for the options of each.\n";
}

}  // namespace jiriki

int main(int argc, char** argv) {
  using namespace jiriki;
  Position::init();
  set_binary_stdin();                        // a GUI's CRLF lines reach the USI reader whole; it strips the '\r'
  if (argc < 2) return cmd_usi(argc, argv);  // what a GUI launches
  std::string name = argv[1];
  if (name == "--version") name = "version";
  if (name == "--help" || name == "-h" || name == "help") {
    print_help();
    return 0;
  }
  for (const auto& s : SUBCOMMANDS) {
    if (name == s.name) {
      try {
        return s.run(argc - 1, argv + 1);
      } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
      }
    }
  }
  std::cerr << "error: unknown subcommand '" << name << "' (see jiriki --help)\n";
  return 2;
}
