// What every fuzz harness shares: the rules' tables, made before the first input (as main() does
// for the engine), and FUZZ_CHECK, which aborts (a crash libFuzzer records, with the input that
// caused it) when a parser breaks a promise beyond not crashing, e.g. that what it accepted
// writes out and reads back the same. Included by exactly one source file per harness.
#pragma once
#include <cstdio>
#include <cstdlib>

#include "shogi/position.h"

#define FUZZ_CHECK(cond)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  jiriki::Position::init();
  return 0;
}
