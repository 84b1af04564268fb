#include "sampling/easycache.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace sd::sampling {

namespace {

// A fraction of the denoising (0: pure noise) as the sigma of that training timestep.
float fraction_to_sigma(float fraction, const DiscreteSchedule& schedule) {
  if (fraction <= 0.0f) return std::numeric_limits<float>::max();
  if (fraction >= 1.0f) return 0.0f;
  return schedule.t_to_sigma((1.0f - fraction) * (kTrainingTimesteps - 1));
}

}  // namespace

EasyCache::EasyCache(const EasyCacheOptions& options, const DiscreteSchedule& schedule)
    : options_(options),
      window_(fraction_to_sigma(options.start, schedule),
              fraction_to_sigma(options.end, schedule)) {
  if (options_.threshold < 0.0f) options_.threshold = 0.0f;
}

void EasyCache::begin_step(int step_index, float sigma) {
  if (window_.begin_step(step_index, sigma)) rate_.begin_step();
}

bool EasyCache::decide_skip(const std::vector<float>& x_in) {
  if (!residuals_.has_anchor() || !rate_.measure_input(x_in)) return false;
  if (!rate_.ready()) return false;
  // The output change this input change would bring, relative to the output's size.
  accumulated_rate_ += rate_.change_rate() * rate_.input_change() / rate_.output_norm();
  if (accumulated_rate_ < options_.threshold) return true;
  accumulated_rate_ = 0.0f;
  return false;
}

std::vector<std::vector<float>> EasyCache::reuse(int step, float sigma,
                                                 const std::vector<float>& x_in,
                                                 size_t conditionings) {
  if (step <= 0) return {};
  begin_step(step - 1, sigma);
  if (!window_.active()) return {};
  if (!window_.skipping()) {
    if (!decide_skip(x_in)) return {};
    window_.skip();
    ++skipped_steps_;
  }
  // Every conditioning needs its residual; one without (none computed yet) runs.
  return residuals_.apply(x_in, conditionings);
}

void EasyCache::computed(int step, const std::vector<float>& x_in,
                         const std::vector<std::vector<float>>& outputs) {
  if (step <= 0 || !window_.active() || outputs.empty()) return;
  residuals_.save(x_in, outputs);
  rate_.observe(x_in, outputs[0]);  // the anchor's statistics
  accumulated_rate_ = 0.0f;
}

}  // namespace sd::sampling
