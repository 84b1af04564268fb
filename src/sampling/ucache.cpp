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

}  // namespace

UCache::UCache(const UCacheOptions& options, const std::vector<float>& sigmas) : options_(options) {
  options_.decay = std::clamp(options_.decay, 0.0f, 1.0f);
  options_.threshold = std::max(0.0f, options_.threshold);
  if (sigmas.size() < 2) return;
  expected_steps_ = static_cast<int>(sigmas.size() - 1);
  window_ = StepWindow::from_step_fractions(options_.start, options_.end, sigmas);
}

void UCache::begin_step(int step_index, float sigma) {
  if (window_.begin_step(step_index, sigma)) rate_.begin_step();
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
  if (!residuals_.has_anchor() || !rate_.measure_input(x_in)) return false;
  if (!rate_.ready()) return false;

  // The output change this input change would bring, relative to the output's size.
  float change = rate_.change_rate() * rate_.input_change();
  if (options_.relative) {
    const float base = std::max(rate_.output_norm(), 1e-6f);
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
  if (!options_.relative && rate_.output_norm() > 0.0f) limit = limit * rate_.output_norm();
  if (accumulated_error_ < limit) return true;
  if (options_.reset) accumulated_error_ = 0.0f;
  return false;
}

std::vector<std::vector<float>> UCache::reuse(int step, float sigma, const std::vector<float>& x_in,
                                              size_t conditionings) {
  if (step <= 0) return {};
  begin_step(step - 1, sigma);
  if (!window_.active()) return {};
  if (!window_.skipping()) {
    if (!decide_skip(x_in)) return {};
    window_.skip();
    ++skipped_steps_;
    ++skipped_in_a_row_;
  }
  // Every conditioning needs its residual; one without (none computed yet) runs.
  return residuals_.apply(x_in, conditionings);
}

void UCache::computed(int step, const std::vector<float>& x_in,
                      const std::vector<std::vector<float>>& outputs) {
  if (step <= 0 || !window_.active()) return;
  residuals_.save(x_in, outputs);
  if (!outputs.empty()) observe_anchor(x_in, outputs[0]);
}

void UCache::observe_anchor(const std::vector<float>& x_in, const std::vector<float>& output) {
  ++computed_active_steps_;
  skipped_in_a_row_ = 0;
  const float output_change = rate_.observe(x_in, output);
  if (std::isfinite(output_change) && output_change > 0.0f) {
    output_change_ema_ =
        has_output_change_ema_ ? 0.8f * output_change_ema_ + 0.2f * output_change : output_change;
    has_output_change_ema_ = true;
  }
}

}  // namespace sd::sampling
