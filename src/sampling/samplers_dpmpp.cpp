// DPM-Solver++ samplers (Lu et al. 2022, arXiv:2211.01095): exponential integrators in
// t = -log(sigma), single-step 2S (ancestral), multistep 2M and its SDE variants.
#include <cmath>
#include <cstring>
#include <limits>

#include "sampling/brownian_tree.h"
#include "sampling/sampler_steps.h"

namespace sd::sampling::detail {

namespace {
// In double and rounded to float, as the reference computes them.
float t_of_sigma(float sigma) {
  return static_cast<float>(-std::log(double{sigma}));
}
float sigma_of_t(float t) {
  return static_cast<float>(std::exp(-double{t}));
}
// exp(v) - 1 for a float v, in double, rounded to float.
float exp_minus_one(float v) {
  return static_cast<float>(std::exp(double{v}) - 1);
}
}  // namespace

Latent sample_dpmpp_2s_ancestral(const StepArgs& a, Latent x) {
  const auto& s = a.sigmas;
  for (size_t i = 0; i + 1 < s.size(); i++) {
    const Latent denoised = a.model(x, s[i], -(int(i) + 1));
    const AncestralStep step = ancestral_step(s[i], s[i + 1], a.eta, false);
    if (step.sigma_down == 0) {
      x = denoised;
    } else {
      const float t = t_of_sigma(s[i]);
      const float t_next = t_of_sigma(step.sigma_down);
      const float h = t_next - t;
      const float sigma_s = sigma_of_t(t + 0.5f * h);
      const Latent x2 = (sigma_s / sigma_of_t(t)) * x - exp_minus_one(-h * 0.5f) * denoised;
      const Latent denoised2 = a.model(x2, sigma_s, int(i) + 1);
      x = (sigma_of_t(t_next) / sigma_of_t(t)) * x - exp_minus_one(-h) * denoised2;
    }
    // Drawn on every step that does not end at 0, even when sigma_up is 0.
    if (s[i + 1] > 0) x += noise_like(x, a.rng) * step.sigma_up;
  }
  return x;
}

// The flow version works in lambda = log((1 - sigma) / sigma); the midpoint sigma comes
// from exp(lambda_mid) = sqrt(e^lambda(sigma) e^lambda(sigma_down)), which avoids the
// singularity at sigma = 1.
Latent sample_dpmpp_2s_ancestral_flow(const StepArgs& a, Latent x) {
  const auto& s = a.sigmas;
  for (size_t i = 0; i + 1 < s.size(); i++) {
    const float sigma = s[i];
    const float sigma_to = s[i + 1];
    // At sigma = 1 the midpoint equals sigma, so the second call would repeat the first.
    const bool starts_at_pure_noise = 1.0 - sigma < 1e-6;
    const Latent denoised = a.model(x, sigma, (starts_at_pure_noise ? 1 : -1) * (int(i) + 1));
    if (sigma_to == 0.0f) {
      x = denoised;
      continue;
    }
    const AncestralStep step = ancestral_step(sigma, sigma_to, a.eta, true);
    Latent d_mid;
    if (starts_at_pure_noise) {
      d_mid = denoised;
    } else {
      const float exp_s =
          std::sqrt(((1 - sigma) / sigma) * ((1 - step.sigma_down) / step.sigma_down));
      const float sigma_s = 1.0f / (exp_s + 1.0f);
      const float ratio = sigma_s / sigma;
      const Latent u = (x * ratio) + (denoised * (1.0f - ratio));
      d_mid = a.model(u, sigma_s, int(i) + 1);
    }
    const float down_ratio = step.sigma_down / sigma;
    x = (x * down_ratio) + (d_mid * (1.0f - down_ratio));
    if (sigma_to > 0.0f && a.eta > 0.0f) {
      x = step.alpha_scale * x + noise_like(x, a.rng) * step.sigma_up;
    }
  }
  return x;
}

Latent sample_dpmpp_2m(const StepArgs& a, Latent x) {
  const auto& s = a.sigmas;
  Latent old_denoised = x;
  for (size_t i = 0; i + 1 < s.size(); i++) {
    const Latent denoised = a.model(x, s[i], int(i) + 1);
    const float t = t_of_sigma(s[i]);
    const float t_next = t_of_sigma(s[i + 1]);
    const float h = t_next - t;
    const float ratio = s[i + 1] / s[i];
    const float b = static_cast<float>(std::exp(-double{h}) - 1.f);
    if (i == 0 || s[i + 1] == 0) {
      x = ratio * x - b * denoised;
    } else {
      // Second order: extrapolate the denoised latent using the previous step's.
      const float h_last = t - t_of_sigma(s[i - 1]);
      const float r = h_last / h;
      const Latent denoised_d =
          (1.f + 1.f / (2.f * r)) * denoised - (1.f / (2.f * r)) * old_denoised;
      x = ratio * x - b * denoised_d;
    }
    old_denoised = denoised;
  }
  return x;
}

Latent sample_dpmpp_2m_v2(const StepArgs& a, Latent x) {
  const auto& s = a.sigmas;
  Latent old_denoised = x;
  for (size_t i = 0; i + 1 < s.size(); i++) {
    const Latent denoised = a.model(x, s[i], int(i) + 1);
    const float t = t_of_sigma(s[i]);
    const float t_next = t_of_sigma(s[i + 1]);
    const float h = t_next - t;
    const float ratio = s[i + 1] / s[i];
    if (i == 0 || s[i + 1] == 0) {
      const float b = static_cast<float>(std::exp(-double{h}) - 1.f);
      x = ratio * x - b * denoised;
    } else {
      // Symmetric in the two step sizes: their ratio >= 1 and their mean.
      const float h_last = t - t_of_sigma(s[i - 1]);
      const float h_min = std::min(h_last, h);
      const float h_max = std::max(h_last, h);
      const float r = h_max / h_min;
      const float h_d = (h_max + h_min) / 2.f;
      const float b = static_cast<float>(std::exp(-double{h_d}) - 1.f);
      const Latent denoised_d =
          (1.f + 1.f / (2.f * r)) * denoised - (1.f / (2.f * r)) * old_denoised;
      x = ratio * x - b * denoised_d;
    }
    old_denoised = denoised;
  }
  return x;
}

// The midpoint 2M SDE (k-diffusion's sample_dpmpp_2m_sde); with `brownian_tree` the noise
// comes from a seeded Brownian tree, so the path barely changes with the step count.
Latent sample_dpmpp_2m_sde(const StepArgs& a, Latent x, bool brownian_tree) {
  const auto& s = a.sigmas;
  std::unique_ptr<BrownianTree> tree;
  if (brownian_tree) {
    double sigma_max = 0.0;
    double sigma_min = std::numeric_limits<double>::infinity();
    for (float v : s) {
      if (v > 0.0f) {
        sigma_max = std::max(sigma_max, double{v});
        sigma_min = std::min(sigma_min, double{v});
      }
    }
    if (sigma_max <= sigma_min) return x;  // nothing to integrate
    // The tree's seed is the bit pattern of two draws from the sampler's generator.
    const std::vector<float> draw = a.rng.randn(2);
    uint64_t tree_seed = 0;
    std::memcpy(&tree_seed, draw.data(), sizeof(tree_seed));
    tree = std::make_unique<BrownianTree>(x.size(), sigma_min, sigma_max, tree_seed);
  }
  Latent old_denoised;
  bool have_old_denoised = false;
  float h_last = 0.f;
  for (size_t i = 0; i + 1 < s.size(); i++) {
    const Latent denoised = a.model(x, s[i], int(i) + 1);
    if (s[i + 1] == 0.f) {
      x = denoised;
    } else {
      const float t = -std::log(s[i]);
      const float t_next = -std::log(s[i + 1]);
      const float h = t_next - t;
      const float eta_h = a.eta * h;
      const float decay = s[i + 1] / s[i] * std::exp(-eta_h);
      const float b = -std::expm1(-h - eta_h);
      x = decay * x + b * denoised;
      if (have_old_denoised) {
        const float r = h_last / h;
        x += (0.5f * b / r) * (denoised - old_denoised);
      }
      if (a.eta > 0.f) {
        const float noise_scale = s[i + 1] * std::sqrt(-std::expm1(-2.f * eta_h));
        const Latent noise = tree ? Latent((*tree)(s[i], s[i + 1])) : noise_like(x, a.rng);
        x += noise * noise_scale;
      }
      h_last = h;
    }
    old_denoised = denoised;
    have_old_denoised = true;
  }
  return x;
}

}  // namespace sd::sampling::detail
