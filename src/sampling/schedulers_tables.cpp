// Precomputed noise levels (Align Your Steps, GITS) and how they stretch to any step count.
#include <cmath>

#include "sampling/schedulers.h"
#include "tensor/error.h"

namespace sd::sampling::detail {

namespace {

// n points from start to end by repeated float addition (so the grid carries the same
// rounding as the reference's).
std::vector<float> accumulated_grid(float start, float end, size_t n) {
  std::vector<float> grid(n);
  if (n == 0) return grid;
  const float increment = (end - start) / static_cast<float>(n - 1);
  grid[0] = start;
  for (size_t i = 1; i < n; ++i) grid[i] = grid[i - 1] + increment;
  return grid;
}

// Piecewise-linear interpolation of ascending (ref_x, ref_y) at ascending x, in double.
std::vector<double> interpolate(std::vector<float> x, const std::vector<float>& ref_x,
                                const std::vector<float>& ref_y) {
  std::vector<double> y(x.size());
  if (x.empty() || ref_x.size() < 2) return y;
  if (x.front() < ref_x.front()) x.front() = ref_x.front();
  if (x.back() > ref_x.back()) x.back() = ref_x.back();
  size_t j = 0;
  for (size_t i = 0; i < x.size();) {
    const bool outside = ref_x[j] > x[i] || x[i] > ref_x[j + 1];
    if (outside && j + 2 < ref_x.size()) {
      ++j;
      continue;
    }
    const double fraction =
        static_cast<double>(x[i] - ref_x[j]) / static_cast<double>(ref_x[j + 1] - ref_x[j]);
    y[i] = double{ref_y[j]} * (1. - fraction) + double{ref_y[j + 1]} * fraction;
    ++i;
  }
  return y;
}

// NVIDIA's Align Your Steps levels for 10 steps
// (research.nvidia.com/labs/toronto-ai/AlignYourSteps/howto.html).
const std::vector<float> kAysSd1 = {14.6146412293f, 6.4745760956f, 3.8636745985f, 2.6946151520f,
                                    1.8841921177f,  1.3943805092f, 0.9642583904f, 0.6523686016f,
                                    0.3977456272f,  0.1515232662f, 0.0291671582f};
const std::vector<float> kAysSdxl = {14.6146412293f, 6.3184485287f, 3.7681790315f, 2.1811480769f,
                                     1.3405244945f,  0.8620721141f, 0.5550693289f, 0.3798540708f,
                                     0.2332364134f,  0.1114188177f, 0.0291671582f};
const std::vector<float> kAysSvd = {700.00f, 54.5f,  15.886f, 7.977f, 4.248f, 1.789f,
                                    0.981f,  0.403f, 0.173f,  0.034f, 0.002f};

// GITS levels for coefficient 1.20 (github.com/zju-pi/diff-sampler, gits-main): row k
// holds the sigmas for k + 2 steps.
const std::vector<std::vector<float>> kGits120 = {
    {14.61464119f, 0.803307f, 0.02916753f},
    {14.61464119f, 1.56271636f, 0.52423614f, 0.02916753f},
    {14.61464119f, 2.36326075f, 0.92192322f, 0.36617002f, 0.02916753f},
    {14.61464119f, 2.84484982f, 1.24153244f, 0.59516323f, 0.25053367f, 0.02916753f},
    {14.61464119f, 5.85520077f, 2.05039096f, 0.95350921f, 0.45573691f, 0.17026083f, 0.02916753f},
    {14.61464119f, 5.85520077f, 2.45070267f, 1.24153244f, 0.64427125f, 0.29807833f, 0.09824532f,
     0.02916753f},
    {14.61464119f, 5.85520077f, 2.45070267f, 1.36964464f, 0.803307f, 0.45573691f, 0.25053367f,
     0.09824532f, 0.02916753f},
    {14.61464119f, 5.85520077f, 2.84484982f, 1.61558151f, 0.95350921f, 0.59516323f, 0.36617002f,
     0.19894916f, 0.09824532f, 0.02916753f},
    {14.61464119f, 5.85520077f, 2.84484982f, 1.67050016f, 1.08895338f, 0.74807048f, 0.50118381f,
     0.32104823f, 0.19894916f, 0.09824532f, 0.02916753f},
    {14.61464119f, 5.85520077f, 2.95596409f, 1.84880662f, 1.24153244f, 0.83188516f, 0.59516323f,
     0.41087446f, 0.27464288f, 0.17026083f, 0.09824532f, 0.02916753f},
    {14.61464119f, 5.85520077f, 3.07277966f, 1.98035145f, 1.36964464f, 0.95350921f, 0.69515091f,
     0.50118381f, 0.36617002f, 0.25053367f, 0.17026083f, 0.09824532f, 0.02916753f},
    {14.61464119f, 6.77309084f, 3.46139455f, 2.36326075f, 1.56271636f, 1.08895338f, 0.803307f,
     0.59516323f, 0.45573691f, 0.34370604f, 0.25053367f, 0.17026083f, 0.09824532f, 0.02916753f},
    {14.61464119f, 6.77309084f, 3.46139455f, 2.45070267f, 1.61558151f, 1.162866f, 0.86115354f,
     0.64427125f, 0.50118381f, 0.38853383f, 0.29807833f, 0.22545385f, 0.17026083f, 0.09824532f,
     0.02916753f},
    {14.61464119f, 7.49001646f, 4.65472794f, 3.07277966f, 2.12350607f, 1.51179266f, 1.08895338f,
     0.83188516f, 0.64427125f, 0.50118381f, 0.38853383f, 0.29807833f, 0.22545385f, 0.17026083f,
     0.09824532f, 0.02916753f},
    {14.61464119f, 7.49001646f, 4.65472794f, 3.07277966f, 2.12350607f, 1.51179266f, 1.08895338f,
     0.83188516f, 0.64427125f, 0.50118381f, 0.41087446f, 0.32104823f, 0.25053367f, 0.19894916f,
     0.13792117f, 0.09824532f, 0.02916753f},
    {14.61464119f, 7.49001646f, 4.65472794f, 3.07277966f, 2.12350607f, 1.51179266f, 1.08895338f,
     0.83188516f, 0.64427125f, 0.50118381f, 0.41087446f, 0.34370604f, 0.27464288f, 0.22545385f,
     0.17026083f, 0.13792117f, 0.09824532f, 0.02916753f},
    {14.61464119f, 7.49001646f, 4.65472794f, 3.07277966f, 2.19988537f, 1.61558151f, 1.20157266f,
     0.92192322f, 0.72133851f, 0.57119018f, 0.45573691f, 0.36617002f, 0.29807833f, 0.25053367f,
     0.19894916f, 0.17026083f, 0.13792117f, 0.09824532f, 0.02916753f},
    {14.61464119f, 7.49001646f, 4.65472794f, 3.07277966f, 2.19988537f, 1.61558151f, 1.24153244f,
     0.95350921f,  0.74807048f, 0.59516323f, 0.4783645f,  0.38853383f, 0.32104823f, 0.27464288f,
     0.22545385f,  0.19894916f, 0.17026083f, 0.13792117f, 0.09824532f, 0.02916753f},
    {14.61464119f, 7.49001646f, 4.65472794f, 3.07277966f, 2.19988537f, 1.61558151f, 1.24153244f,
     0.95350921f,  0.74807048f, 0.59516323f, 0.50118381f, 0.41087446f, 0.34370604f, 0.29807833f,
     0.25053367f,  0.22545385f, 0.19894916f, 0.17026083f, 0.13792117f, 0.09824532f, 0.02916753f}

};

}  // namespace

std::vector<float> log_linear_interpolation(const std::vector<float>& sigmas, size_t length) {
  const size_t count = sigmas.size();
  const std::vector<float> x = accumulated_grid(0.f, 1.f, count);
  std::vector<float> log_sigmas(count);
  for (size_t i = 0; i < count; ++i) log_sigmas[i] = std::log(sigmas[count - i - 1]);
  const std::vector<double> y = interpolate(accumulated_grid(0.f, 1.f, length), x, log_sigmas);
  std::vector<float> out(length);
  for (size_t i = 0; i < length; ++i) out[i] = static_cast<float>(std::exp(y[length - i - 1]));
  return out;
}

std::vector<float> ays_sigmas(int steps, AysLevels which) {
  const std::vector<float>* levels = nullptr;
  switch (which) {
    case AysLevels::SD1:
      levels = &kAysSd1;
      break;
    case AysLevels::SDXL:
      levels = &kAysSdxl;
      break;
    case AysLevels::SVD:
      levels = &kAysSvd;
      break;
    case AysLevels::None:
      fail(
          "[ays scheduler] Align Your Steps has noise levels for SD1, SD2, SDXL and SVD "
          "only; use another scheduler (e.g. discrete) for this model");
  }
  const auto n = static_cast<size_t>(steps);
  std::vector<float> sigmas =
      n + 1 == levels->size() ? *levels : log_linear_interpolation(*levels, n + 1);
  sigmas[n] = 0.0f;
  return sigmas;
}

std::vector<float> gits_sigmas(int steps) {
  SD_CHECK(steps >= 2, "[gits scheduler] steps is %d; GITS needs at least 2", steps);
  const auto n = static_cast<size_t>(steps);
  std::vector<float> sigmas =
      n - 2 < kGits120.size() ? kGits120[n - 2] : log_linear_interpolation(kGits120.back(), n + 1);
  sigmas[n] = 0.0f;
  return sigmas;
}

}  // namespace sd::sampling::detail
