#include "sampling/easycache.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace sd::sampling {

namespace {

// Mean |a - b| (accumulated in float, in order, as the reference does).
float mean_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  float sum = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) sum += std::fabs(a[i] - b[i]);
  return a.empty() ? 0.0f : sum / static_cast<float>(a.size());
}

float mean_abs(const std::vector<float>& a) {
  float sum = 0.0f;
  for (float v : a) sum += std::fabs(v);
  return a.empty() ? 0.0f : sum / static_cast<float>(a.size());
}

// A fraction of the denoising (0: pure noise) as the sigma of that training timestep.
float fraction_to_sigma(float fraction, const DiscreteSchedule& schedule) {
  if (fraction <= 0.0f) return std::numeric_limits<float>::max();
  if (fraction >= 1.0f) return 0.0f;
  return schedule.t_to_sigma((1.0f - fraction) * (kTrainingTimesteps - 1));
}

}  // namespace

EasyCache::EasyCache(const EasyCacheOptions& options, const DiscreteSchedule& schedule)
    : options_(options),
      start_sigma_(fraction_to_sigma(options.start, schedule)),
      end_sigma_(fraction_to_sigma(options.end, schedule)) {
  if (options_.threshold < 0.0f) options_.threshold = 0.0f;
}

void EasyCache::begin_step(int step_index, float sigma) {
  if (step_index == step_index_) return;  // the second call of a two-call step
  step_index_ = step_index;
  skip_step_ = false;
  has_input_change_ = false;
  // Active while start_sigma >= sigma > end_sigma.
  step_active_ = !(sigma > start_sigma_) && sigma > end_sigma_;
}

bool EasyCache::decide_skip(const std::vector<float>& x_in) {
  if (prev_input_.empty() || prev_output_.empty() || !residuals_.has_anchor() ||
      prev_input_.size() != x_in.size()) {
    return false;
  }
  input_change_ = mean_abs_difference(x_in, prev_input_);
  has_input_change_ = true;
  if (!(output_norm_ > 0.0f && has_change_rate_ && input_change_ > 0.0f)) return false;
  // The output change this input change would bring, relative to the output's size.
  accumulated_rate_ += change_rate_ * input_change_ / output_norm_;
  if (accumulated_rate_ < options_.threshold) return true;
  accumulated_rate_ = 0.0f;
  return false;
}

std::vector<std::vector<float>> EasyCache::reuse(int step, float sigma,
                                                 const std::vector<float>& x_in,
                                                 size_t conditionings) {
  if (step <= 0) return {};
  begin_step(step - 1, sigma);
  if (!step_active_) return {};
  if (!skip_step_) {
    if (!decide_skip(x_in)) return {};
    skip_step_ = true;
    ++skipped_steps_;
  }
  // Every conditioning needs its residual; one without (none computed yet) runs.
  return residuals_.apply(x_in, conditionings);
}

void EasyCache::computed(int step, const std::vector<float>& x_in,
                         const std::vector<std::vector<float>>& outputs) {
  if (step <= 0 || !step_active_ || outputs.empty()) return;
  residuals_.save(x_in, outputs);
  // The anchor's statistics.
  const std::vector<float>& output = outputs[0];
  prev_input_ = x_in;
  const float output_change =
      prev_output_.size() == output.size() ? mean_abs_difference(output, prev_output_) : 0.0f;
  prev_output_ = output;
  output_norm_ = mean_abs(output);
  if (has_input_change_ && input_change_ > 0.0f && output_change > 0.0f) {
    const float rate = output_change / input_change_;
    if (std::isfinite(rate)) {
      change_rate_ = rate;
      has_change_rate_ = true;
    }
  }
  accumulated_rate_ = 0.0f;
  has_input_change_ = false;
}

}  // namespace sd::sampling
