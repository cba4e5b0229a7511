// Opening lines, as openings files, books and GUIs write them: USI's `position` command without
// the word ("startpos", "sfen SFEN" or a bare SFEN), optionally followed by "moves M1 M2 ...".
// Self-play and matches both start games from them; each adds its own checks of when a game is over.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "shogi/position.h"

namespace jiriki {

struct OpeningLine {
  std::string sfen;          // as written ("startpos" for the initial position)
  std::vector<Move> moves;   // legal in turn from it
  std::string text() const;  // as a line of an openings file
};

// Why a game cannot go on from `pos` (it is over, or the caller cannot use it), or nullopt.
using OpeningCheck = std::function<std::optional<std::string>(const Position& pos)>;

// Parses one line: the SFEN must be valid and every move legal; `check` is asked of the start
// position and after each move. With `from_move_one` the start position's move number becomes 1 (a
// game's length then counts from it, as its record does) and `out.sfen` is that SFEN in full.
// Returns the first problem, or nullopt with `out` filled.
std::optional<std::string> parse_opening_line(const std::string& line, const OpeningCheck& check, bool from_move_one,
                                              OpeningLine& out);

// Gives every line of a file but blank ones and those starting with '#' to `take`, which returns a
// problem or nullopt; throws std::runtime_error naming the file and line of the first problem, or
// when the file cannot be read or holds no line.
void read_opening_lines(const std::string& path,
                        const std::function<std::optional<std::string>(const std::string&)>& take);

}  // namespace jiriki
