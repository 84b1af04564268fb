// Samplers for distilled models (LCM, TCD) and the extended reverse-time SDE solver.
#include <algorithm>
#include <cmath>

#include "sampling/sampler_steps.h"

namespace sd::sampling::detail {

// Latent consistency (Luo et al. 2023): the model jumps to x0; re-noise to the next sigma.
Latent sample_lcm(const StepArgs& a, Latent x) {
  const auto& s = a.sigmas;
  const auto& o = a.options;
  const int steps = static_cast<int>(s.size()) - 1;
  for (int i = 0; i < steps; i++) {
    x = a.model(x, s[i], i + 1);
    if (s[i + 1] <= 0) continue;
    if (a.flow) x *= (1 - s[i + 1]);
    Latent noise = noise_like(x, a.rng);
    if (o.lcm_noise_clip_std > 0.0f && !noise.empty()) {
      double mean = 0.0;
      for (size_t j = 0; j < noise.size(); ++j) mean += static_cast<double>(noise[j]);
      mean /= static_cast<double>(noise.size());
      double variance = 0.0;
      for (size_t j = 0; j < noise.size(); ++j) {
        const double centered = static_cast<double>(noise[j]) - mean;
        variance += centered * centered;
      }
      variance /= static_cast<double>(noise.size());
      const float clip = o.lcm_noise_clip_std * static_cast<float>(std::sqrt(variance));
      for (size_t j = 0; j < noise.size(); ++j) noise[j] = std::clamp(noise[j], -clip, clip);
    }
    const float t = steps > 1 ? static_cast<float>(i) / static_cast<float>(steps - 1) : 0.0f;
    const float scale =
        o.lcm_noise_scale_start + (o.lcm_noise_scale_end - o.lcm_noise_scale_start) * t;
    x += noise * (s[i + 1] * scale);
  }
  return x;
}

// Trajectory consistency distillation (Zheng et al. 2024): a DDIM-like step to an
// intermediate timestep s = floor((1 - eta) * t_prev), then forward noise back to t_prev.
// Uses SD's own training schedule (accumulated in double), whatever the model's.
Latent sample_tcd(const StepArgs& a, Latent x) {
  const auto& s = a.sigmas;
  const float beta_start = 0.00085f;
  const float beta_end = 0.0120f;
  std::vector<double> alphas_cumprod(kTrainingTimesteps);
  std::vector<double> train_sigmas(kTrainingTimesteps);
  for (int i = 0; i < kTrainingTimesteps; i++) {
    const float sqrt_beta = sqrtf(beta_start) + (sqrtf(beta_end) - sqrtf(beta_start)) *
                                                    ((float)i / (kTrainingTimesteps - 1));
    alphas_cumprod[i] = (i == 0 ? 1.0f : alphas_cumprod[i - 1]) * (1.0f - std::pow(sqrt_beta, 2));
    train_sigmas[i] = std::sqrt((1 - alphas_cumprod[i]) / alphas_cumprod[i]);
  }
  // The training step whose sigma is nearest (the lower one on ties).
  const auto nearest_timestep = [&](float sigma) -> int {
    const auto it = std::lower_bound(train_sigmas.begin(), train_sigmas.end(), sigma);
    if (it == train_sigmas.begin()) return 0;
    if (it == train_sigmas.end()) return kTrainingTimesteps - 1;
    const int high = static_cast<int>(it - train_sigmas.begin());
    const int low = high - 1;
    return std::abs(train_sigmas[high] - sigma) < std::abs(train_sigmas[low] - sigma) ? high : low;
  };

  for (size_t i = 0; i + 1 < s.size(); i++) {
    const float sigma = s[i];
    const float sigma_to = s[i + 1];
    const int prev_timestep = nearest_timestep(sigma_to);
    // eta outside [0, 1] would leave the table; the reference does not guard this.
    const int timestep_s =
        std::clamp((int)std::floor((1 - a.eta) * prev_timestep), 0, kTrainingTimesteps - 1);
    const Latent denoised = a.model(x, sigma, int(i) + 1);
    const Latent d = (x - denoised) / sigma;
    const float alpha_prod_t_prev = 1.0f / (sigma_to * sigma_to + 1.0f);
    const auto alpha_prod_s = static_cast<float>(alphas_cumprod[timestep_s]);
    const float beta_prod_s = 1.0f - alpha_prod_s;
    x = std::sqrt(alpha_prod_s / alpha_prod_t_prev) * denoised +
        std::sqrt(beta_prod_s / alpha_prod_t_prev) * d;
    if (a.eta > 0 && sigma_to > 0.0f) {
      x = std::sqrt(alpha_prod_t_prev / alpha_prod_s) * x +
          std::sqrt(1.0f / alpha_prod_t_prev - 1.0f / alpha_prod_s) * noise_like(x, a.rng);
    }
  }
  return x;
}

// ER-SDE-Solver (Cui et al. 2023), up to third order, with the noise scaling function
// f(lambda) = lambda (e^(lambda^0.3) + 10); the integrals of 1/f are taken numerically.
Latent sample_er_sde(const StepArgs& a, Latent x) {
  std::vector<float> s = a.sigmas;
  const bool flow = a.flow;
  constexpr int kMaxStage = 3;
  constexpr int kPoints = 200;
  const auto flow_sigma = [](float sigma) {
    return std::min(std::max(sigma, 1e-6f), 1.0f - 1e-4f);
  };
  // lambda = sigma / alpha (flow: alpha = 1 - sigma; otherwise 1).
  const auto to_lambda = [&](float sigma) {
    if (flow) {
      sigma = flow_sigma(sigma);
      return sigma / std::max(1.0f - sigma, 1e-6f);
    }
    return std::max(sigma, 1e-6f);
  };
  const auto to_alpha = [&](float sigma) { return flow ? 1.0f - flow_sigma(sigma) : 1.0f; };
  const auto noise_scaler = [](float v) {
    v = std::max(v, 0.0f);
    return v * (std::exp(std::pow(v, 0.3f)) + 10.0f);
  };
  if (flow) {
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      if (s[i] > 1.0f) s[i] = flow_sigma(s[i]);
    }
  }
  std::vector<float> lambdas(s.size());
  for (size_t i = 0; i < s.size(); ++i) lambdas[i] = to_lambda(s[i]);

  Latent old_denoised = x;
  Latent old_denoised_d = x;
  bool have_old_denoised = false;
  bool have_old_denoised_d = false;
  for (size_t i = 0; i + 1 < s.size(); i++) {
    const Latent denoised = a.model(x, s[i], int(i) + 1);
    const int stage = std::min(kMaxStage, int(i) + 1);
    if (s[i + 1] == 0.0f) {
      x = denoised;
    } else {
      const float lambda_s = lambdas[i];
      const float lambda_t = lambdas[i + 1];
      const float alpha_s = to_alpha(s[i]);
      const float alpha_t = to_alpha(s[i + 1]);
      const float scaled_s = noise_scaler(lambda_s);
      const float scaled_t = noise_scaler(lambda_t);
      const float r_alpha = alpha_s > 0.0f ? alpha_t / alpha_s : 0.0f;
      const float r = scaled_s > 0.0f ? scaled_t / scaled_s : 0.0f;
      x = r_alpha * r * x + alpha_t * (1.0f - r) * denoised;

      if (stage >= 2 && have_old_denoised) {
        const float dt = lambda_t - lambda_s;
        const float step = -dt / static_cast<float>(kPoints);
        float integral = 0.0f;
        float integral_u = 0.0f;
        for (int p = 0; p < kPoints; ++p) {
          const float lambda_pos = lambda_t + p * step;
          const float scaled_pos = noise_scaler(lambda_pos);
          if (scaled_pos <= 0.0f) continue;
          integral += 1.0f / scaled_pos;
          if (stage >= 3 && have_old_denoised_d) {
            integral_u += (lambda_pos - lambda_s) / scaled_pos;
          }
        }
        integral *= step;
        const float denom_d = lambda_s - lambdas[i - 1];
        if (std::fabs(denom_d) > 1e-12f) {
          const float coeff_d = alpha_t * (dt + integral * scaled_t);
          Latent denoised_d = (denoised - old_denoised) / denom_d;
          x += coeff_d * denoised_d;
          if (stage >= 3 && have_old_denoised_d) {
            const float denom_u = (lambda_s - lambdas[i - 2]) * 0.5f;
            if (std::fabs(denom_u) > 1e-12f) {
              integral_u *= step;
              const float coeff_u = alpha_t * (0.5f * dt * dt + integral_u * scaled_t);
              const Latent denoised_u = (denoised_d - old_denoised_d) / denom_u;
              x += coeff_u * denoised_u;
            }
          }
          old_denoised_d = std::move(denoised_d);
          have_old_denoised_d = true;
        }
      }

      const float noise_scale_sq = lambda_t * lambda_t - lambda_s * lambda_s * r * r;
      if (a.eta > 0.0f && noise_scale_sq > 0.0f) {
        const float noise_scale = alpha_t * std::sqrt(std::max(noise_scale_sq, 0.0f));
        x += noise_like(x, a.rng) * noise_scale;
      }
    }
    old_denoised = denoised;
    have_old_denoised = true;
  }
  return x;
}

}  // namespace sd::sampling::detail
