// HuffmanCodedPos (hcp, 32 bytes) and the 38-byte hcpe training record, bit-compatible with the
// files Apery, dlshogi and cshogi read and write.
//
// hcp bit stream, bits taken least significant first from byte 0 on: the side to move (1 bit),
// Black's and White's king squares (7 bits each, our square index), then every other square in
// square order 1a, 1b, ..., 9i with the Huffman code of its content, then Black's hand and White's
// hand, each in the order pawn, lance, knight, silver, gold, bishop, rook, one code per piece.
// Each piece's hand code is one bit shorter than its board code, so every position of the full
// set of 40 pieces takes exactly 256 bits.
//
// hcpe record (little-endian): hcp, int16 eval, uint16 move16 (our Move), uint8 game result
// (GameResult: 0 draw, 1 Black won, 2 White won), one pad byte. dlshogi's hcpe3 format keeps
// the result in the low two bits and adds flags above them (0x4 sennichite, 0x8 entering king,
// and 0x16 for the ply limit as dlshogi spells it): readers here pass the byte through untouched.
#pragma once
#include <array>
#include <bit>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shogi/position.h"

namespace jiriki {

struct HuffmanCodedPos {
  std::array<uint8_t, 32> data{};
  bool operator==(const HuffmanCodedPos&) const = default;
};

struct HcpeRecord {
  HuffmanCodedPos hcp;
  int16_t eval = 0;     // score for the side to move
  uint16_t move16 = 0;  // best move (our Move value)
  uint8_t result = 0;   // GameResult, possibly with hcpe3 flags
  uint8_t pad = 0;
  bool operator==(const HcpeRecord&) const = default;
};
static_assert(sizeof(HcpeRecord) == 38, "hcpe records are 38 bytes");
static_assert(std::endian::native == std::endian::little, "hcpe files are little-endian");

// Encodes a position (it must hold all 40 pieces, as every legal game position does).
HuffmanCodedPos encode_hcp(const Position& pos);
// Decodes an hcp into `pos` (move number 1). Returns an error naming what is wrong with the bit
// stream or the position it describes; `pos` is unchanged then.
std::optional<std::string> decode_hcp(const HuffmanCodedPos& hcp, Position& pos);

// Reads a whole hcpe file; a size that is not a multiple of 38 is an error naming the file and
// the byte offset of the truncated record.
std::optional<std::string> read_hcpe_file(const std::string& path, std::vector<HcpeRecord>& records);
// Writes (or appends to) an hcpe file.
std::optional<std::string> write_hcpe_file(const std::string& path, const std::vector<HcpeRecord>& records,
                                           bool append = false);

}  // namespace jiriki
