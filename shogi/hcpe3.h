// dlshogi's hcpe3 game records: one record per game, the start position as an hcp, then every move
// with its evaluation and, for moves meant for training, the root visit counts of the search.
//
// Layout (little-endian, packed):
//   header   36 bytes: hcp of the start position (32), uint16 move count, uint8 result, uint8 opponent
//   per move  6 bytes: uint16 move16, int16 eval, uint16 candidate count (0: not for training)
//   then candidate count x 4 bytes: uint16 move16, uint16 visits
// result: bits 0-1 GameResult (0 draw, 1 Black won, 2 White won) and flags 0x4 sennichite,
// 0x8 entering-king declaration, 0x10 maximum game length. dlshogi itself writes 0x16 for the
// last flag; readers here treat any of bits 0x10 as "maximum length" and such a game as a draw.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shogi/hcpe.h"
#include "shogi/record.h"

namespace jiriki {

namespace hcpe3 {
constexpr uint8_t RESULT_MASK = 0x3;
constexpr uint8_t SENNICHITE = 0x4;
constexpr uint8_t DECLARATION = 0x8;
constexpr uint8_t MAX_MOVES = 0x10;
}  // namespace hcpe3

struct Hcpe3Candidate {
  uint16_t move16 = 0;
  uint16_t visits = 0;
  bool operator==(const Hcpe3Candidate&) const = default;
};

struct Hcpe3Move {
  Move move = MOVE_NONE;
  int16_t eval = 0;                        // centipawn-like score for the side to move
  std::vector<Hcpe3Candidate> candidates;  // empty: the move is not a policy training target
  bool operator==(const Hcpe3Move&) const = default;
};

struct Hcpe3Game {
  HuffmanCodedPos start;
  uint8_t result = 0;    // GameResult | flags
  uint8_t opponent = 0;  // 0 for self-play
  std::vector<Hcpe3Move> moves;
  bool operator==(const Hcpe3Game&) const = default;

  // The winner, with the maximum-length flag read as a draw whatever the low bits say.
  GameResult winner() const { return (result & hcpe3::MAX_MOVES) ? DRAW : GameResult(result & hcpe3::RESULT_MASK); }
};

// Appends the bytes of one game to `out`.
void append_hcpe3(const Hcpe3Game& game, std::vector<uint8_t>& out);

// Parses every game of an hcpe3 byte stream. Each game is checked: the start position decodes and
// every move is legal when replayed. A malformed game stops the parse with an error naming the
// byte offset; the games before it are kept in `games`.
std::optional<std::string> parse_hcpe3(const std::vector<uint8_t>& bytes, std::vector<Hcpe3Game>& games);

// Conversions. A game record's end becomes the result flags and back; a win or loss without a
// flag is read back as a resignation, or a mate when the final position is checkmate. A record
// made from a game with no candidates uses the played move as the only candidate, with 1 visit.
// Throws std::invalid_argument when the start position cannot be coded (fewer than 40 pieces) or
// the record has no result.
Hcpe3Game hcpe3_from_record(const GameRecord& rec);
GameRecord record_from_hcpe3(const Hcpe3Game& game);  // the game must have parsed cleanly
// One hcpe record per position meant for training (candidate count > 0): hcp, eval, the played
// move and the game's result.
void append_training_positions(const Hcpe3Game& game, std::vector<HcpeRecord>& out);

std::optional<std::string> read_hcpe3_file(const std::string& path, std::vector<Hcpe3Game>& games);
std::optional<std::string> write_hcpe3_file(const std::string& path, const std::vector<Hcpe3Game>& games);

}  // namespace jiriki
