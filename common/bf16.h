// bfloat16 on the host: the bit pattern of a bf16 number in a uint16_t (the upper half of the float).
#pragma once
#include <bit>
#include <cstdint>

namespace jiriki {

// fp32 -> bf16 with round-to-nearest-even (NaN stays NaN), as __float2bfloat16_rn on the device.
// Branch-free, so that loops over it vectorize.
inline uint16_t to_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x40u;
  return uint16_t((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

// bf16 -> fp32, exact.
inline float from_bf16(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

}  // namespace jiriki
