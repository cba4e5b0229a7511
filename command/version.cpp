// jiriki version (also jiriki --version): the version, the commit, the backends compiled in and the
// embedded networks' hashes, in the line the engine also sends at `isready`.
#include <cstring>
#include <iostream>

#include "command/commands.h"
#include "common/build_info.h"

namespace jiriki {

int cmd_version(int argc, char** argv) {
  if (argc > 1 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::cout << "usage: jiriki version (or jiriki --version)\n"
                 "Prints the version, the git commit it was built from, the backends and libraries compiled in\n"
                 "and the sha256 (first 16 hex digits) of the networks embedded in the binary.\n";
    return 0;
  }
  if (argc > 1) {
    std::cerr << "error: version takes no arguments (see jiriki version --help)\n";
    return 2;
  }
  std::cout << build_info() << "\n";
  return 0;
}

}  // namespace jiriki
