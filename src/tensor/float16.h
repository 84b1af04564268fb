// IEEE half and bfloat16 conversions. Rounding is round-to-nearest-even in both
// directions, as the GGUF reference quantizers use, so stored scales are bit-exact.
#pragma once

#include <cstdint>
#include <cstring>

#include <immintrin.h>

namespace sd {

inline float fp16_to_f32(uint16_t h) {
  return _cvtsh_ss(h);
}
inline uint16_t f32_to_fp16(float f) {
  return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}

inline float bf16_to_f32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((u >> 16) | 64);  // quiet NaN
  return static_cast<uint16_t>((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

}  // namespace sd
