// Positions for the tests, set from text that must be valid.
#pragma once
#include <catch2/catch.hpp>
#include <string>

#include "shogi/position.h"

namespace jiriki::testing {

// The position of `sfen`; an SFEN that set_sfen refuses fails the test with its reason.
inline Position from_sfen(const std::string& sfen) {
  Position pos;
  const auto error = pos.set_sfen(sfen);
  INFO(sfen << ": " << error.value_or(""));
  REQUIRE_FALSE(error);
  return pos;
}

}  // namespace jiriki::testing
