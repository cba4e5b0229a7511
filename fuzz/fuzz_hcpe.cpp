// Fuzzes what reading an hcpe file does to each 38-byte record (as the trainer's loader and
// `jiriki records` do): decode the hcp, check the move16 against the position, and for a record
// that passes, make the network's input planes and the move's policy label. An hcp that decodes
// must encode back to the same 32 bytes' position.
#include <cstring>
#include <vector>

#include "fuzz/harness.h"
#include "nn/features.h"
#include "nn/model.h"
#include "shogi/hcpe.h"

using namespace jiriki;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<float> planes;
  for (size_t off = 0; off + sizeof(HcpeRecord) <= size; off += sizeof(HcpeRecord)) {
    HcpeRecord r;
    std::memcpy(&r, data + off, sizeof r);
    Position pos;
    if (decode_hcp(r.hcp, pos)) continue;
    Position again;
    FUZZ_CHECK(!decode_hcp(encode_hcp(pos), again));
    FUZZ_CHECK(again.sfen() == pos.sfen());
    if (!pos.is_legal(Move(r.move16))) continue;
    planes.resize(nn::INPUT_SIZE);
    nn::encode_features(pos, planes.data());
    const int label = nn::move_to_label(Move(r.move16), pos.side_to_move());
    FUZZ_CHECK(label >= 0 && label < nn::POLICY_SIZE);
  }
  return 0;
}
