// Reading and writing the model file (format in nn/model_file.h).
#include "nn/model_file.h"

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "common/atomic_file.h"
#include "common/bf16.h"
#include "common/fnv1a.h"

namespace jiriki::nn {

static_assert(std::endian::native == std::endian::little, "the model file is read by copying little-endian bytes");

constexpr size_t HEADER_SIZE = 8 + 4 + 8;
constexpr size_t CHECKSUM_SIZE = 8;
// Bounds that no real network reaches; they keep a corrupt architecture from allocating terabytes.
constexpr uint32_t MAX_BLOCKS = 1024, MAX_CHANNELS = 4096;

namespace {

template <class T>
void put(std::vector<uint8_t>& out, T v) {
  size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

// Bounds-checked reads from the (already checksummed) payload.
struct Reader {
  const uint8_t* p;
  size_t left;
  const std::string& source;

  void need(size_t n, const char* what) {
    if (n > left) throw ModelFileError(source + ": malformed payload: it ends inside " + what);
  }
  template <class T>
  T get(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p, sizeof(T));
    p += sizeof(T);
    left -= sizeof(T);
    return v;
  }
};

}  // namespace

std::vector<uint8_t> serialize_model(const Model& model, WeightStorage storage) {
  std::vector<uint8_t> payload;
  const Architecture& a = model.arch;
  put<uint32_t>(payload, uint32_t(a.feature_set));
  put<uint32_t>(payload, uint32_t(a.blocks));
  put<uint32_t>(payload, uint32_t(a.channels));
  put<uint32_t>(payload, uint32_t(a.activation));
  put<float>(payload, a.bn_eps);
  auto tensors = model.tensors();
  put<uint32_t>(payload, uint32_t(tensors.size()));
  for (const auto& [name, t, trainable] : tensors) {
    put<uint32_t>(payload, uint32_t(name.size()));
    payload.insert(payload.end(), name.begin(), name.end());
    put<uint32_t>(payload, uint32_t(t->shape.size()));
    for (int d : t->shape) put<uint32_t>(payload, uint32_t(d));
    const bool bf16 = storage == WeightStorage::BF16 && trainable && t->shape.size() >= 2;  // conv and fc weights
    put<uint32_t>(payload, bf16 ? 1 : 0);
    if (bf16) {
      for (float v : t->data) put<uint16_t>(payload, to_bf16(v));
    } else {
      const auto* bytes = reinterpret_cast<const uint8_t*>(t->data.data());
      payload.insert(payload.end(), bytes, bytes + t->data.size() * sizeof(float));
    }
  }

  std::vector<uint8_t> out(MODEL_MAGIC, MODEL_MAGIC + 8);
  put<uint32_t>(out, MODEL_FORMAT_VERSION);
  put<uint64_t>(out, uint64_t(payload.size()));
  out.insert(out.end(), payload.begin(), payload.end());
  put<uint64_t>(out, fnv1a64(payload.data(), payload.size()));
  return out;
}

Model deserialize_model(const uint8_t* data, size_t size, const std::string& source, ModelFileSummary* summary) {
  auto fail = [&](const std::string& what) { return ModelFileError(source + ": " + what); };
  if (size < 8 || std::memcmp(data, MODEL_MAGIC, 8) != 0)
    throw fail("wrong magic: not a jiriki model file (it must start with \"JIRIKINN\")");
  if (size < HEADER_SIZE) throw fail("truncated file: " + std::to_string(size) + " bytes, shorter than the header");
  uint32_t version;
  uint64_t payload_size;
  std::memcpy(&version, data + 8, 4);
  std::memcpy(&payload_size, data + 12, 8);
  if (version < 1 || version > MODEL_FORMAT_VERSION)
    throw fail("unsupported model format version " + std::to_string(version) + " (this build reads versions 1 to " +
               std::to_string(MODEL_FORMAT_VERSION) + ")");
  const uint64_t expected = HEADER_SIZE + payload_size + CHECKSUM_SIZE;
  if (payload_size > size || size < expected)
    throw fail("truncated file: " + std::to_string(size) + " bytes, the header announces " + std::to_string(expected));
  if (size > expected)
    throw fail("trailing data: " + std::to_string(size) + " bytes, the header announces " + std::to_string(expected));
  const uint8_t* payload = data + HEADER_SIZE;
  uint64_t stored;
  std::memcpy(&stored, payload + payload_size, 8);
  if (fnv1a64(payload, payload_size) != stored) throw fail("checksum mismatch: the file is corrupt");

  Reader r{payload, size_t(payload_size), source};
  Architecture a;
  uint32_t feature_set = r.get<uint32_t>("the architecture");
  uint32_t blocks = r.get<uint32_t>("the architecture");
  uint32_t channels = r.get<uint32_t>("the architecture");
  uint32_t activation = r.get<uint32_t>("the architecture");
  a.bn_eps = r.get<float>("the architecture");
  if (feature_set != uint32_t(FeatureSet::DLSHOGI_119))
    throw fail("unsupported feature set " + std::to_string(feature_set) + " (this build knows 1 = dlshogi 119 planes)");
  if (activation > uint32_t(Activation::SWISH)) throw fail("unknown activation " + std::to_string(activation));
  if (blocks > MAX_BLOCKS || channels < 1 || channels > MAX_CHANNELS)
    throw fail("implausible architecture: " + std::to_string(blocks) + " blocks, " + std::to_string(channels) +
               " channels");
  if (!(a.bn_eps > 0.0f)) throw fail("batch-norm epsilon must be positive");
  a.feature_set = FeatureSet(feature_set);
  a.blocks = int(blocks);
  a.channels = int(channels);
  a.activation = Activation(activation);
  // Checked before allocating, so that a bad header cannot ask for terabytes.
  const uint64_t needed = uint64_t(tensor_floats(a)) * (version == 1 ? sizeof(float) : sizeof(uint16_t));
  if (needed > payload_size)
    throw fail("shape mismatch: a network of " + std::to_string(blocks) + " blocks and " + std::to_string(channels) +
               " channels has " + std::to_string(needed) + " bytes of tensors, the payload only " +
               std::to_string(payload_size));

  Model model(a);
  auto tensors = model.tensors();
  uint32_t count = r.get<uint32_t>("the tensor count");
  if (count != tensors.size())
    throw fail("tensor count mismatch: the file has " + std::to_string(count) + " tensors, a " +
               std::to_string(blocks) + "-block network has " + std::to_string(tensors.size()));
  for (auto& t : tensors) {
    uint32_t name_len = r.get<uint32_t>("a tensor name");
    r.need(name_len, "a tensor name");
    std::string name(reinterpret_cast<const char*>(r.p), name_len);
    r.p += name_len;
    r.left -= name_len;
    if (name != t.name) throw fail("unexpected tensor '" + name + "' where '" + t.name + "' belongs");
    uint32_t rank = r.get<uint32_t>("a tensor shape");
    if (rank > 8) throw fail("shape mismatch: tensor '" + name + "' has rank " + std::to_string(rank));
    std::vector<int> shape;
    for (uint32_t i = 0; i < rank; ++i) shape.push_back(int(r.get<uint32_t>("a tensor shape")));
    if (shape != t.tensor->shape)
      throw fail("shape mismatch: tensor '" + name + "' is " + shape_string(shape) +
                 " in the file, the architecture needs " + shape_string(t.tensor->shape));
    const uint32_t stored = version == 1 ? 0 : r.get<uint32_t>("a tensor's storage");
    if (stored > 1)
      throw fail("unknown storage " + std::to_string(stored) + " of tensor '" + name + "' (0: f32, 1: bf16)");
    std::vector<float>& values = t.tensor->data;
    const size_t bytes = values.size() * (stored == 1 ? sizeof(uint16_t) : sizeof(float));
    r.need(bytes, "tensor data");
    if (stored == 1) {
      for (size_t i = 0; i < values.size(); ++i) {
        uint16_t b;
        std::memcpy(&b, r.p + 2 * i, 2);
        values[i] = from_bf16(b);
      }
      if (summary) ++summary->bf16_tensors;
    } else {
      std::memcpy(values.data(), r.p, bytes);
    }
    r.p += bytes;
    r.left -= bytes;
  }
  if (r.left != 0) throw fail("malformed payload: " + std::to_string(r.left) + " bytes after the last tensor");
  if (summary) summary->version = version;
  return model;
}

void save_model(const Model& model, const std::string& path, WeightStorage storage) {
  std::vector<uint8_t> bytes = serialize_model(model, storage);
  // Through a temporary file and a rename: a full disk never leaves a cut network at `path`.
  try {
    write_file_atomically(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  } catch (const std::exception& e) {
    throw ModelFileError(e.what());
  }
}

Model load_model(const std::string& path, ModelFileSummary* summary) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw ModelFileError(path + ": a directory, not a model file");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw ModelFileError(path + ": cannot open");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) throw ModelFileError(path + ": read failed");
  return deserialize_model(bytes.data(), bytes.size(), path, summary);
}

}  // namespace jiriki::nn
