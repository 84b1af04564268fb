#include "sampling/brownian_tree.h"

#include <algorithm>
#include <cmath>

#include "sampling/rng_std_default.h"

namespace sd::sampling {

namespace {

constexpr int kMaxDepth = 24;

// SplitMix64's finaliser: decorrelates the seeds of neighbouring tree nodes.
uint64_t mix64(uint64_t v, uint64_t salt) {
  uint64_t z = v + salt;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

Latent normal(size_t size, uint64_t seed) {
  StdDefaultRng rng(seed);
  return Latent(rng.randn(size));
}

}  // namespace

BrownianTree::BrownianTree(size_t size, double sigma_min, double sigma_max, uint64_t seed)
    : size_(size),
      t_min_(sigma_min),
      t_max_(sigma_max),
      root_seed_(mix64(seed, 0x9E3779B97F4A7C15ULL)),
      w_at_t_max_(normal(size, mix64(seed, 0xBF58476D1CE4E5B9ULL)) *
                  std::sqrt(static_cast<float>(sigma_max - sigma_min))) {}

std::vector<float> BrownianTree::operator()(double sigma_a, double sigma_b) {
  const auto clamp = [&](double t) { return std::min(std::max(t, t_min_), t_max_); };
  const double a = clamp(std::min(sigma_a, sigma_b));
  const double b = clamp(std::max(sigma_a, sigma_b));
  const Latent dw = at(b) - at(a);
  const auto span = static_cast<float>(std::max(std::abs(sigma_b - sigma_a), 1e-12));
  return (dw * (1.0f / std::sqrt(span))).release();
}

Latent BrownianTree::at(double t) {
  const auto it = cache_.find(t);
  if (it != cache_.end()) return it->second;
  Latent w = bridge(t_min_, t_max_, Latent(std::vector<float>(size_, 0.0f)), w_at_t_max_, t,
                    root_seed_, kMaxDepth);
  cache_.emplace(t, w);
  return w;
}

// W(t) given W(a) and W(c): draw the midpoint from the bridge's law, then recurse into
// the half holding t; below the depth limit, interpolate linearly.
Latent BrownianTree::bridge(double a, double c, const Latent& w_a, const Latent& w_c, double t,
                            uint64_t node_seed, int depth) const {
  if (depth <= 0 || c - a < 1e-9) {
    const float alpha = (c > a) ? static_cast<float>((t - a) / (c - a)) : 0.5f;
    return (1.0f - alpha) * w_a + alpha * w_c;
  }
  const double m = 0.5 * (a + c);
  const double std_dev = std::sqrt((c - m) * (m - a) / (c - a));
  const Latent z = normal(size_, node_seed);
  Latent w_m = 0.5f * (w_a + w_c) + static_cast<float>(std_dev) * z;
  if (t == m) return w_m;
  if (t < m) return bridge(a, m, w_a, w_m, t, mix64(node_seed, 1), depth - 1);
  return bridge(m, c, w_m, w_c, t, mix64(node_seed, 2), depth - 1);
}

}  // namespace sd::sampling
