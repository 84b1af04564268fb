// Schedulers that bend the timestep or sigma axis with a shape function: Beta quantiles
// and two arctangent ramps ("bong tangent").
#include <cmath>
#include <cstdint>

#include "sampling/schedulers.h"

namespace sd::sampling::detail {

namespace {

double log_beta_function(double a, double b) {
  return std::lgamma(a) + std::lgamma(b) - std::lgamma(a + b);
}

// Regularized incomplete beta I_x(a, b) by its continued fraction (modified Lentz).
double incomplete_beta(double x, double a, double b) {
  if (x <= 0.0) return 0.0;
  if (x >= 1.0) return 1.0;
  const int max_iter = 200;
  const double epsilon = 3.0e-7;
  const double tiny = 1e-30;
  const auto not_tiny = [&](double v) { return std::abs(v) < tiny ? tiny : v; };
  const double qab = a + b;
  const double qap = a + 1.0;
  const double qam = a - 1.0;
  double c = 1.0;
  double d = 1.0 / not_tiny(1.0 - qab * x / qap);
  double h = d;
  for (int m = 1; m <= max_iter; m++) {
    const int m2 = 2 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1.0 / not_tiny(1.0 + aa * d);
    c = not_tiny(1.0 + aa / c);
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1.0 / not_tiny(1.0 + aa * d);
    c = not_tiny(1.0 + aa / c);
    const double del = d * c;
    h *= del;
    if (std::abs(del - 1.0) < epsilon) break;
  }
  return std::exp(a * std::log(x) + b * std::log(1.0 - x) - log_beta_function(a, b)) / a * h;
}

double beta_cdf(double x, double a, double b) {
  if (x == 0.0) return 0.0;
  if (x == 1.0) return 1.0;
  if (x < (a + 1.0) / (a + b + 2.0)) return incomplete_beta(x, a, b);
  return 1.0 - incomplete_beta(1.0 - x, b, a);
}

// Inverse CDF by Newton's method from the median guess 0.5.
double beta_quantile(double u, double a, double b) {
  double x = 0.5;
  for (int i = 0; i < 30; i++) {
    const double f = beta_cdf(x, a, b) - u;
    if (std::abs(f) < 1e-10) break;
    const double density =
        std::exp((a - 1.0) * std::log(x) + (b - 1.0) * std::log(1.0 - x) - log_beta_function(a, b));
    x -= f / density;
    if (x <= 0.0) x = 1e-10;
    if (x >= 1.0) x = 1.0 - 1e-10;
  }
  return x;
}

constexpr float kPi = 3.14159265358979323846f;

// An arctangent ramp from `start` to `end` over `steps` points, centred on `pivot`.
std::vector<float> tangent_ramp(int steps, float slope, float pivot, float start, float end) {
  std::vector<float> sigmas;
  if (steps <= 0) return sigmas;
  const auto ramp = [&](float x) {
    return ((2.0f / kPi) * atanf(-slope * (x - pivot)) + 1.0f) * 0.5f;
  };
  const float smax = ramp(0.0f);
  const float smin = ramp(static_cast<float>(steps - 1));
  const float srange = smax - smin;
  const float sscale = start - end;
  if (fabsf(srange) < 1e-8f) {
    if (steps == 1) return {start};
    for (int i = 0; i < steps; ++i) {
      const float t = static_cast<float>(i) / static_cast<float>(steps - 1);
      sigmas.push_back(start + (end - start) * t);
    }
    return sigmas;
  }
  const float inv_srange = 1.0f / srange;
  for (int x = 0; x < steps; ++x) {
    sigmas.push_back(((ramp(static_cast<float>(x)) - smin) * inv_srange) * sscale + end);
  }
  return sigmas;
}

}  // namespace

std::vector<float> beta_sigmas(int steps, const DiscreteSchedule& schedule, double alpha,
                               double beta) {
  const int t_max = kTrainingTimesteps - 1;
  if (steps == 1) return {schedule.t_to_sigma(static_cast<float>(t_max)), 0.f};
  std::vector<float> sigmas;
  int last_t = -1;
  for (int i = 0; i < steps; i++) {
    const double u = 1.0 - static_cast<double>(i) / static_cast<double>(steps);
    const int t = static_cast<int>(std::lround(beta_quantile(u, alpha, beta) * t_max));
    if (t != last_t) {  // coinciding timesteps are visited once
      sigmas.push_back(schedule.t_to_sigma(static_cast<float>(t)));
      last_t = t;
    }
  }
  sigmas.push_back(0.f);
  return sigmas;
}

std::vector<float> bong_tangent_sigmas(int n, float sigma_min, float sigma_max) {
  const float start = sigma_max;
  const float end = sigma_min;
  const float middle = sigma_min + (sigma_max - sigma_min) * 0.5f;
  const float pivot_1 = 0.6f;
  const float pivot_2 = 0.6f;
  const int steps = n + 2;
  const int midpoint = static_cast<int>(((float)steps * pivot_1 + (float)steps * pivot_2) * 0.5f);
  const int pivot_1_i = static_cast<int>((float)steps * pivot_1);
  const int pivot_2_i = static_cast<int>((float)steps * pivot_2);
  const float slope_scale = (float)steps / 40.0f;
  const float slope_1 = 0.2f / slope_scale;
  const float slope_2 = 0.2f / slope_scale;
  const int stage_2_len = steps - midpoint;
  const int stage_1_len = steps - stage_2_len;

  std::vector<float> sigmas = tangent_ramp(stage_1_len, slope_1, (float)pivot_1_i, start, middle);
  const std::vector<float> second =
      tangent_ramp(stage_2_len, slope_2, (float)(pivot_2_i - stage_1_len), middle, end);
  if (!sigmas.empty()) sigmas.pop_back();  // the ramps share the middle point
  sigmas.insert(sigmas.end(), second.begin(), second.end());
  sigmas.resize(static_cast<size_t>(n) + 1, end);
  sigmas[n] = 0.0f;
  return sigmas;
}

}  // namespace sd::sampling::detail
