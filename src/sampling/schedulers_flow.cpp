// Schedulers of the flow-matching families (sigma in [0, 1]): resolution-dependent shifts
// towards high noise, since more latent tokens need more steps at high noise.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "sampling/schedulers.h"

namespace sd::sampling::detail {

namespace {

float flux_time_shift(float mu, float t) {
  return ::expf(mu) / (::expf(mu) + ::powf((1.0f / t - 1.0f), 1.0f));
}

float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

// Inverse of the standard normal CDF, Acklam's rational approximation.
double normal_quantile(double p) {
  if (p <= 0.0) return -std::numeric_limits<double>::infinity();
  if (p >= 1.0) return std::numeric_limits<double>::infinity();
  static const double c[6] = {-7.784894002430293e-03, -3.223964580411365e-01,
                              -2.400758277161838e+00, -2.549732539343734e+00,
                              4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[5] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                              3.754408661907416e+00, 1.0};
  static const double a[6] = {-3.969683028665376e+01, 2.209460984245205e+02,
                              -2.759285104469687e+02, 1.383577518672690e+02,
                              -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[6] = {-5.447609879822406e+01, 1.615858368580409e+02,
                              -1.556989798598866e+02, 6.680131188771972e+01,
                              -1.328068155288572e+01, 1.0};
  const double p_low = 0.02425;
  const auto tail = [&](double q) {
    double numerator = c[0];
    for (int i = 1; i < 6; ++i) numerator = numerator * q + c[i];
    double denominator = d[0];
    for (int i = 1; i < 5; ++i) denominator = denominator * q + d[i];
    return numerator / denominator;
  };
  if (p < p_low) return tail(std::sqrt(-2.0 * std::log(p)));
  if (p > 1.0 - p_low) return -tail(std::sqrt(-2.0 * std::log(1.0 - p)));
  const double q = p - 0.5;
  const double r = q * q;
  double numerator = a[0];
  for (int i = 1; i < 6; ++i) numerator = numerator * r + a[i];
  numerator *= q;
  double denominator = b[0];
  for (int i = 1; i < 6; ++i) denominator = denominator * r + b[i];
  return numerator / denominator;
}

}  // namespace

std::vector<float> flux_sigmas(int steps, int image_seq_len, float base_shift, float max_shift) {
  const float m = (max_shift - base_shift) / (4096.0f - 256.0f);
  const float b = base_shift - m * 256.0f;
  const float mu = static_cast<float>(image_seq_len) * m + b;
  const auto n = static_cast<uint32_t>(steps);
  std::vector<float> sigmas;
  for (uint32_t i = 0; i <= n; ++i) {
    const float t = 1.0f - static_cast<float>(i) / static_cast<float>(n);
    sigmas.push_back(t <= 0.0f ? 0.0f : flux_time_shift(mu, t));
  }
  sigmas[n] = 0.0f;
  return sigmas;
}

std::vector<float> flux2_sigmas(int steps, int image_seq_len) {
  const auto n = static_cast<uint32_t>(steps);
  // Flux.2's shift, fitted linearly in the step count between 10 and 200 steps.
  const float a1 = 8.73809524e-05f, b1 = 1.89833333f;
  const float a2 = 0.00016927f, b2 = 0.45666666f;
  float mu;
  if (image_seq_len > 4300) {
    mu = a2 * image_seq_len + b2;
  } else {
    const float m_200 = a2 * image_seq_len + b2;
    const float m_10 = a1 * image_seq_len + b1;
    const float a = (m_200 - m_10) / 190.0f;
    const float b = m_200 - 200.0f * a;
    mu = a * n + b;
  }
  std::vector<float> sigmas;
  for (uint32_t i = 0; i <= n; ++i) {
    const float t = 1.0f - static_cast<float>(i) / static_cast<float>(n);
    sigmas.push_back(t <= 0.0f ? 0.0f : t >= 1.0f ? 1.0f : flux_time_shift(mu, t));
  }
  sigmas[n] = 0.0f;
  return sigmas;
}

std::vector<float> ltx2_sigmas(int steps, const SchedulerOptions& o) {
  const int tokens = o.image_seq_len > 0 ? o.image_seq_len : 4096;
  const float m = (o.ltx2_max_shift - o.ltx2_base_shift) / (4096.0f - 1024.0f);
  const float b = o.ltx2_base_shift - m * 1024.0f;
  const float exp_shift = std::exp(static_cast<float>(tokens) * m + b);
  const float terminal = std::clamp(o.ltx2_terminal, 0.0f, 0.99f);
  const auto n = static_cast<uint32_t>(steps);
  std::vector<float> sigmas;
  for (uint32_t i = 0; i <= n; ++i) {
    float sigma = 1.0f - static_cast<float>(i) / static_cast<float>(n);
    if (sigma != 0.0f) sigma = exp_shift / (exp_shift + (1.0f / sigma - 1.0f));
    sigmas.push_back(sigma);
  }
  if (o.ltx2_stretch && sigmas.size() > 2) {
    // Stretch so the last nonzero sigma lands on the terminal value.
    const float scale_factor = (1.0f - sigmas[n - 1]) / (1.0f - terminal);
    if (scale_factor > 1e-8f) {
      for (uint32_t i = 0; i < n; ++i) sigmas[i] = 1.0f - (1.0f - sigmas[i]) / scale_factor;
    }
  }
  sigmas[n] = 0.0f;
  return sigmas;
}

std::vector<float> logit_normal_sigmas(int steps, const SchedulerOptions& o) {
  float mean = o.logit_normal_mean;
  if (o.image_seq_len > 0 && o.logit_normal_resolution_aware) {
    const int known_seq_len = (512 * 512) / (16 * 16);
    mean +=
        0.5f * std::log(static_cast<float>(o.image_seq_len) / static_cast<float>(known_seq_len));
  }
  const float upper = sigmoid(0.5f * o.logit_normal_logsnr_max);
  const float lower = sigmoid(0.5f * o.logit_normal_logsnr_min);
  const auto n = static_cast<uint32_t>(steps);
  std::vector<float> sigmas;
  for (uint32_t i = 0; i <= n; ++i) {
    const float t = static_cast<float>(i) / static_cast<float>(n);
    const float z = static_cast<float>(-normal_quantile(t));  // quantile of 1 - t
    float sigma = sigmoid(mean + o.logit_normal_std * z);
    if (sigma > upper) sigma = upper;
    if (sigma < lower) sigma = lower;
    sigmas.push_back(sigma);
  }
  sigmas[n] = 0.0f;
  return sigmas;
}

}  // namespace sd::sampling::detail
