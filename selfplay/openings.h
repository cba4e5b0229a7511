// Start positions of self-play games: the initial position, or the lines of a file, one opening
// per line in the syntax of USI's `position` command without the word: "startpos", "sfen SFEN"
// or a bare SFEN, each optionally followed by "moves M1 M2 ...". Blank lines and lines starting
// with '#' are skipped. The moves of an opening are part of each game's record (not as training
// targets), so that repetitions are judged over the whole game.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "shogi/game_rules.h"
#include "shogi/opening_line.h"

namespace jiriki::selfplay {

using Opening = OpeningLine;  // its SFEN at move number 1, and legal moves that do not end the game

// Parses one opening line; returns an error naming the problem (bad SFEN, illegal move, a
// position without all 40 pieces, which no record format can hold, or a line that ends the game).
std::optional<std::string> parse_opening(const std::string& line, const GameRules& rules, Opening& out);

// Reads an openings file; throws std::runtime_error naming the file and line of the first problem,
// or when the file holds no opening.
std::vector<Opening> load_openings(const std::string& path, const GameRules& rules);

}  // namespace jiriki::selfplay
