// The denoiser samplers call (samplers.h): a diffusion network's raw outputs turned into
// the denoised latent. It scales the input by c_in, runs the network for the conditional
// and (with guidance) the unconditional context, combines them by classifier-free
// guidance (Ho & Salimans 2022), applies the schedule's c_out/c_skip and, for
// inpainting, keeps the init image's latent outside the mask. A step cache may stand in
// for the network: its outputs reused (ucache, easycache, dbcache/taylorseer/cache-dit) or
// the denoised latent forecast (spectrum). The arithmetic is stable-diffusion.cpp's, in its float
// order, so images match it bit for bit.
#pragma once

#include <functional>
#include <vector>

#include "sampling/guidance_extras.h"
#include "sampling/samplers.h"
#include "sampling/schedule.h"
#include "sampling/skip_layer_guidance.h"
#include "sampling/step_cache.h"

namespace sd::sampling {

// A guidance scale of 1 is the conditional output alone: no unconditional pass.
inline bool cfg_needs_uncond(float cfg_scale) {
  return cfg_scale != 1.0f;
}

// The network at one timestep: its input (x * c_in) -> one output of x's size per
// conditioning, the conditional first, then the unconditional when `with_uncond`.
using NetworkCall = std::function<std::vector<std::vector<float>>(
    const std::vector<float>& x_in, float timestep, bool with_uncond)>;

// Inpainting: where `mask` (one latent plane, 1 = repaint) is below 1 the denoised latent
// is blended towards `init_latent`.
struct DenoiseMask {
  std::vector<float> mask;
  std::vector<float> init_latent;
};

struct GuidanceOptions {
  float cfg_scale = 7.0f;
  bool uncond_x0 = false;  // also return the unconditional denoised latent (CFG++)
  int timestep_shift = 0;  // NitroFusion (schedule.h)
  const DenoiseMask* mask = nullptr;
  // --extra-sample-args guidance (guidance_extras.h): a scale per step, and APG (null: off).
  std::vector<float> guidance_schedule;
  AdaptiveProjectedGuidance* apg = nullptr;
  // Step caching (step_cache.h); either may be null.
  OutputCache* output_cache = nullptr;
  DenoisedForecast* forecast = nullptr;
  // Skip-layer guidance (DiT models; null: off).
  const SkipLayerGuidance* skip_layer = nullptr;
};

class GuidedDenoiser {
 public:
  GuidedDenoiser(const DiscreteSchedule& schedule, NetworkCall network, GuidanceOptions options)
      : schedule_(schedule), network_(std::move(network)), options_(options) {}

  // Told before each network call (x as the sampler gave it) and after it (the result):
  // where a caller checks for cancellation, draws previews and counts progress.
  std::function<void(const std::vector<float>& x, const ModelStep& step_scalings, int step)> before;
  std::function<void(const Denoised& denoised, int step)> after;

  Denoised operator()(const std::vector<float>& x, float sigma, int step) const;

 private:
  float guidance_scale(int step) const;

  const DiscreteSchedule& schedule_;
  NetworkCall network_;
  GuidanceOptions options_;
};

}  // namespace sd::sampling
