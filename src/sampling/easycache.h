// easycache: reuse of a transformer's residual between steps (step_cache.h), the same idea
// as ucache with a plainer rule. Within the active part of the schedule the first
// conditioning (the prompt's) is the anchor. After each computed step the cache keeps, per
// conditioning, the residual output - input, and for the anchor its input, its output, the
// output's mean magnitude and how fast the output moved per unit of input change. Before
// the next step it estimates the relative output change from the input change and adds it
// to an accumulated rate; below the threshold the step is skipped (every conditioning's
// output is its input plus its cached residual), otherwise it runs and the rate restarts.
#pragma once

#include <vector>

#include "sampling/conditioning_residuals.h"
#include "sampling/schedule.h"
#include "sampling/step_cache.h"
#include "sampling/step_window.h"

namespace sd::sampling {

class EasyCache final : public OutputCache {
 public:
  // The active range is start..end as fractions of the training timesteps, turned into
  // sigmas by `schedule` (stable-diffusion.cpp measures it so, unlike ucache).
  EasyCache(const EasyCacheOptions& options, const DiscreteSchedule& schedule);

  std::vector<std::vector<float>> reuse(int step, float sigma, const std::vector<float>& x_in,
                                        size_t conditionings) override;
  void computed(int step, const std::vector<float>& x_in,
                const std::vector<std::vector<float>>& outputs) override;

  int skipped_steps() const { return skipped_steps_; }

 private:
  void begin_step(int step_index, float sigma);
  bool decide_skip(const std::vector<float>& x_in);

  EasyCacheOptions options_;
  StepWindow window_;
  ConditioningResiduals residuals_;
  OutputChangeRate rate_;
  float accumulated_rate_ = 0;
  int skipped_steps_ = 0;
};

}  // namespace sd::sampling
