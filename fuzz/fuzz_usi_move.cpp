// Fuzzes move_from_usi and Position::is_legal on move text: the first byte picks one of a few
// positions (drops, promotions, checks), the rest is the text. A move that is legal must write
// back as the same text and play and undo cleanly.
#include <string>

#include "fuzz/harness.h"
#include "shogi/movegen.h"

using namespace jiriki;

namespace {
const char* const POSITIONS[] = {
    Position::STARTPOS_SFEN,
    "l6nl/5+P1gk/2np1S3/p1p4Pp/3P2Sp1/1PPb2P1P/P5GS1/R8/LN4bKL w GR5pnsg 1",
    "R8/2K1S1SSk/4B4/9/9/9/9/9/1L1L1L3 b RBGSNLP3g3n17p 1",
    "7lk/9/8S/9/9/9/9/7L1/8K b P 1",
    "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  Position pos;
  FUZZ_CHECK(!pos.set_sfen(POSITIONS[data[0] % (sizeof POSITIONS / sizeof *POSITIONS)]));
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::string before = pos.sfen();
  const Move m = move_from_usi(pos, text);
  if (m == MOVE_NONE || !pos.is_legal(m)) return 0;
  FUZZ_CHECK(move_to_usi(m) == text);
  pos.do_move(m);
  pos.undo_move();
  FUZZ_CHECK(pos.sfen() == before);
  return 0;
}
