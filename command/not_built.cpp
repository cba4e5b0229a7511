// The subcommands a build leaves out (the Windows build: CMakeLists.txt defines JIRIKI_WITHOUT_*),
// each answering with what is missing instead of the linker failing or the name being unknown.
#include <iostream>

#include "command/commands.h"

namespace jiriki {

namespace {

[[maybe_unused]] int not_built(const char* name, const char* needs) {
  std::cerr << "error: 'jiriki " << name << "' is not built in this Windows build (it needs " << needs
            << "); build jiriki on Linux for it\n";
  return 2;
}

}  // namespace

#if JIRIKI_WITHOUT_SELFPLAY
int cmd_selfplay(int, char**) { return not_built("selfplay", "nlohmann-json"); }
#endif
#if JIRIKI_WITHOUT_TRAINING
int cmd_train(int, char**) { return not_built("train", "nlohmann-json"); }
int bench_train(int, char**) { return not_built("bench train", "nlohmann-json"); }
int bench_allreduce(int, char**) { return not_built("bench allreduce", "the trainer, which needs nlohmann-json"); }
#endif
#if JIRIKI_WITHOUT_MATCH
int cmd_match(int, char**) { return not_built("match", "Boost.Process and nlohmann-json"); }
#endif
#if JIRIKI_WITHOUT_LOOP
int cmd_loop(int, char**) { return not_built("loop", "Boost.Process and nlohmann-json"); }
#endif

}  // namespace jiriki
