// Fuzzes read_kif on file bytes (UTF-8 with or without BOM, or Shift_JIS): no input crashes it, and
// a record it accepts writes out as KIF and CSA that read back to the same game.
#include <string>

#include "fuzz/harness.h"
#include "fuzz/records_check.h"
#include "shogi/kif.h"

using namespace jiriki;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  GameRecord rec;
  if (read_kif(std::string_view(reinterpret_cast<const char*>(data), size), rec)) return 0;
  check_round_trips(rec);
  return 0;
}
