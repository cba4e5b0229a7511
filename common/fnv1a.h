// FNV-1a, 64-bit: the one checksum of the project (model files, checkpoints, the data fingerprint,
// the replicas' weight checks). Not cryptographic: it catches truncation and corruption.
#pragma once
#include <cstddef>
#include <cstdint>

namespace jiriki {

constexpr uint64_t FNV1A64_OFFSET = 0xcbf29ce484222325ULL;
constexpr uint64_t FNV1A64_PRIME = 0x100000001b3ULL;

// Over bytes, continuing from `h` (a first call starts from the offset basis).
inline uint64_t fnv1a64(const uint8_t* data, size_t size, uint64_t h = FNV1A64_OFFSET) {
  for (size_t i = 0; i < size; ++i) h = (h ^ data[i]) * FNV1A64_PRIME;
  return h;
}

// Over 32-bit words, one step per word (the weights' bits: a float is one word).
inline uint64_t fnv1a64_words(const uint32_t* words, size_t count, uint64_t h = FNV1A64_OFFSET) {
  for (size_t i = 0; i < count; ++i) h = (h ^ words[i]) * FNV1A64_PRIME;
  return h;
}

}  // namespace jiriki
