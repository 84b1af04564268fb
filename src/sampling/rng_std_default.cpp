#include "sampling/rng_std_default.h"

namespace sd::sampling {

std::vector<float> StdDefaultRng::randn(size_t n) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> out(n);
  for (float& v : out) v = normal(engine_);
  return out;
}

}  // namespace sd::sampling
