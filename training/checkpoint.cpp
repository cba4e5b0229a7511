#include "training/checkpoint.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "common/atomic_file.h"
#include "common/fnv1a.h"
#include "nn/model_file.h"

namespace jiriki::training {

namespace {

constexpr char MAGIC[8] = {'J', 'I', 'R', 'I', 'K', 'I', 'C', 'K'};

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

void put_bytes(std::string& out, const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }

// Bounds-checked reading; every failure names the file.
struct Reader {
  const std::string& path;
  const uint8_t* p;
  size_t left;

  const uint8_t* take(size_t n, const char* what) {
    if (n > left) throw std::runtime_error(path + ": corrupt checkpoint: it ends inside " + std::string(what));
    const uint8_t* at = p;
    p += n;
    left -= n;
    return at;
  }
  template <class T>
  T get(const char* what) {
    T v;
    std::memcpy(&v, take(sizeof(T), what), sizeof(T));
    return v;
  }
};

}  // namespace

void save_checkpoint(const std::string& path, const nlohmann::json& meta, const nn::Model& model,
                     Optimizer& optimizer) {
  std::string out(MAGIC, 8);
  put<uint32_t>(out, CHECKPOINT_VERSION);
  const std::string text = meta.dump();
  put<uint64_t>(out, text.size());
  out += text;
  const std::vector<uint8_t> model_bytes = nn::serialize_model(model);
  put<uint64_t>(out, model_bytes.size());
  put_bytes(out, model_bytes.data(), model_bytes.size());
  auto state = optimizer.state();
  put<uint32_t>(out, uint32_t(state.size()));
  for (const auto& s : state) {
    put<uint32_t>(out, uint32_t(s.name.size()));
    out += s.name;
    put<uint64_t>(out, s.tensor->size());
    put_bytes(out, s.tensor->ptr(), s.tensor->size() * sizeof(float));
  }
  put<uint64_t>(out, fnv1a64(reinterpret_cast<const uint8_t*>(out.data()), out.size()));
  write_file_atomically(path, out);
}

Checkpoint load_checkpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open the checkpoint");
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 8 + 4 + 8 || std::memcmp(bytes.data(), MAGIC, 8) != 0)
    throw std::runtime_error(path + ": not a jiriki checkpoint (it must start with \"JIRIKICK\")");
  uint64_t stored;
  std::memcpy(&stored, bytes.data() + bytes.size() - 8, 8);
  if (fnv1a64(bytes.data(), bytes.size() - 8) != stored)
    throw std::runtime_error(path + ": corrupt checkpoint (checksum mismatch: truncated or damaged)");

  Reader r{path, bytes.data() + 8, bytes.size() - 8 - 8};
  const uint32_t version = r.get<uint32_t>("the header");
  if (version != CHECKPOINT_VERSION)
    throw std::runtime_error(path + ": checkpoint version " + std::to_string(version) + ", this build reads " +
                             std::to_string(CHECKPOINT_VERSION));
  const uint64_t text_size = r.get<uint64_t>("the metadata");
  const uint8_t* text = r.take(text_size, "the metadata");
  Checkpoint c;
  try {
    c.meta = nlohmann::json::parse(text, text + text_size);
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": corrupt checkpoint metadata: " + e.what());
  }
  const uint64_t model_size = r.get<uint64_t>("the model");
  c.model = nn::deserialize_model(r.take(model_size, "the model"), model_size, path + " (model)");
  const uint32_t count = r.get<uint32_t>("the optimizer state");
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t name_size = r.get<uint32_t>("an optimizer tensor");
    const uint8_t* name = r.take(name_size, "an optimizer tensor");
    const uint64_t n = r.get<uint64_t>("an optimizer tensor");
    if (n > r.left / sizeof(float))
      throw std::runtime_error(path + ": corrupt checkpoint: it ends inside an optimizer tensor");
    std::vector<float> data(n);
    std::memcpy(data.data(), r.take(n * sizeof(float), "an optimizer tensor"), n * sizeof(float));
    c.optimizer_state[std::string(reinterpret_cast<const char*>(name), name_size)] = std::move(data);
  }
  if (r.left != 0) throw std::runtime_error(path + ": corrupt checkpoint: unexpected bytes after the optimizer state");
  return c;
}

void restore_optimizer_state(const Checkpoint& c, Optimizer& optimizer) {
  for (const auto& s : optimizer.state()) {
    auto it = c.optimizer_state.find(s.name);
    if (it == c.optimizer_state.end())
      throw std::runtime_error("the checkpoint has no optimizer state '" + s.name +
                               "' (written by another optimizer?)");
    if (it->second.size() != s.tensor->size())
      throw std::runtime_error("optimizer state '" + s.name + "' has " + std::to_string(it->second.size()) +
                               " values in the checkpoint, " + std::to_string(s.tensor->size()) + " here");
    s.tensor->data = it->second;
  }
  if (c.optimizer_state.size() != optimizer.state().size())
    throw std::runtime_error("the checkpoint's optimizer state has " + std::to_string(c.optimizer_state.size()) +
                             " tensors, this optimizer " + std::to_string(optimizer.state().size()));
}

}  // namespace jiriki::training
