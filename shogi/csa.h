// CSA V2.2 game records: read (with every move checked legal) and write. The reader takes V2,
// V2.1 and V2.2 files: names N+/N-, $ information lines, the start position as PI (with optional
// removed pieces for handicaps, e.g. PI82HI22KA), P1-P9 rows and P+/P- pieces (00AL = all the
// remaining pieces), the side to move, moves (+7776FU, -0055KA), T time lines, % end statements,
// ' comments, and several statements on one line separated by commas.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "shogi/record.h"

namespace jiriki {

// Parses a CSA record from the bytes of a file (UTF-8 or Shift_JIS). Returns an error that names
// the line; `rec` is unspecified then.
std::optional<std::string> read_csa(std::string_view bytes, GameRecord& rec);
// The record as CSA V2.2 text.
std::string write_csa(const GameRecord& rec, TextEncoding enc = TextEncoding::UTF8);

// One move in CSA notation ("+7776FU": the piece is the one standing on the destination after the
// move), for the position before the move.
std::string move_to_csa(const Position& pos, Move m);
// Parses a CSA move for `pos` and checks that it is legal; returns an error otherwise.
std::optional<std::string> move_from_csa(const Position& pos, std::string_view text, Move& m);

}  // namespace jiriki
