// Each conditioning's last network residual (output - input). The whole-network step caches
// (ucache, easycache, dbcache/taylorseer/cache-dit) add it to a later input instead of
// running the network, betting that the network's change to its input moves slowly.
#pragma once

#include <cstddef>
#include <vector>

namespace sd::sampling {

class ConditioningResiduals {
 public:
  // Keeps output - x_in for each conditioning's output.
  void save(const std::vector<float>& x_in, const std::vector<std::vector<float>>& outputs);
  // x_in + each saved residual, for `conditionings` outputs; empty when one of them has no
  // residual of x_in's size (none computed yet), so the network must run.
  std::vector<std::vector<float>> apply(const std::vector<float>& x_in, size_t conditionings) const;
  // Whether the first conditioning (the caches' anchor) has a residual.
  bool has_anchor() const { return !residuals_.empty() && !residuals_[0].empty(); }

 private:
  std::vector<std::vector<float>> residuals_;  // per conditioning
};

}  // namespace sd::sampling
