// Fuzzes parse_hcpe3 on file bytes: no input crashes it; every game it keeps replays legally from
// its start (as the trainer's loader replays it), and writes back to the bytes it was read from.
#include <algorithm>
#include <vector>

#include "fuzz/harness.h"
#include "shogi/hcpe3.h"

using namespace jiriki;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> bytes(data, data + size);
  std::vector<Hcpe3Game> games;
  const bool failed = parse_hcpe3(bytes, games).has_value();
  std::vector<uint8_t> written;
  for (const Hcpe3Game& g : games) {
    Position pos;
    FUZZ_CHECK(!decode_hcp(g.start, pos));
    for (const Hcpe3Move& m : g.moves) {
      FUZZ_CHECK(pos.is_legal(m.move));
      pos.do_move(m.move);
    }
    append_hcpe3(g, written);
  }
  FUZZ_CHECK(written.size() <= bytes.size());
  FUZZ_CHECK(std::equal(written.begin(), written.end(), bytes.begin()));
  if (!failed) FUZZ_CHECK(written.size() == bytes.size());
  return 0;
}
