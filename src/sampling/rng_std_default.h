// The "std_default" generator: the C++ standard library's default engine and normal
// distribution. Its stream is whatever this standard library makes (libstdc++ here, the
// same as the reference build); a fresh distribution per call drops the spare value the
// polar method keeps, as the reference does.
#pragma once

#include <random>

#include "sampling/rng.h"

namespace sd::sampling {

class StdDefaultRng final : public Rng {
 public:
  // The engine takes the seed as unsigned int (truncated), like the reference.
  explicit StdDefaultRng(uint64_t seed) : engine_(static_cast<unsigned int>(seed)) {}
  std::vector<float> randn(size_t n) override;

 private:
  std::default_random_engine engine_;
};

}  // namespace sd::sampling
