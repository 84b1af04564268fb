// ucache: reuse of a UNet's residual between steps (step_cache.h). Within the active part
// of the schedule, the first conditioning (the prompt's) is the anchor. After each computed
// step the cache keeps, per conditioning, the residual output - input, and for the anchor
// the input, the output, the output's mean magnitude and how fast the output moved per unit
// of input change. Before the next step it estimates the output change from the input
// change, scales it by the output's size and by how many steps in a row were skipped, and
// adds it to an accumulated error; below the (progress-dependent) threshold the step is
// skipped and every conditioning's output is its input plus its cached residual.
#pragma once

#include <vector>

#include "sampling/conditioning_residuals.h"
#include "sampling/step_cache.h"
#include "sampling/step_window.h"

namespace sd::sampling {

class UCache final : public OutputCache {
 public:
  // `sigmas`: the schedule (steps + 1 values); the active range is taken from it.
  UCache(const UCacheOptions& options, const std::vector<float>& sigmas);

  std::vector<std::vector<float>> reuse(int step, float sigma, const std::vector<float>& x_in,
                                        size_t conditionings) override;
  void computed(int step, const std::vector<float>& x_in,
                const std::vector<std::vector<float>>& outputs) override;

  int skipped_steps() const { return skipped_steps_; }

 private:
  void begin_step(int step_index, float sigma);
  // The threshold at this point of the run: lower early, higher late.
  float threshold() const;
  bool decide_skip(const std::vector<float>& x_in);
  void observe_anchor(const std::vector<float>& x_in, const std::vector<float>& output);

  UCacheOptions options_;
  int expected_steps_ = 0;
  StepWindow window_;
  ConditioningResiduals residuals_;
  OutputChangeRate rate_;
  float output_change_ema_ = 0;
  bool has_output_change_ema_ = false;
  float accumulated_error_ = 0;
  int computed_active_steps_ = 0;
  int skipped_in_a_row_ = 0;
  int skipped_steps_ = 0;
};

}  // namespace sd::sampling
