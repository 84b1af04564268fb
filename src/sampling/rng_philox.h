// The "cuda" generator: torch's GPU normal stream reproduced on the host (as sd-webui and
// stable-diffusion.cpp do), so seeds carry over from GPU tools. Counter-based: value i of
// call k is a pure function of (seed, k, i), which is why every randn() call advances
// the offset by one whatever its size.
#pragma once

#include <array>
#include <cstdint>

#include "sampling/rng.h"

namespace sd::sampling {

// Philox4x32 with 10 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC'11): four 32-bit counter words and a two-word key to four random words.
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

class PhiloxRng final : public Rng {
 public:
  explicit PhiloxRng(uint64_t seed) : seed_(seed) {}
  std::vector<float> randn(size_t n) override;

 private:
  uint64_t seed_;
  uint32_t offset_ = 0;  // counts randn() calls
};

}  // namespace sd::sampling
