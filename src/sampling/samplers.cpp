#include "sampling/samplers.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "sampling/sampler_steps.h"
#include "tensor/error.h"

namespace sd::sampling {

namespace {

constexpr SampleMethod kAllMethods[] = {
    SampleMethod::Euler,        SampleMethod::EulerA,       SampleMethod::Heun,
    SampleMethod::Dpm2,         SampleMethod::Dpmpp2sA,     SampleMethod::Dpmpp2m,
    SampleMethod::Dpmpp2mV2,    SampleMethod::Ipndm,        SampleMethod::IpndmV,
    SampleMethod::Lcm,          SampleMethod::DdimTrailing, SampleMethod::Tcd,
    SampleMethod::ResMultistep, SampleMethod::Res2s,        SampleMethod::ErSde,
    SampleMethod::EulerCfgPp,   SampleMethod::EulerACfgPp,  SampleMethod::EulerGe,
    SampleMethod::Dpmpp2mSde,   SampleMethod::Dpmpp2mSdeBt, SampleMethod::Lms,
};

}  // namespace

SampleMethod parse_sample_method(std::string_view name) {
  std::string valid;
  for (SampleMethod m : kAllMethods) {
    if (name == sample_method_name(m)) return m;
    valid += valid.empty() ? "" : ", ";
    valid += sample_method_name(m);
  }
  throw Error(format("unknown sampling method '%.*s'; valid methods: %s",
                     static_cast<int>(name.size()), name.data(), valid.c_str()));
}

const char* sample_method_name(SampleMethod method) {
  switch (method) {
    case SampleMethod::Euler:
      return "euler";
    case SampleMethod::EulerA:
      return "euler_a";
    case SampleMethod::Heun:
      return "heun";
    case SampleMethod::Dpm2:
      return "dpm2";
    case SampleMethod::Dpmpp2sA:
      return "dpm++2s_a";
    case SampleMethod::Dpmpp2m:
      return "dpm++2m";
    case SampleMethod::Dpmpp2mV2:
      return "dpm++2mv2";
    case SampleMethod::Ipndm:
      return "ipndm";
    case SampleMethod::IpndmV:
      return "ipndm_v";
    case SampleMethod::Lcm:
      return "lcm";
    case SampleMethod::DdimTrailing:
      return "ddim_trailing";
    case SampleMethod::Tcd:
      return "tcd";
    case SampleMethod::ResMultistep:
      return "res_multistep";
    case SampleMethod::Res2s:
      return "res_2s";
    case SampleMethod::ErSde:
      return "er_sde";
    case SampleMethod::EulerCfgPp:
      return "euler_cfg_pp";
    case SampleMethod::EulerACfgPp:
      return "euler_a_cfg_pp";
    case SampleMethod::EulerGe:
      return "euler_ge";
    case SampleMethod::Dpmpp2mSde:
      return "dpm++2m_sde";
    case SampleMethod::Dpmpp2mSdeBt:
      return "dpm++2m_sde_bt";
    case SampleMethod::Lms:
      return "lms";
  }
  return "unknown";
}

bool needs_uncond(SampleMethod method) {
  return method == SampleMethod::EulerCfgPp || method == SampleMethod::EulerACfgPp;
}

float default_eta(SampleMethod method) {
  switch (method) {
    case SampleMethod::EulerA:
    case SampleMethod::Dpmpp2sA:
    case SampleMethod::ErSde:
    case SampleMethod::EulerACfgPp:
    case SampleMethod::Dpmpp2mSde:
    case SampleMethod::Dpmpp2mSdeBt:
      return 1.0f;
    default:
      return 0.0f;
  }
}

SampleMethod default_sample_method(bool diffusion_transformer) {
  return diffusion_transformer ? SampleMethod::Euler : SampleMethod::EulerA;
}

Scheduler default_scheduler(SampleMethod method, Prediction prediction) {
  if (prediction == Prediction::EdmV) return Scheduler::Exponential;
  if (method == SampleMethod::Lcm || method == SampleMethod::Tcd) return Scheduler::Lcm;
  if (method == SampleMethod::DdimTrailing) return Scheduler::Simple;
  return Scheduler::Discrete;
}

std::vector<float> sample(SampleMethod method, const Denoiser& denoiser, std::vector<float> x,
                          const std::vector<float>& sigmas, Rng& rng,
                          const SamplerOptions& options) {
  SD_CHECK(!sigmas.empty(), "[%s] the sigma schedule is empty; it needs at least one sigma",
           sample_method_name(method));
  for (float s : sigmas) {
    SD_CHECK(std::isfinite(s) && s >= 0, "[%s] sigma %g is not a finite non-negative number",
             sample_method_name(method), s);
  }
  using namespace detail;
  const Model model(denoiser);
  const StepArgs a{model,
                   sigmas,
                   rng,
                   options,
                   options.eta.value_or(default_eta(method)),
                   is_flow(options.prediction)};
  Latent latent(std::move(x));
  switch (method) {
    case SampleMethod::Euler:
      return sample_euler(a, std::move(latent)).release();
    case SampleMethod::EulerA:
    case SampleMethod::DdimTrailing:  // DDIM is ancestral Euler on the "simple" schedule
      return sample_euler_ancestral(a, std::move(latent)).release();
    case SampleMethod::Heun:
      return sample_heun(a, std::move(latent)).release();
    case SampleMethod::Dpm2:
      return sample_dpm2(a, std::move(latent)).release();
    case SampleMethod::Dpmpp2sA:
      return (a.flow ? sample_dpmpp_2s_ancestral_flow(a, std::move(latent))
                     : sample_dpmpp_2s_ancestral(a, std::move(latent)))
          .release();
    case SampleMethod::Dpmpp2m:
      return sample_dpmpp_2m(a, std::move(latent)).release();
    case SampleMethod::Dpmpp2mV2:
      return sample_dpmpp_2m_v2(a, std::move(latent)).release();
    case SampleMethod::Ipndm:
      return sample_ipndm(a, std::move(latent)).release();
    case SampleMethod::IpndmV:
      return sample_ipndm_v(a, std::move(latent)).release();
    case SampleMethod::Lcm:
      return sample_lcm(a, std::move(latent)).release();
    case SampleMethod::Tcd:
      return sample_tcd(a, std::move(latent)).release();
    case SampleMethod::ResMultistep:
      return sample_res_multistep(a, std::move(latent)).release();
    case SampleMethod::Res2s:
      return sample_res_2s(a, std::move(latent)).release();
    case SampleMethod::ErSde:
      return sample_er_sde(a, std::move(latent)).release();
    case SampleMethod::EulerCfgPp:
      return sample_euler_cfg_pp(a, std::move(latent)).release();
    case SampleMethod::EulerACfgPp:
      return sample_euler_ancestral_cfg_pp(a, std::move(latent)).release();
    case SampleMethod::EulerGe:
      return sample_euler_gradient_estimation(a, std::move(latent)).release();
    case SampleMethod::Dpmpp2mSde:
      return sample_dpmpp_2m_sde(a, std::move(latent), false).release();
    case SampleMethod::Dpmpp2mSdeBt:
      return sample_dpmpp_2m_sde(a, std::move(latent), true).release();
    case SampleMethod::Lms:
      return sample_lms(a, std::move(latent)).release();
  }
  fail("[sampler] unknown sampling method %d", static_cast<int>(method));
}

namespace detail {

Latent Model::operator()(const Latent& x, float sigma, int step) const {
  Denoised out = fn_(x.values(), sigma, step);
  SD_CHECK(out.x0.size() == x.size(),
           "[sampler] the denoiser returned %zu values for a latent of %zu", out.x0.size(),
           x.size());
  return Latent(std::move(out.x0));
}

std::pair<Latent, Latent> Model::with_uncond(const Latent& x, float sigma, int step) const {
  Denoised out = fn_(x.values(), sigma, step);
  SD_CHECK(out.x0.size() == x.size() && out.uncond_x0.size() == x.size(),
           "[sampler] a CFG++ sampler needs the denoised and the unconditional denoised "
           "latent (%zu values each); got %zu and %zu",
           x.size(), out.x0.size(), out.uncond_x0.size());
  return {Latent(std::move(out.x0)), Latent(std::move(out.uncond_x0))};
}

Latent noise_like(const Latent& x, Rng& rng) {
  return Latent(rng.randn(x.size()));
}

AncestralStep ancestral_step(float sigma_from, float sigma_to, float eta, bool flow) {
  if (flow) {
    // Flow models: x_t = (1 - sigma) x0 + sigma noise, so shrinking the deterministic step
    // also rescales the signal (alpha_scale) before adding fresh noise.
    if (eta <= 0.0f || sigma_from <= 0.0f || sigma_to <= 0.0f) return {sigma_to, 0.0f, 1.0f};
    eta = std::min(eta, 1.0f);  // beyond 1 the split has no real solution
    const float sigma_ratio = sigma_to / sigma_from;
    float sigma_down = sigma_to * (1.0f + (sigma_ratio - 1.0f) * eta);
    sigma_down = std::max(0.0f, std::min(sigma_to, sigma_down));
    const float denom = 1.0f - sigma_down;
    if (denom <= 0.0f) return {sigma_to, 0.0f, 1.0f};
    const float alpha_scale = (1.0f - sigma_to) / denom;
    float term = (sigma_down / sigma_to) * alpha_scale;
    term = std::max(-1.0f, std::min(1.0f, term));
    const float sigma_up = sigma_to * std::sqrt(std::max(1.0f - term * term, 0.0f));
    return {sigma_down, sigma_up, alpha_scale};
  }
  // Variance-exploding: sigma_to^2 = sigma_down^2 + sigma_up^2 (k-diffusion).
  if (eta <= 0.0f) return {sigma_to, 0.0f, 1.0f};
  const float from_sq = sigma_from * sigma_from;
  const float to_sq = sigma_to * sigma_to;
  float sigma_up = 0.0f;
  if (from_sq > 0.0f) {
    const float term = to_sq * (from_sq - to_sq) / from_sq;
    sigma_up = std::min(sigma_to, eta * std::sqrt(std::max(term, 0.0f)));
  }
  const float down_sq = to_sq - sigma_up * sigma_up;
  return {down_sq > 0.0f ? std::sqrt(down_sq) : 0.0f, sigma_up, 1.0f};
}

}  // namespace detail

}  // namespace sd::sampling
