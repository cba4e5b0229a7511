// Start positions of match games: lines of a file in the syntax of USI's `position` command
// without the word ("startpos", "sfen SFEN" or a bare SFEN, each optionally followed by
// "moves M1 M2 ..."), or random legal plies from the initial position.
#pragma once
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "shogi/opening_line.h"

namespace jiriki::match {

using Opening = OpeningLine;  // "startpos" or an SFEN as written, and legal moves from it

// Parses one line; returns an error naming the problem (bad SFEN, illegal move, a game already over).
std::optional<std::string> parse_opening(const std::string& line, Opening& out);
// Every opening of a file (blank lines and lines starting with '#' skipped); throws
// std::runtime_error naming the file and line of the first problem, or when it holds none.
std::vector<Opening> load_openings(const std::string& path);
// `plies` random legal moves from the initial position, never ending the game.
Opening random_opening(int plies, std::mt19937_64& rng);

}  // namespace jiriki::match
