// Catch2 entry point: initialises the attack tables once before any test runs.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdlib>

#include "shogi/position.h"

int main(int argc, char** argv) {
  jiriki::Position::init();
  // The tests never read or write the user's file of tuned cuDNN engines (nn/cuda/fused_conv.cpp);
  // the one test of that file points it elsewhere.
  setenv("JIRIKI_CUDNN_CACHE", "off", 1);
  return Catch::Session().run(argc, argv);
}
