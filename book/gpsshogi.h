// gpsshogi's opening book (OpenShogiLib's "WeightedBook", joseki.dat of the Debian package
// gpsshogi-data) read into a YaneuraOu book.
//
// The file, every integer 4 bytes big-endian (OSL's book/openingBook.h):
//   header  version (1), number of states, number of moves, index of the start state
//   states  16 bytes each: index of its first move, number of moves, Black's wins, White's wins
//   moves   12 bytes each: the move, the index of the state it leads to, its weight for the side to move
//   boards  164 bytes each (one per state; not needed here: states are reached by playing the moves)
// A move is OSL's packed move: bits 0-7 the origin (file << 4 | rank, 0 for a drop), bits 8-15 the
// destination (file << 4 | rank), bit 19 promotion, bits 24-27 the piece type after the move in OSL's
// numbering (2-7 promoted pawn..rook, 8 king, 9 gold, 10-15 pawn, lance, knight, silver, bishop,
// rook), bits 28-31 the player.
#pragma once
#include <cstdint>
#include <string>

#include "book/book.h"

namespace jiriki::book {

struct GpsImportStats {
  int64_t states = 0;       // states in the file
  int64_t moves = 0;        // moves in the file
  int64_t reached = 0;      // states reached from the start state
  int64_t positions = 0;    // positions written (with at least one move of positive weight)
  int64_t book_moves = 0;   // moves written
  int64_t zero_weight = 0;  // moves left out for their weight 0 (gpsshogi never plays them)
};

// Reads joseki.dat; every move of positive weight becomes a book move with its weight as the count
// (value 0, depth 0). Throws std::runtime_error naming the problem when the file is not such a book
// (bad header, sizes that do not add up, an index out of range, a move illegal in its position).
Book import_gpsshogi(const std::string& path, GpsImportStats* stats = nullptr);

}  // namespace jiriki::book
