// A seeded Brownian motion W(sigma) on [sigma_min, sigma_max] whose value at any point is
// found by bisection (a Brownian bridge between known points, each midpoint drawn from a
// generator seeded by its position in the tree), so increments over the same interval
// are the same whatever step count asked for them (torchsde's BrownianTree idea).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "sampling/latent_math.h"

namespace sd::sampling {

class BrownianTree {
 public:
  BrownianTree(size_t size, double sigma_min, double sigma_max, uint64_t seed);

  // Unit-variance noise for the interval between the two sigmas: (W(b) - W(a)) / sqrt|b - a|.
  std::vector<float> operator()(double sigma_a, double sigma_b);

 private:
  Latent at(double t);
  Latent bridge(double a, double c, const Latent& w_a, const Latent& w_c, double t,
                uint64_t node_seed, int depth) const;

  size_t size_;
  double t_min_;
  double t_max_;
  uint64_t root_seed_;
  Latent w_at_t_max_;
  std::map<double, Latent> cache_;
};

}  // namespace sd::sampling
