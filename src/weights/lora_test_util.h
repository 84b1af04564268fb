// Values for the LoRA tests' hand-made files: a fixed linear congruential sequence in
// [-1, 1), the same on every platform.
#pragma once

#include <cstdint>
#include <vector>

namespace sd::test {

inline std::vector<float> lcg_values(int64_t n, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t s = seed * 2654435761u + 12345u;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>((s >> 8) & 0xffff) / 32768.0f - 1.0f;
  }
  return v;
}

}  // namespace sd::test
