// Child processes through Boost.Process v1 (Boost 1.74).
#include "match/process.h"

#include <boost/process/search_path.hpp>

namespace jiriki::match {

std::mutex& spawn_mutex() {
  static std::mutex m;
  return m;
}

boost::filesystem::path find_program(const std::string& cmd) {
  if (cmd.find('/') != std::string::npos) return cmd;
  return boost::process::search_path(cmd);
}

}  // namespace jiriki::match
