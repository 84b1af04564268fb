// One generation request: prompt, size, sampler, image inputs, guidance extras, LoRAs,
// and the callbacks that report progress, previews and warnings.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "io/image.h"
#include "models/tiling.h"
#include "pipeline/hires_fix.h"
#include "pipeline/reference_images.h"
#include "sampling/guidance_extras.h"
#include "sampling/rng.h"
#include "sampling/samplers.h"
#include "sampling/schedulers.h"
#include "sampling/skip_layer_guidance.h"
#include "sampling/step_cache.h"

namespace sd::pipeline {

// Images one request may ask for: a batch's images are all kept until it ends.
inline constexpr int kMaxBatchCount = 4096;
// The most video frames one request may ask for (a 68 s clip at 15 fps).
inline constexpr int kMaxVideoFrames = 1025;

struct ImageRequest {
  std::string prompt, negative_prompt;
  int clip_skip = -1;  // <= 0: the model's default
  // Multiples of 8; the UNet needs multiples of 64, so others are aligned up (as sd.cpp).
  int width = 512, height = 512;
  int steps = 20;
  float cfg_scale = 7.0f;
  // --img-cfg-scale: image guidance of models with an image input (instruct-pix2pix,
  // inpainting); unset: none (1), as sd.cpp. Other models ignore it with a warning.
  std::optional<float> img_cfg_scale;
  float guidance = 3.5f;                         // --guidance: distilled guidance (FLUX.1 dev)
  std::optional<float> flow_shift;               // --flow-shift; unset: the model's
  std::optional<sampling::SampleMethod> method;  // unset: the model's default
  std::optional<sampling::Scheduler> scheduler;  // unset: the sampler's default
  std::vector<float> custom_sigmas;              // --sigmas
  std::optional<float> eta;
  int timestep_shift = 0;
  sampling::RngType rng = sampling::RngType::Cuda;
  std::optional<sampling::RngType> sampler_rng;  // unset: the generation RNG
  int64_t seed = 42;
  int batch_count = 1;  // at most kMaxBatchCount
  // Video models: the clip's frame count (rounded down to what the VAE makes: 4k + 1 for
  // Wan); the result is its frames in order. 0: one image per batch entry.
  int video_frames = 0;
  // Image-to-video models: the clip's last frame (FLF2V, --end-img); its first is init_image.
  const io::Image* end_image = nullptr;
  // VACE models (Wan VACE): the control video's frames from the first (--control-video; the
  // frames after them grey, those past the clip unused), and the strength of its hints
  // (--vace-strength). init_image is then a reference image, not a first frame.
  std::vector<const io::Image*> control_frames;
  float vace_strength = 1.0f;
  // A model with a high-noise expert (Wan 2.2 A14B, --high-noise-diffusion-model): the
  // expert samples the first `steps` steps with its own guidance and sampler, the main
  // network the rest, continuing from its latent. steps < 0: the expert's steps are those
  // whose sigma is at least `moe_boundary` (the sigmas made for `steps` in all); otherwise
  // both counts add up to the schedule's, 0 leaving the expert out (sd.cpp's --high-noise-*
  // flags).
  struct HighNoise {
    int steps = -1;
    float cfg_scale = 7.0f;
    std::optional<sampling::SampleMethod> method;  // unset: the model's default
    std::optional<float> eta;
    float moe_boundary = 0.875f;
  } high_noise;
  // Image-to-image and inpainting: 8-bit images, resized (nearest) to the output size.
  const io::Image* init_image = nullptr;
  const io::Image* mask = nullptr;  // white = repaint
  float strength = 0.75f;
  // Instruct-pix2pix: the image to edit (-r), 8-bit (pipeline/edit_image.h).
  const io::Image* edit_image = nullptr;
  // ControlNet guidance (with a ControlNet loaded): the control image, resized (nearest) to
  // the output size, and the residuals' scale.
  const io::Image* control_image = nullptr;
  float control_strength = 0.9f;
  // FLUX.1 Kontext's reference images (-r): VAE-encoded at about the output's area and
  // joined to the image's tokens (pipeline/reference_images.h). Other families ignore them
  // with a warning; FLUX.1 Fill refuses them.
  std::vector<const io::Image*> ref_images;
  ReferenceImageOptions ref_options;
  std::optional<models::TilingParams> vae_tiling;
  // The highres fix (pipeline/hires_fix.h): a second pass at a larger size.
  HiresOptions hires;
  // Step caching: fewer network evaluations than sampler calls (sampling/step_cache.h).
  sampling::CacheOptions cache;
  // Guidance extras (sampling/guidance_extras.h): a scale per step, and APG.
  std::vector<float> guidance_schedule;
  sampling::ApgOptions apg;
  // Skip-layer guidance (--slg-scale, --skip-layers, --skip-layer-start/-end): SD3's MMDiT;
  // other models ignore it with a warning. Its `predict` is the pipeline's to fill.
  sampling::SkipLayerGuidance skip_layer;
  // LoRAs merged into the weights for this request (and kept while the next request asks
  // for the same set).
  struct Lora {
    std::string path;
    float multiplier = 1.0f;
    bool high_noise = false;  // `<lora:|high_noise|...>`: for the high-noise expert
  };
  std::vector<Lora> loras;
  // Called after every sampling step: (step, steps, seconds since the previous call).
  std::function<void(int, int, double)> progress;
  // Polled before every model call; true stops the generation with an sd::Error.
  std::function<bool()> cancelled;
  // Polled before every batch entry after the first; true ends the batch there and
  // returns the images already sampled.
  std::function<bool()> stop_new_images;
  // Previews while sampling: every `interval` steps the denoised prediction (and/or the
  // noisy latent) is drawn, by latent projection, TAESD or the full VAE.
  struct Preview {
    enum class Mode { None, Proj, Tae, Vae } mode = Mode::None;
    int interval = 1;
    bool denoised = true;
    bool noisy = false;
    // An image's preview is one image; a video's, every frame (proj: one per latent frame).
    std::function<void(int step, const std::vector<io::Image>& frames, bool noisy)> callback;
  } preview;
  // Told when a phase ends and how long it took ("sampling completed, taking 12.3s").
  std::function<void(const std::string&)> info;
  // Told about adjustments made to the request (e.g. a size aligned up to 64 pixels).
  std::function<void(const std::string&)> warn;
};

}  // namespace sd::pipeline
