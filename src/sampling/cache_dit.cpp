#include "sampling/cache_dit.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace sd::sampling {

namespace {

// The active range, as fractions of the steps (fixed in the reference).
constexpr float kStart = 0.15f;
constexpr float kEnd = 0.95f;

// sum |prev - curr| / (sum |prev| + 1e-6), accumulated in float in order.
float relative_l1_change(const std::vector<float>& prev, const std::vector<float>& curr) {
  float diff = 0.0f, norm = 0.0f;
  for (size_t i = 0; i < prev.size(); ++i) {
    diff += std::fabs(prev[i] - curr[i]);
    norm += std::fabs(prev[i]);
  }
  return diff / (norm + 1e-6f);
}

}  // namespace

float CacheDit::effective_threshold(const BlockCacheOptions& o) {
  // More always-computed front blocks: more trust in the cache; back blocks: less.
  float threshold = o.threshold;
  if (o.front_blocks > 0) threshold *= std::clamp(1.0f + 0.02f * (o.front_blocks - 8), 0.5f, 2.0f);
  if (o.back_blocks > 0) threshold *= std::clamp(1.0f - 0.03f * o.back_blocks, 0.5f, 1.0f);
  return threshold;
}

CacheDit::CacheDit(const BlockCacheOptions& options, const std::vector<float>& sigmas)
    : options_(options), window_(StepWindow::from_step_fractions(kStart, kEnd, sigmas)) {}

std::vector<std::vector<float>> CacheDit::reuse(int step, float sigma,
                                                const std::vector<float>& x_in,
                                                size_t conditionings) {
  if (step <= 0) return {};
  window_.begin_step(step - 1, sigma);
  if (!window_.active()) return {};
  if (!window_.skipping()) {
    if (prev_input_.empty() || prev_input_.size() != x_in.size()) return {};
    if (!(relative_l1_change(prev_input_, x_in) < effective_threshold(options_))) return {};
    window_.skip();
    ++skipped_steps_;
  }
  // Every conditioning needs its residual; one without (none computed yet) runs.
  return residuals_.apply(x_in, conditionings);
}

void CacheDit::computed(int step, const std::vector<float>& x_in,
                        const std::vector<std::vector<float>>& outputs) {
  if (step <= 0 || !window_.active() || outputs.empty()) return;
  residuals_.save(x_in, outputs);
  prev_input_ = x_in;
}

}  // namespace sd::sampling
