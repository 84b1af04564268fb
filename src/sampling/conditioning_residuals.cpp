#include "sampling/conditioning_residuals.h"

#include <algorithm>

namespace sd::sampling {

void ConditioningResiduals::save(const std::vector<float>& x_in,
                                 const std::vector<std::vector<float>>& outputs) {
  residuals_.resize(std::max(residuals_.size(), outputs.size()));
  for (size_t c = 0; c < outputs.size(); ++c) {
    residuals_[c].resize(x_in.size());
    for (size_t i = 0; i < x_in.size(); ++i) residuals_[c][i] = outputs[c][i] - x_in[i];
  }
}

std::vector<std::vector<float>> ConditioningResiduals::apply(const std::vector<float>& x_in,
                                                             size_t conditionings) const {
  if (residuals_.size() < conditionings) return {};
  std::vector<std::vector<float>> outputs(conditionings);
  for (size_t c = 0; c < conditionings; ++c) {
    if (residuals_[c].size() != x_in.size()) return {};
    outputs[c].resize(x_in.size());
    for (size_t i = 0; i < x_in.size(); ++i) outputs[c][i] = x_in[i] + residuals_[c][i];
  }
  return outputs;
}

}  // namespace sd::sampling
