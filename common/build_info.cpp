#include "common/build_info.h"

#include "jiriki_git.h"  // generated at every build (cmake/git_describe.cmake)

namespace jiriki {

std::string build_info() {
  std::string line = "jiriki " JIRIKI_VERSION " (git " JIRIKI_GIT_DESCRIBE ")";
  const std::string with = JIRIKI_BUILT_WITH, networks = JIRIKI_NETWORK_HASHES;
  line += with.empty() ? "; CPU reference backend only" : "; built with " + with;
  line += networks.empty() ? "; no embedded networks" : "; networks " + networks;
  return line;
}

}  // namespace jiriki
