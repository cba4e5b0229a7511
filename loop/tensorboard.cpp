#include "loop/tensorboard.h"

#include <array>
#include <cstring>

#include "common/atomic_file.h"

namespace jiriki::loop {

namespace {

const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

// Protobuf wire format: keys are (field << 3) | wire type; 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32.
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(char(uint8_t(v) | 0x80));
    v >>= 7;
  }
  out.push_back(char(uint8_t(v)));
}
template <typename T>
void put_fixed(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // little-endian hosts only (x86-64, aarch64), as the rest of jiriki's formats
  out.append(b, sizeof(T));
}
void put_key(std::string& out, int field, int wire) { put_varint(out, uint64_t(field) << 3 | uint64_t(wire)); }
void put_bytes(std::string& out, int field, std::string_view s) {
  put_key(out, field, 2);
  put_varint(out, s.size());
  out.append(s);
}
std::string event_head(double wall_time, int64_t step) {
  std::string e;
  put_key(e, 1, 1);
  put_fixed(e, wall_time);
  if (step != 0) {  // proto3 leaves a zero scalar out
    put_key(e, 2, 0);
    put_varint(e, uint64_t(step));
  }
  return e;
}

}  // namespace

uint32_t crc32c(std::string_view bytes) {
  const auto& t = crc_table();
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : bytes) c = t[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(std::string_view bytes) {
  const uint32_t c = crc32c(bytes);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

std::string scalar_event(const Scalar& s) {
  std::string value;
  put_bytes(value, 1, s.tag);
  put_key(value, 2, 5);
  put_fixed(value, float(s.value));
  std::string summary;
  put_bytes(summary, 1, value);
  std::string e = event_head(s.wall_time, s.step);
  put_bytes(e, 5, summary);
  return e;
}

std::string version_event(double wall_time) {
  std::string e = event_head(wall_time, 0);
  put_bytes(e, 3, "brain.Event:2");
  return e;
}

std::string tf_record(std::string_view data) {
  std::string r;
  std::string len;
  put_fixed(len, uint64_t(data.size()));
  r += len;
  put_fixed(r, masked_crc32c(len));
  r.append(data);
  put_fixed(r, masked_crc32c(data));
  return r;
}

std::string event_file_bytes(const std::vector<Scalar>& scalars, double wall_time) {
  std::string out = tf_record(version_event(wall_time));
  for (const Scalar& s : scalars) out += tf_record(scalar_event(s));
  return out;
}

void write_event_file(const std::string& path, const std::vector<Scalar>& scalars, double wall_time) {
  write_file_atomically(path, event_file_bytes(scalars, wall_time));
}

}  // namespace jiriki::loop
