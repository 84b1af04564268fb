// dbcache, taylorseer and cache-dit as stable-diffusion.cpp runs them (step_cache.h). Its
// documentation describes block-level caching (the first Fn blocks computed, the middle
// ones skipped when their residual barely changed, the last Bn computed) and Taylor
// forecasting of block features, but its sampler drives all three modes through one
// whole-network rule, and that is what this reproduces, so the same flags skip the same
// evaluations: within the active part of the schedule (15% to 95% of the steps) the first
// conditioning is the anchor; a step is skipped when the anchor's input differs from its
// input at the last computed step by less than the threshold, relatively (sum |a - b| /
// sum |a|), the threshold scaled up with Fn and down with Bn. A skipped step's outputs are
// each conditioning's input plus its residual (output - input) from the last computed step.
// The reference's warmup, step mask and Taylor terms do not enter that rule.
#pragma once

#include <vector>

#include "sampling/conditioning_residuals.h"
#include "sampling/step_cache.h"
#include "sampling/step_window.h"

namespace sd::sampling {

class CacheDit final : public OutputCache {
 public:
  // `sigmas`: the schedule (steps + 1 values); the active range is taken from it.
  CacheDit(const BlockCacheOptions& options, const std::vector<float>& sigmas);

  std::vector<std::vector<float>> reuse(int step, float sigma, const std::vector<float>& x_in,
                                        size_t conditionings) override;
  void computed(int step, const std::vector<float>& x_in,
                const std::vector<std::vector<float>>& outputs) override;

  int skipped_steps() const { return skipped_steps_; }
  // The threshold the relative input change is held against.
  static float effective_threshold(const BlockCacheOptions& options);

 private:
  BlockCacheOptions options_;
  StepWindow window_;
  ConditioningResiduals residuals_;
  std::vector<float> prev_input_;  // the anchor's, last computed step
  int skipped_steps_ = 0;
};

}  // namespace sd::sampling
