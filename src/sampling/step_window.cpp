#include "sampling/step_window.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace sd::sampling {

StepWindow StepWindow::from_step_fractions(float start, float end,
                                           const std::vector<float>& sigmas) {
  if (sigmas.size() < 2) return {};
  const size_t steps = sigmas.size() - 1;
  const auto first = std::min(static_cast<size_t>(start * steps), steps - 1);
  const auto last = std::min(static_cast<size_t>(end * steps), steps - 1);
  float start_sigma = sigmas[first], end_sigma = sigmas[last];
  if (start_sigma < end_sigma) std::swap(start_sigma, end_sigma);
  return {start_sigma, end_sigma};
}

bool StepWindow::begin_step(int step_index, float sigma) {
  if (step_index == step_index_) return false;
  step_index_ = step_index;
  skipping_ = false;
  active_ = !(sigma > start_sigma_) && sigma > end_sigma_;
  return true;
}

float mean_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  float sum = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) sum += std::fabs(a[i] - b[i]);
  return a.empty() ? 0.0f : sum / static_cast<float>(a.size());
}

bool OutputChangeRate::measure_input(const std::vector<float>& x_in) {
  if (!has_reference() || prev_input_.size() != x_in.size()) return false;
  input_change_ = mean_abs_difference(x_in, prev_input_);
  has_input_change_ = true;
  return true;
}

float OutputChangeRate::observe(const std::vector<float>& x_in, const std::vector<float>& output) {
  prev_input_ = x_in;
  const float output_change =
      prev_output_.size() == output.size() ? mean_abs_difference(output, prev_output_) : 0.0f;
  prev_output_ = output;
  float sum = 0.0f;
  for (float v : output) sum += std::fabs(v);
  output_norm_ = output.empty() ? 0.0f : sum / static_cast<float>(output.size());
  if (has_input_change_ && input_change_ > 0.0f && output_change > 0.0f) {
    const float rate = output_change / input_change_;
    if (std::isfinite(rate)) {
      change_rate_ = rate;
      has_change_rate_ = true;
    }
  }
  has_input_change_ = false;
  return output_change;
}

}  // namespace sd::sampling
