// Euler-family samplers: first-order steps along dx/dsigma = (x - D(x)) / sigma, their
// ancestral (noise re-injecting) variants, and the two-call Heun and DPM2 steps.
#include <cmath>

#include "sampling/sampler_steps.h"

namespace sd::sampling::detail {

Latent sample_euler(const StepArgs& a, Latent x) {
  const auto& s = a.sigmas;
  for (size_t i = 0; i + 1 < s.size(); i++) {
    const Latent denoised = a.model(x, s[i], int(i) + 1);
    const Latent d = (x - denoised) / s[i];
    x += d * (s[i + 1] - s[i]);
  }
  return x;
}

Latent sample_euler_ancestral(const StepArgs& a, Latent x) {
  const auto& s = a.sigmas;
  for (size_t i = 0; i + 1 < s.size(); i++) {
    const float sigma = s[i];
    const float sigma_to = s[i + 1];
    const Latent denoised = a.model(x, sigma, int(i) + 1);
    if (sigma_to == 0.f) {
      x = denoised;
    } else if (a.eta == 0.f) {
      const float ratio = sigma_to / sigma;
      x = ratio * x + (1.0f - ratio) * denoised;
    } else {
      const AncestralStep step = ancestral_step(sigma, sigma_to, a.eta, a.flow);
      const float ratio = step.sigma_down / sigma;
      x = ratio * x + (1.0f - ratio) * denoised;
      if (step.sigma_up > 0.f) {
        if (a.flow) x *= step.alpha_scale;
        x += noise_like(x, a.rng) * step.sigma_up;
      }
    }
  }
  return x;
}

Latent sample_heun(const StepArgs& a, Latent x) {
  const auto& s = a.sigmas;
  for (size_t i = 0; i + 1 < s.size(); i++) {
    const Latent denoised = a.model(x, s[i], -(int(i) + 1));
    Latent d = (x - denoised) / s[i];
    const float dt = s[i + 1] - s[i];
    if (s[i + 1] == 0) {
      x += d * dt;  // Euler on the last step: the corrector would divide by 0
    } else {
      const Latent x2 = x + d * dt;
      const Latent denoised2 = a.model(x2, s[i + 1], int(i) + 1);
      d = (d + (x2 - denoised2) / s[i + 1]) / 2.0f;
      x += d * dt;
    }
  }
  return x;
}

Latent sample_dpm2(const StepArgs& a, Latent x) {
  const auto& s = a.sigmas;
  for (size_t i = 0; i + 1 < s.size(); i++) {
    const Latent denoised = a.model(x, s[i], -(int(i) + 1));
    const Latent d = (x - denoised) / s[i];
    if (s[i + 1] == 0) {
      x += d * (s[i + 1] - s[i]);
    } else {
      // Midpoint in log sigma (the reference computes it in double).
      const auto sigma_mid = static_cast<float>(
          std::exp(0.5f * (std::log(double{s[i]}) + std::log(double{s[i + 1]}))));
      const float dt_1 = sigma_mid - s[i];
      const float dt_2 = s[i + 1] - s[i];
      const Latent x2 = x + d * dt_1;
      const Latent denoised2 = a.model(x2, sigma_mid, int(i) + 1);
      x += ((x2 - denoised2) / sigma_mid) * dt_2;
    }
  }
  return x;
}

// CFG++ (Chung et al. 2024): step along the unconditional direction but land on the
// guided prediction.
Latent sample_euler_cfg_pp(const StepArgs& a, Latent x) {
  const auto& s = a.sigmas;
  for (size_t i = 0; i + 1 < s.size(); i++) {
    const auto [denoised, uncond] = a.model.with_uncond(x, s[i], int(i) + 1);
    const Latent d = (x - uncond) / s[i];
    x = denoised + d * s[i + 1];
  }
  return x;
}

Latent sample_euler_ancestral_cfg_pp(const StepArgs& a, Latent x) {
  const auto& s = a.sigmas;
  for (size_t i = 0; i + 1 < s.size(); i++) {
    const auto [denoised, uncond] = a.model.with_uncond(x, s[i], int(i) + 1);
    const Latent d = (x - uncond) / s[i];
    // The variance-exploding split even for flow models, as the reference does.
    const AncestralStep step = ancestral_step(s[i], s[i + 1], a.eta, false);
    x = denoised + d * step.sigma_down;
    if (s[i + 1] > 0) x += noise_like(x, a.rng) * step.sigma_up;
  }
  return x;
}

// Gradient estimation (Permenter & Yuan 2024): extrapolate the Euler direction with the
// previous one, d_bar = gamma d + (1 - gamma) d_prev.
Latent sample_euler_gradient_estimation(const StepArgs& a, Latent x) {
  const auto& s = a.sigmas;
  const float gamma = a.options.ge_gamma;
  Latent old_d;
  bool has_old_d = false;
  for (size_t i = 0; i + 1 < s.size(); i++) {
    const float sigma = s[i];
    const float sigma_to = s[i + 1];
    const Latent denoised = a.model(x, sigma, int(i) + 1);
    if (sigma_to == 0.f) {
      x = denoised;
      continue;
    }
    const AncestralStep step = ancestral_step(sigma, sigma_to, a.eta, a.flow);
    Latent d = (x - denoised) / sigma;
    const float dt = step.sigma_down - sigma;
    if (has_old_d) {
      const Latent d_bar = d * gamma + old_d * (1.0f - gamma);
      x += d_bar * dt;
    } else {
      x += d * dt;
    }
    old_d = std::move(d);
    has_old_d = true;
    if (step.sigma_up > 0.f) {
      if (a.flow) x *= step.alpha_scale;
      x += noise_like(x, a.rng) * step.sigma_up;
    }
  }
  return x;
}

}  // namespace sd::sampling::detail
