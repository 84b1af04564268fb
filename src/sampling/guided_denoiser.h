// The denoiser samplers call (samplers.h): a diffusion network's raw outputs turned into
// the denoised latent. It scales the input by c_in, runs the network for the conditional
// and (with guidance) the unconditional context, combines them by classifier-free
// guidance (Ho & Salimans 2022) -- for image-conditioned models (instruct-pix2pix,
// inpainting) with a third, image-unconditional pass when --img-cfg-scale asks (Brooks et
// al. 2023, eq. 3) -- applies the schedule's c_out/c_skip and, for
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

// Which conditionings the network runs at one step, besides the conditional one.
struct GuidancePasses {
  bool uncond = false;      // the negative prompt, with the image input
  bool img_uncond = false;  // the negative prompt, with the image input zeroed
  size_t count() const { return 1 + (uncond ? 1 : 0) + (img_uncond ? 1 : 0); }
};

// sd.cpp's rule for the passes. `img_cfg_scale` is 1 for models without an image input
// and when --img-cfg-scale is not given: then there is no image-unconditional pass and the
// unconditional one runs when the scale is not 1. Text and image scales equal need no
// text-unconditional pass: the guidance is then plain CFG against the image-unconditional.
inline GuidancePasses guidance_passes(float cfg_scale, float img_cfg_scale) {
  return {img_cfg_scale != cfg_scale, img_cfg_scale != 1.0f};
}

// Three-way classifier-free guidance (instruct-pix2pix, Brooks et al. 2023, eq. 3):
//   img_uncond + img_cfg * (uncond - img_uncond) + cfg * (cond - uncond),
// elementwise in sd.cpp's float order.
std::vector<float> image_guided(const std::vector<float>& cond, const std::vector<float>& uncond,
                                const std::vector<float>& img_uncond, float cfg_scale,
                                float img_cfg_scale);

// The network at one timestep: its input (x * c_in) -> one output of x's size per
// conditioning asked: the conditional first, then the unconditional (`passes.uncond`),
// then the image-unconditional (`passes.img_uncond`).
using NetworkCall = std::function<std::vector<std::vector<float>>(
    const std::vector<float>& x_in, float timestep, const GuidancePasses& passes)>;

// Inpainting: where `mask` (one latent plane, 1 = repaint; a video latent's plane covers
// its frames) is below 1 the denoised latent is blended towards `init_latent`. With
// `pin_input` the network's input is blended so too (Wan 2.2 TI2V: the given frames clean).
struct DenoiseMask {
  std::vector<float> mask;
  std::vector<float> init_latent;
  bool pin_input = false;
};

struct GuidanceOptions {
  float cfg_scale = 7.0f;
  // --img-cfg-scale, resolved: 1 (no image guidance) unless the model takes an image input
  // and the request sets it.
  float img_cfg_scale = 1.0f;
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
