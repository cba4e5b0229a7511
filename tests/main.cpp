// Catch2 entry point: initialises the attack tables once before any test runs.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "engine/position.h"

int main(int argc, char** argv) {
  jiriki::Position::init();
  return Catch::Session().run(argc, argv);
}
