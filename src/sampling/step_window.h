// What the output-reusing step caches (ucache, easycache, cache-dit; step_cache.h) track in
// common: the window of steps they may skip, with the skip decided once per step (a
// two-call sampler step asks twice), and -- for ucache and easycache -- how much the
// anchor conditioning's output changed per unit of input change at the last computed step.
#pragma once

#include <vector>

namespace sd::sampling {

// Steps whose sigma lies in (end_sigma, start_sigma].
class StepWindow {
 public:
  StepWindow() = default;
  StepWindow(float start_sigma, float end_sigma)
      : start_sigma_(start_sigma), end_sigma_(end_sigma) {}
  // The window from fractions of a schedule's steps (steps + 1 sigmas), as sd.cpp's ucache
  // and cache-dit take it: the sigmas at int(fraction * steps), clamped to the last step.
  static StepWindow from_step_fractions(float start, float end, const std::vector<float>& sigmas);

  // Told before every network call; true when `step_index` is a new step (the skip
  // decision is then cleared), false for the second call of a two-call step.
  bool begin_step(int step_index, float sigma);
  bool active() const { return active_; }
  bool skipping() const { return skipping_; }
  void skip() { skipping_ = true; }

 private:
  float start_sigma_ = 0, end_sigma_ = 0;
  int step_index_ = -1;
  bool active_ = false;
  bool skipping_ = false;
};

// Mean |a - b| (accumulated in float, in order, as the reference does).
float mean_abs_difference(const std::vector<float>& a, const std::vector<float>& b);

// The anchor conditioning's output change per unit of input change, from the last two
// computed steps, and the input change of the step being decided.
class OutputChangeRate {
 public:
  // A new step: its input change is not measured yet.
  void begin_step() { has_input_change_ = false; }
  // Measures the input change against the last computed step's input; false when there
  // is none (nothing computed yet, or another size).
  bool measure_input(const std::vector<float>& x_in);
  // The input change measured, the rate and the output's size are all usable.
  bool ready() const { return output_norm_ > 0.0f && has_change_rate_ && input_change_ > 0.0f; }
  // A computed step: its input and output become the reference, the rate is updated from
  // this step's measured input change. Returns the output's mean |change| (0 at the first).
  float observe(const std::vector<float>& x_in, const std::vector<float>& output);

  bool has_reference() const { return !prev_input_.empty() && !prev_output_.empty(); }
  float input_change() const { return input_change_; }
  float change_rate() const { return change_rate_; }
  float output_norm() const { return output_norm_; }

 private:
  std::vector<float> prev_input_, prev_output_;  // the anchor's, last computed step
  float output_norm_ = 0;                        // mean |output| of that step
  float change_rate_ = 0;                        // output change per unit of input change
  bool has_change_rate_ = false;
  float input_change_ = 0;  // mean |input - previous input|, this step
  bool has_input_change_ = false;
};

}  // namespace sd::sampling
