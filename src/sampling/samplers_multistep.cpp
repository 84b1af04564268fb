// Multistep samplers: reuse earlier derivatives or denoised latents instead of extra model
// calls (iPNDM, LMS), and the RES exponential integrators (res_multistep, res_2s).
#include <algorithm>
#include <cmath>

#include "sampling/sampler_steps.h"

namespace sd::sampling::detail {

namespace {

// Adams-Bashforth combinations of the current and up to three earlier derivatives.
Latent adams_bashforth(int order, const Latent& d, const std::vector<Latent>& hist) {
  const size_t n = hist.size();
  switch (order) {
    case 1:
      return d;
    case 2:
      return (3.f * d - hist.back()) / 2.f;
    case 3:
      return (23.f * d - 16.f * hist[n - 1] + 5.f * hist[n - 2]) / 12.f;
    default:
      return (55.f * d - 59.f * hist[n - 1] + 37.f * hist[n - 2] - 9.f * hist[n - 3]) / 24.f;
  }
}

constexpr int kMaxIpndmOrder = 4;

void remember(std::vector<Latent>& hist, Latent d) {
  if (hist.size() == static_cast<size_t>(kMaxIpndmOrder - 1)) hist.erase(hist.begin());
  hist.push_back(std::move(d));
}

// phi_1(t) = (e^t - 1) / t and phi_2(t) = (phi_1(t) - 1) / t, by series near 0.
float phi1(float t) {
  if (fabsf(t) < 1e-6f) return 1.0f + t * 0.5f + (t * t) / 6.0f;
  return (expf(t) - 1.0f) / t;
}
float phi2(float t) {
  if (fabsf(t) < 1e-6f) return 0.5f + t / 6.0f + (t * t) / 24.0f;
  return (phi1(t) - 1.0f) / t;
}
// In float, as the reference computes the RES samplers' times.
float t_of_sigma_in_float(float sigma) {
  return -logf(sigma);
}

// Adds the ancestral noise of a RES step.
void renoise(const StepArgs& a, Latent& x, float sigma_to, const AncestralStep& step) {
  if (sigma_to > 0.0f && step.sigma_up > 0.0f) {
    if (a.flow) x *= step.alpha_scale;
    x += noise_like(x, a.rng) * step.sigma_up;
  }
}

}  // namespace

Latent sample_ipndm(const StepArgs& a, Latent x) {
  const auto& s = a.sigmas;
  std::vector<Latent> hist;
  for (size_t i = 0; i + 1 < s.size(); i++) {
    const Latent denoised = a.model(x, s[i], int(i) + 1);
    Latent d = (x - denoised) / s[i];
    const int order = std::min(kMaxIpndmOrder, int(i) + 1);
    const float dt = s[i + 1] - s[i];
    x += adams_bashforth(order, d, hist) * dt;
    remember(hist, std::move(d));
  }
  return x;
}

// iPNDM with variable steps: the second-order weights follow the ratio of the last two
// step sizes; higher orders use the fixed-step weights.
Latent sample_ipndm_v(const StepArgs& a, Latent x) {
  const auto& s = a.sigmas;
  std::vector<Latent> hist;
  for (size_t i = 0; i + 1 < s.size(); i++) {
    const Latent denoised = a.model(x, s[i], int(i) + 1);
    Latent d = (x - denoised) / s[i];
    const int order = std::min(kMaxIpndmOrder, int(i) + 1);
    const float h_n = s[i + 1] - s[i];
    const float h_n_1 = i > 0 ? s[i] - s[i - 1] : h_n;
    if (order == 2) {
      x += (((2.f + (h_n / h_n_1)) * d - (h_n / h_n_1) * hist.back()) / 2.f) * h_n;
    } else {
      x += adams_bashforth(order, d, hist) * h_n;
    }
    remember(hist, std::move(d));
  }
  return x;
}

// Linear multistep (k-diffusion): each coefficient integrates a Lagrange basis polynomial
// over the step with the midpoint rule. `lms_shift` reuses a more recent derivative in
// place of the oldest ones, which needs fewer steps.
Latent sample_lms(const StepArgs& a, Latent x) {
  const auto& s = a.sigmas;
  const int divisions = a.options.lms_divisions;
  const int shift = std::max(0, a.options.lms_shift);
  const int steps = static_cast<int>(s.size()) - 1;
  const int max_order = std::min(std::max(1, a.options.lms_max_order), steps);

  const auto coefficient = [&](int order, int m, int j) -> float {
    if (!divisions) return s[m + 1] - s[m];
    const float start = s[m];
    const float dx = (s[m + 1] - start) / divisions;
    const float node = s[m - j];
    const float first = start + 0.5f * dx;
    float sum = 0.0f;
    for (int h = 0; h < divisions; h++) {
      const float b = h * dx + first;
      float prod = 1.0f;
      for (int k = 0; k < order; k++) {
        if (k == j) continue;
        const float other = s[m - k];
        prod *= (b - other) / (node - other);
      }
      sum += prod;
    }
    return sum * dx;
  };

  std::vector<float> coeff(std::max(max_order, 0));
  std::vector<Latent> hist;
  for (int i = 0; i < steps; i++) {
    const Latent denoised = a.model(x, s[i], i + 1);
    const int order = std::min(max_order, i + 1);
    for (int c = 0; c < order; c++) coeff[c] = coefficient(order, i, c);
    Latent d = (x - denoised) / s[i];
    x += d * coeff[0];
    if (max_order > 1) {
      const int hist_size_p1 = static_cast<int>(hist.size()) + 1;
      if (i) {
        const int hist_max = static_cast<int>(hist.size()) - 1;
        for (int c = 2; c <= order; c++) {
          x += hist[std::min(hist_max, hist_size_p1 - c + shift)] * coeff[c - 1];
        }
      }
      if (hist_size_p1 == max_order) hist.erase(hist.begin());
      hist.push_back(std::move(d));
    }
  }
  return x;
}

Latent sample_res_multistep(const StepArgs& a, Latent x) {
  const auto& s = a.sigmas;
  Latent old_denoised = x;
  bool have_old_sigma = false;
  float old_sigma_down = 0.0f;
  for (size_t i = 0; i + 1 < s.size(); i++) {
    const Latent denoised = a.model(x, s[i], int(i) + 1);
    const float sigma_from = s[i];
    const float sigma_to = s[i + 1];
    const AncestralStep step = ancestral_step(sigma_from, sigma_to, a.eta, a.flow);
    if (step.sigma_down == 0.0f || !have_old_sigma) {
      x += ((x - denoised) / sigma_from) * (step.sigma_down - sigma_from);
    } else {
      const float t = t_of_sigma_in_float(sigma_from);
      const float t_old = t_of_sigma_in_float(old_sigma_down);
      const float t_next = t_of_sigma_in_float(step.sigma_down);
      const float t_prev = t_of_sigma_in_float(s[i - 1]);
      const float h = t_next - t;
      const float c2 = (t_prev - t_old) / h;
      const float phi1_val = phi1(-h);
      const float phi2_val = phi2(-h);
      float b1 = phi1_val - phi2_val / c2;
      float b2 = phi2_val / c2;
      if (!std::isfinite(b1)) b1 = 0.0f;
      if (!std::isfinite(b2)) b2 = 0.0f;
      x = expf(-h) * x + h * (b1 * denoised + b2 * old_denoised);
    }
    renoise(a, x, sigma_to, step);
    old_denoised = denoised;
    old_sigma_down = step.sigma_down;
    have_old_sigma = true;
  }
  return x;
}

Latent sample_res_2s(const StepArgs& a, Latent x) {
  const auto& s = a.sigmas;
  const float c2 = 0.5f;
  for (size_t i = 0; i + 1 < s.size(); i++) {
    const float sigma_from = s[i];
    const float sigma_to = s[i + 1];
    const Latent denoised = a.model(x, sigma_from, -(int(i) + 1));
    const AncestralStep step = ancestral_step(sigma_from, sigma_to, a.eta, a.flow);
    const Latent x0 = x;
    if (step.sigma_down == 0.0f || sigma_from == 0.0f) {
      x = denoised;
    } else {
      const float t = t_of_sigma_in_float(sigma_from);
      const float t_next = t_of_sigma_in_float(step.sigma_down);
      const float h = t_next - t;
      const float a21 = c2 * phi1(-h * c2);
      const float phi1_val = phi1(-h);
      const float phi2_val = phi2(-h);
      const float b2 = phi2_val / c2;
      const float b1 = phi1_val - b2;
      const float sigma_c2 = expf(-(t + h * c2));
      const Latent eps1 = denoised - x0;
      const Latent x2 = x0 + eps1 * (h * a21);
      const Latent denoised2 = a.model(x2, sigma_c2, int(i) + 1);
      const Latent eps2 = denoised2 - x0;
      x = x0 + h * (b1 * eps1 + b2 * eps2);
    }
    renoise(a, x, sigma_to, step);
  }
  return x;
}

}  // namespace sd::sampling::detail
