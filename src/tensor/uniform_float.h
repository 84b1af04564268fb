// Uniform random floats for random test weights and data.
#pragma once

#include <cmath>
#include <random>

namespace sd {

// A float uniform in [lo, hi) from one draw of a 32-bit Mersenne Twister: the numbers
// std::uniform_real_distribution<float> gives with libstdc++ (the draw scaled by 2^-32, as
// the standard's generate_canonical does for a 32-bit engine, then lo + (hi - lo) x), so
// files and tests made with it keep their values. The distribution itself evaluates a
// long-double logarithm per call, which GCC folds away and Clang does not: under Clang's
// sanitizers that was most of the time spent making a tiny model's weights.
inline float uniform_float(std::mt19937& rng, float lo, float hi) {
  float canonical = static_cast<float>(rng()) / 4294967296.0f;
  if (canonical >= 1.0f) canonical = std::nextafter(1.0f, 0.0f);
  return canonical * (hi - lo) + lo;
}

}  // namespace sd
