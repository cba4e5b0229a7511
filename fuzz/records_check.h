// The round trips the CSA and KIF harnesses check on a record they read: written as CSA (UTF-8,
// Shift_JIS) and KIF (UTF-8 with BOM, Shift_JIS) it reads back with the same start and moves.
#pragma once
#include <stdexcept>
#include <string>

#include "fuzz/harness.h"
#include "shogi/csa.h"
#include "shogi/kif.h"

namespace jiriki {

inline void check_same_game(const GameRecord& a, const GameRecord& b) {
  FUZZ_CHECK(a.start.sfen() == b.start.sfen());
  FUZZ_CHECK(a.moves == b.moves);
}

inline void check_round_trips(const GameRecord& rec) {
  for (TextEncoding enc : {TextEncoding::UTF8, TextEncoding::UTF8_BOM, TextEncoding::SHIFT_JIS}) {
    std::string csa, kif;
    try {
      csa = write_csa(rec, enc);
      kif = write_kif(rec, enc);
    } catch (const std::runtime_error&) {
      continue;  // a name Shift_JIS cannot hold: refused with a message, as documented
    }
    GameRecord back;
    FUZZ_CHECK(!read_csa(csa, back));
    check_same_game(rec, back);
    GameRecord back_kif;
    FUZZ_CHECK(!read_kif(kif, back_kif));
    check_same_game(rec, back_kif);
  }
}

}  // namespace jiriki
