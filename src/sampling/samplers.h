// Samplers: integrate the reverse diffusion from the first sigma to 0, calling the model
// (through a Denoiser) once or twice per step. The formulas, the order of float
// operations and the noise draws follow stable-diffusion.cpp, so for the same model
// outputs and seed every step matches it to float precision.
#pragma once

#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "sampling/rng.h"
#include "sampling/schedule.h"
#include "sampling/schedulers.h"

namespace sd::sampling {

enum class SampleMethod {
  Euler,         // "euler"
  EulerA,        // "euler_a": ancestral Euler
  Heun,          // "heun": 2nd-order, two calls per step
  Dpm2,          // "dpm2": midpoint in log sigma, two calls per step
  Dpmpp2sA,      // "dpm++2s_a": DPM-Solver++(2S) ancestral, two calls per step
  Dpmpp2m,       // "dpm++2m": DPM-Solver++(2M)
  Dpmpp2mV2,     // "dpm++2mv2": 2M with a symmetric step-ratio
  Ipndm,         // "ipndm": improved pseudo-numerical (Adams-Bashforth up to 4th order)
  IpndmV,        // "ipndm_v": variable-step iPNDM
  Lcm,           // "lcm": latent consistency (denoise, then re-noise)
  DdimTrailing,  // "ddim_trailing": DDIM = ancestral Euler with eta (default 0)
  Tcd,           // "tcd": trajectory consistency distillation
  ResMultistep,  // "res_multistep"
  Res2s,         // "res_2s": two calls per step
  ErSde,         // "er_sde": extended reverse-time SDE
  EulerCfgPp,    // "euler_cfg_pp": needs the unconditional prediction
  EulerACfgPp,   // "euler_a_cfg_pp": needs the unconditional prediction
  EulerGe,       // "euler_ge": gradient estimation
  Dpmpp2mSde,    // "dpm++2m_sde"
  Dpmpp2mSdeBt,  // "dpm++2m_sde_bt": 2M SDE with Brownian-tree noise
  Lms,           // "lms": linear multistep
};

// sd.cpp's names (listed above); anything else throws sd::Error listing them.
SampleMethod parse_sample_method(std::string_view name);
const char* sample_method_name(SampleMethod method);

// The CFG++ samplers need the unconditional denoised latent as well (Denoised::uncond_x0).
bool needs_uncond(SampleMethod method);
// "--eta" when not given: 1 for euler_a, dpm++2s_a, er_sde, euler_a_cfg_pp and the 2M
// SDE samplers, otherwise 0.
float default_eta(SampleMethod method);
// euler for diffusion transformers (SD3, Flux, ...), euler_a for UNet models (SD1/2/XL).
SampleMethod default_sample_method(bool diffusion_transformer);
// The scheduler when none is given: exponential for EDM v-prediction, lcm for lcm/tcd,
// simple for ddim_trailing, else discrete. (Flux, Flux.2, LTX-2 and Ideogram 4 have their
// own defaults of the same name; the caller picks those by model.)
Scheduler default_scheduler(SampleMethod method, Prediction prediction);

struct Denoised {
  std::vector<float> x0;         // the guided denoised latent
  std::vector<float> uncond_x0;  // the unconditional one; CFG++ samplers only
};

// The model at noise level sigma: x -> denoised (model output scaled by the schedule's
// c_out/c_skip, after guidance). `step` counts calls like the reference's progress
// callback: i + 1 for step i, negated for the first of two calls in a step (heun, dpm2,
// dpm++2s_a, res_2s). Throw to cancel.
using Denoiser = std::function<Denoised(const std::vector<float>& x, float sigma, int step)>;

struct SamplerOptions {
  std::optional<float> eta;                 // unset: default_eta(method)
  Prediction prediction = Prediction::Eps;  // flow kinds change the ancestral steps
  int lms_max_order = 4;                    // lms: history length
  int lms_shift = 1;                        // lms: history shift (0 = k-diffusion's)
  int lms_divisions = 1000;                 // lms: integration points per coefficient
  float lcm_noise_clip_std = 0.0f;          // lcm: clip re-noise at this many std (0: off)
  float lcm_noise_scale_start = 1.0f;       // lcm: re-noise scale at the first step ...
  float lcm_noise_scale_end = 1.0f;         // ... and at the last (linear between)
  float ge_gamma = 2.0f;                    // euler_ge: gradient estimation weight
};

// Runs `method` from x (already noised to sigmas[0]) down the schedule and returns the
// final latent. Noise comes from `rng` in the reference's order and sizes: one randn()
// of x's size per noise draw. (The reference shares one generator between the initial
// noise and the sampler unless a separate sampler rng type is asked for.)
//
// Ancestral draws per step i (taken when sigmas[i + 1] > 0): euler_a, ddim_trailing,
// euler_ge, res_multistep, res_2s when the step adds noise (eta > 0); dpm++2s_a and
// euler_a_cfg_pp on every such step even at eta 0; dpm++2s_a for flow models, lcm, tcd,
// dpm++2m_sde and er_sde as their formulas say. dpm++2m_sde_bt draws one randn(2) for
// its Brownian tree seed before the first step.
std::vector<float> sample(SampleMethod method, const Denoiser& denoiser, std::vector<float> x,
                          const std::vector<float>& sigmas, Rng& rng,
                          const SamplerOptions& options = {});

}  // namespace sd::sampling
