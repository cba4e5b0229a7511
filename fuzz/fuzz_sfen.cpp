// Fuzzes Position::set_sfen: no input crashes it, a rejected one leaves the position unchanged, and
// an accepted one writes out an SFEN that reads back to the same position, whose legal moves can
// be generated and played.
#include <string>

#include "fuzz/harness.h"
#include "shogi/movegen.h"

using namespace jiriki;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  Position pos;
  const std::string before = pos.sfen();
  if (pos.set_sfen(text)) {
    FUZZ_CHECK(pos.sfen() == before);
    return 0;
  }
  Position again;
  FUZZ_CHECK(!again.set_sfen(pos.sfen()));
  FUZZ_CHECK(again.sfen() == pos.sfen());
  FUZZ_CHECK(again.key() == pos.key());
  for (Move m : legal_moves(pos)) {
    FUZZ_CHECK(pos.is_legal(m));
    pos.do_move(m);
    pos.undo_move();
  }
  FUZZ_CHECK(pos.sfen() == again.sfen());
  return 0;
}
