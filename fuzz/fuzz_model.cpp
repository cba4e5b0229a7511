// Fuzzes deserialize_model on model file bytes: every bad file is refused with ModelFileError (no
// crash, no other exception, no huge allocation from a size field), and a model it accepts
// serializes back to the same bytes (an all-f32 file of the current version) or to a file that
// reads back to the same model (version 1, bf16 weights). The first input byte picks what the rest is: even, the file's
// bytes as they are; odd, a payload that the harness wraps in a correct header and checksum, so
// that mutations reach the architecture and tensor checks instead of stopping at the checksum.
#include <algorithm>
#include <cstring>
#include <vector>

#include "common/fnv1a.h"
#include "fuzz/harness.h"
#include "nn/model_file.h"

using namespace jiriki;

namespace {
template <class T>
void put(std::vector<uint8_t>& out, T v) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.insert(out.end(), b, b + sizeof(T));
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::vector<uint8_t> file;
  if (data[0] % 2 == 0) {
    file.assign(data + 1, data + size);
  } else {
    file.assign(nn::MODEL_MAGIC, nn::MODEL_MAGIC + 8);
    put<uint32_t>(file, nn::MODEL_FORMAT_VERSION);
    put<uint64_t>(file, uint64_t(size - 1));
    file.insert(file.end(), data + 1, data + size);
    put<uint64_t>(file, fnv1a64(data + 1, size - 1));
  }
  try {
    nn::ModelFileSummary summary;
    const nn::Model model = nn::deserialize_model(file.data(), file.size(), "fuzz input", &summary);
    const std::vector<uint8_t> again = nn::serialize_model(model);
    // A current all-f32 file is written back byte for byte; any accepted file (version 1, bf16 weights)
    // gives a model whose f32 file reads back to itself.
    if (summary.version == nn::MODEL_FORMAT_VERSION && summary.bf16_tensors == 0) FUZZ_CHECK(again == file);
    FUZZ_CHECK(nn::serialize_model(nn::deserialize_model(again.data(), again.size(), "again")) == again);
  } catch (const nn::ModelFileError&) {
    // refused with a message: what a bad file should get
  }
  return 0;
}
