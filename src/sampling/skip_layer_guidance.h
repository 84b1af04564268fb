// Skip-layer guidance (Stability AI's SD3.5 "SLG"; sd.cpp's --slg-scale): on a window of
// steps, one more conditional pass of a DiT with some of its blocks left out, and the
// guided output pushed away from it: guided += scale * (cond - cond_skipping_layers). The
// weaker, layer-skipped prediction plays the part of a second unconditional output.
#pragma once

#include <functional>
#include <vector>

namespace sd::sampling {

struct SkipLayerGuidance {
  float scale = 0.0f;  // 0: off
  std::vector<int> layers = {7, 8, 9};
  // The window, as fractions of the schedule's length (sigmas, steps + 1): steps strictly
  // between start * length and end * length, both truncated (sd.cpp's arithmetic).
  float start = 0.01f;
  float end = 0.2f;
  int schedule_size = 0;
  // The network's conditional output for the scaled input at `timestep`, `layers` skipped.
  std::function<std::vector<float>(const std::vector<float>& x_in, float timestep)> predict;

  bool enabled() const { return scale != 0.0f && !layers.empty() && predict; }
  bool applies_at(int step) const {
    if (!enabled() || schedule_size == 0) return false;
    const int first = static_cast<int>(start * static_cast<float>(schedule_size));
    const int last = static_cast<int>(end * static_cast<float>(schedule_size));
    return step > first && step < last;
  }
  // guided += scale * (cond - skipped).
  void apply(std::vector<float>& guided, const std::vector<float>& cond,
             const std::vector<float>& skipped) const {
    for (size_t i = 0; i < guided.size(); ++i) guided[i] += (cond[i] - skipped[i]) * scale;
  }
};

}  // namespace sd::sampling
