// Spectrum (Chen et al., "Spectrum: Adaptive Spectral Feature Forecasting for Efficient
// Diffusion Sampling"): the denoised latents of the last computed calls, as functions of
// the call count mapped to [-1, 1], are fitted by Chebyshev polynomials (ridge regression)
// and extrapolated one call ahead; the forecast is blended with a first-order Taylor step
// from the last two. After `warmup` calls, all but every window-th call are forecast, the
// window growing by `flex` per computed call; none past `stop` of the steps.
#pragma once

#include <deque>
#include <vector>

#include "sampling/step_cache.h"

namespace sd::sampling {

class SpectrumForecast final : public DenoisedForecast {
 public:
  SpectrumForecast(const SpectrumOptions& options, size_t steps);

  bool forecast(std::vector<float>& x0) override;
  void observe(const std::vector<float>& x0) override;

  int forecast_calls() const { return forecasts_; }

 private:
  // The call count as the fit's abscissa.
  static float position(int call) { return (call / 50.0f) * 2.0f - 1.0f; }
  bool due() const;

  SpectrumOptions options_;
  size_t history_;  // computed latents kept for the fit
  int stop_call_;
  int calls_ = 0;             // forecast and computed
  int forecasts_in_row_ = 0;  // since the last computed call
  int forecasts_ = 0;
  float window_;
  std::deque<std::vector<float>> latents_;
  std::deque<float> positions_;
};

}  // namespace sd::sampling
