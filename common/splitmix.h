// SplitMix64 (Steele, Lea and Flood, 2014): a small generator that gives the same numbers with every
// compiler and library (std's distributions and std::shuffle do not), used wherever a result must
// not depend on the platform: network initialisation, the loader's shuffle, self-play seeds.
#pragma once
#include <cstdint>

namespace jiriki {

// One output of the generator whose state was x: also a good mix of a seed (seeds one bit apart
// give unrelated outputs).
constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The generator: state s gives splitmix64(s), splitmix64(s + golden), ...
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    const uint64_t out = splitmix64(state);
    state += 0x9e3779b97f4a7c15ULL;
    return out;
  }
};

}  // namespace jiriki
