// Internal to the samplers: the model wrapper, the ancestral step split and one function
// per sampling method.
#pragma once

#include <tuple>
#include <vector>

#include "sampling/latent_math.h"
#include "sampling/samplers.h"

namespace sd::sampling::detail {

// Calls the Denoiser and checks what comes back fits the latent.
class Model {
 public:
  explicit Model(const Denoiser& denoiser) : fn_(denoiser) {}
  Latent operator()(const Latent& x, float sigma, int step) const;
  // The guided and the unconditional denoised latents (CFG++).
  std::pair<Latent, Latent> with_uncond(const Latent& x, float sigma, int step) const;

 private:
  const Denoiser& fn_;
};

Latent noise_like(const Latent& x, Rng& rng);

// An ancestral step from sigma_from to sigma_to splits into a deterministic step down to
// sigma_down and fresh noise of std sigma_up; flow models also rescale by alpha_scale.
struct AncestralStep {
  float sigma_down;
  float sigma_up;
  float alpha_scale;
};
AncestralStep ancestral_step(float sigma_from, float sigma_to, float eta, bool flow);

struct StepArgs {
  const Model& model;
  const std::vector<float>& sigmas;
  Rng& rng;
  const SamplerOptions& options;
  float eta;
  bool flow;
};

Latent sample_euler(const StepArgs& a, Latent x);
Latent sample_euler_ancestral(const StepArgs& a, Latent x);
Latent sample_heun(const StepArgs& a, Latent x);
Latent sample_dpm2(const StepArgs& a, Latent x);
Latent sample_euler_cfg_pp(const StepArgs& a, Latent x);
Latent sample_euler_ancestral_cfg_pp(const StepArgs& a, Latent x);
Latent sample_euler_gradient_estimation(const StepArgs& a, Latent x);

Latent sample_dpmpp_2s_ancestral(const StepArgs& a, Latent x);
Latent sample_dpmpp_2s_ancestral_flow(const StepArgs& a, Latent x);
Latent sample_dpmpp_2m(const StepArgs& a, Latent x);
Latent sample_dpmpp_2m_v2(const StepArgs& a, Latent x);
Latent sample_dpmpp_2m_sde(const StepArgs& a, Latent x, bool brownian_tree);

Latent sample_ipndm(const StepArgs& a, Latent x);
Latent sample_ipndm_v(const StepArgs& a, Latent x);
Latent sample_lms(const StepArgs& a, Latent x);
Latent sample_res_multistep(const StepArgs& a, Latent x);
Latent sample_res_2s(const StepArgs& a, Latent x);

Latent sample_lcm(const StepArgs& a, Latent x);
Latent sample_tcd(const StepArgs& a, Latent x);
Latent sample_er_sde(const StepArgs& a, Latent x);

}  // namespace sd::sampling::detail
