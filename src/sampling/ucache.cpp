#include "sampling/ucache.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace sd::sampling {

namespace {

// Progress multipliers of the threshold, and how strongly the output's recent change
// widens the scale a relative threshold is measured against.
constexpr float kEarlyMultiplier = 0.5f;
constexpr float kLateMultiplier = 1.5f;
constexpr float kRelativeNormGain = 1.6f;

// Mean |a - b| (accumulated in float, in order, as the reference does).
float mean_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  float sum = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) sum += std::fabs(a[i] - b[i]);
  return a.empty() ? 0.0f : sum / static_cast<float>(a.size());
}

}  // namespace

UCache::UCache(const UCacheOptions& options, const std::vector<float>& sigmas) : options_(options) {
  options_.decay = std::clamp(options_.decay, 0.0f, 1.0f);
  options_.threshold = std::max(0.0f, options_.threshold);
  if (sigmas.size() < 2) return;
  const size_t steps = sigmas.size() - 1;
  expected_steps_ = static_cast<int>(steps);
  const auto start = std::min(static_cast<size_t>(options_.start * steps), steps - 1);
  const auto end = std::min(static_cast<size_t>(options_.end * steps), steps - 1);
  start_sigma_ = sigmas[start];
  end_sigma_ = sigmas[end];
  if (start_sigma_ < end_sigma_) std::swap(start_sigma_, end_sigma_);
}

void UCache::begin_step(int step_index, float sigma) {
  if (step_index == step_index_) return;  // the second call of a two-call step
  step_index_ = step_index;
  skip_step_ = false;
  has_input_change_ = false;
  // Active while start_sigma >= sigma > end_sigma.
  step_active_ = !(sigma > start_sigma_) && sigma > end_sigma_;
}

float UCache::threshold() const {
  const int total =
      expected_steps_ > 0 ? expected_steps_ : std::max(20, computed_active_steps_ * 2);
  const float progress = std::clamp(static_cast<float>(computed_active_steps_) / total, 0.0f, 1.0f);
  float multiplier = 1.0f;
  if (progress < 0.2f) multiplier = kEarlyMultiplier;
  if (progress > 0.8f) multiplier = kLateMultiplier;
  return options_.threshold * multiplier;
}

bool UCache::decide_skip(const std::vector<float>& x_in) {
  if (prev_input_.empty() || prev_output_.empty() || !residuals_.has_anchor() ||
      prev_input_.size() != x_in.size()) {
    return false;
  }
  input_change_ = mean_abs_difference(x_in, prev_input_);
  has_input_change_ = true;
  if (!(output_norm_ > 0.0f && has_change_rate_ && input_change_ > 0.0f)) return false;

  // The output change this input change would bring, relative to the output's size.
  float change = change_rate_ * input_change_;
  if (options_.relative) {
    const float base = std::max(output_norm_, 1e-6f);
    const float recent =
        has_output_change_ema_
            ? std::max(output_change_ema_ * std::max(1.0f, kRelativeNormGain), 1e-6f)
            : base;
    change = change / std::sqrt(base * recent);
  }
  // Skipping more steps in a row extrapolates further: count it as more error.
  change *= 1.0f + 0.50f * skipped_in_a_row_;
  accumulated_error_ = accumulated_error_ * options_.decay + change;

  float limit = threshold();
  if (!options_.relative && output_norm_ > 0.0f) limit = limit * output_norm_;
  if (accumulated_error_ < limit) return true;
  if (options_.reset) accumulated_error_ = 0.0f;
  return false;
}

std::vector<std::vector<float>> UCache::reuse(int step, float sigma, const std::vector<float>& x_in,
                                              size_t conditionings) {
  if (step <= 0) return {};
  begin_step(step - 1, sigma);
  if (!step_active_) return {};
  if (!skip_step_) {
    if (!decide_skip(x_in)) return {};
    skip_step_ = true;
    ++skipped_steps_;
    ++skipped_in_a_row_;
  }
  // Every conditioning needs its residual; one without (none computed yet) runs.
  return residuals_.apply(x_in, conditionings);
}

void UCache::computed(int step, const std::vector<float>& x_in,
                      const std::vector<std::vector<float>>& outputs) {
  if (step <= 0 || !step_active_) return;
  residuals_.save(x_in, outputs);
  if (!outputs.empty()) observe_anchor(x_in, outputs[0]);
}

void UCache::observe_anchor(const std::vector<float>& x_in, const std::vector<float>& output) {
  ++computed_active_steps_;
  skipped_in_a_row_ = 0;
  prev_input_ = x_in;

  const float output_change =
      prev_output_.size() == output.size() ? mean_abs_difference(output, prev_output_) : 0.0f;
  if (std::isfinite(output_change) && output_change > 0.0f) {
    output_change_ema_ =
        has_output_change_ema_ ? 0.8f * output_change_ema_ + 0.2f * output_change : output_change;
    has_output_change_ema_ = true;
  }
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
}

}  // namespace sd::sampling
