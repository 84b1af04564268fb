// The "cpu" generator: torch's CPU normal stream (ComfyUI's default), a Mersenne Twister
// feeding torch's two normal algorithms. torch picks the algorithm by tensor size: below
// 16 values, Box-Muller in double with one spare value cached across calls; from 16 on,
// uniform floats transformed in blocks of 16, with the tail block redrawn.
#pragma once

#include <array>
#include <cstdint>

#include "sampling/rng.h"

namespace sd::sampling {

class TorchCpuRng final : public Rng {
 public:
  explicit TorchCpuRng(uint64_t seed);
  std::vector<float> randn(size_t n) override;

  // The raw 32-bit engine output (MT19937 as torch seeds and steps it).
  uint32_t next_uint32();

 private:
  static constexpr int kStateSize = 624;
  static constexpr int kShift = 397;

  void regenerate();
  uint64_t next_uint64();
  float next_uniform_float();
  double next_uniform_double();
  double next_normal_double();
  void fill_normal_blocks(float* data, size_t n);

  std::array<uint32_t, kStateSize> state_{};
  int left_ = 1;  // values left before the state regenerates
  int next_ = 0;
  bool has_spare_normal_ = false;
  double spare_normal_ = 0.0;
};

}  // namespace sd::sampling
