// Every check of a request before any work: sizes aligned to what the networks take, flags
// the model ignores warned about and dropped, flags it cannot honour refused.
#include <cmath>

#include "pipeline/stable_diffusion_impl.h"
#include "sampling/step_cache.h"
#include "tensor/error.h"

namespace sd::pipeline {

// A video request: a video model, its frame count rounded down to what the VAE makes, one
// clip, no image-side inputs this build's video models do not read.
void StableDiffusion::Impl::check_video(ImageRequest& r) const {
  const int stride = family->defaults().video_frame_stride;
  const ImageInput input = family->image_input(version);
  const bool from_frames = input == ImageInput::VideoFrames;
  const bool pins_frames = input == ImageInput::PinnedFrames;
  const bool vace = input == ImageInput::ControlVideo;
  SD_CHECK(r.control_frames.empty() || vace,
           "--control-video guides a Wan VACE model; this %s model does not read a control video",
           io::version_name(version));
  if (r.video_frames == 0) {
    SD_CHECK(!vace, "%s makes video from a control video: use -M vid_gen (--control-video DIR)",
             io::version_name(version));
    SD_CHECK(!from_frames,
             "%s makes video from a first frame: use -M vid_gen with -i IMAGE (--video-frames N)",
             io::version_name(version));
    SD_CHECK(!r.end_image, "--end-img is the last frame of a video: use -M vid_gen");
    return;
  }
  SD_CHECK(stride > 0,
           "%s is an image model: -M vid_gen (--video-frames) needs a video model (Wan); use "
           "-M img_gen",
           io::version_name(version));
  SD_CHECK(r.video_frames >= 1 && r.video_frames <= kMaxVideoFrames,
           "--video-frames %d is outside [1, %d]", r.video_frames, kMaxVideoFrames);
  const int aligned = (r.video_frames - 1) / stride * stride + 1;
  if (aligned != r.video_frames) {
    if (r.warn)
      r.warn(format("--video-frames %d: %s makes 1 + %d k frames; generating %d", r.video_frames,
                    io::version_name(version), stride, aligned));
    r.video_frames = aligned;
  }
  SD_CHECK(r.batch_count == 1, "a video request makes one clip: drop -b %d (batch count)",
           r.batch_count);
  auto check_pixels = [](const io::Image* img, const std::string& what) {
    SD_CHECK(!img || (img->width > 0 && img->height > 0 && img->channels > 0 &&
                      img->pixels.size() ==
                          static_cast<size_t>(img->width) * img->height * img->channels),
             "the %s image is empty or its pixels do not match its size", what.c_str());
  };
  if (vace) {
    SD_CHECK(!r.end_image && !r.mask && !r.edit_image && !r.control_image,
             "%s takes a control video (--control-video DIR) and a reference image (-i); "
             "--end-img, --mask, -r and --control-image are not used by VACE",
             io::version_name(version));
    SD_CHECK(std::isfinite(r.vace_strength), "--vace-strength must be a finite number");
    check_pixels(r.init_image, "reference (-i)");
    for (size_t i = 0; i < r.control_frames.size(); ++i)
      check_pixels(r.control_frames[i], format("control video's frame %zu", i + 1));
    if (r.control_frames.size() > static_cast<size_t>(r.video_frames) && r.warn)
      r.warn(format("the control video has %zu frames, the clip %d: the rest are not used",
                    r.control_frames.size(), r.video_frames));
  } else if (from_frames || pins_frames) {
    SD_CHECK(r.init_image || pins_frames,
             "%s makes video from a first frame: pass -i IMAGE (and --end-img IMAGE for the "
             "last, with an FLF2V model)",
             io::version_name(version));
    SD_CHECK(!r.mask && !r.edit_image && !r.control_image,
             "%s takes its first frame with -i and its last with --end-img; --mask, -r and "
             "--control-image are not used by image-to-video",
             io::version_name(version));
    check_pixels(r.init_image, "first-frame (-i)");
    check_pixels(r.end_image, "last-frame (--end-img)");
    if (r.end_image && diffusion->image_tokens() &&
        !diffusion->image_tokens()->reads_last_frame_tokens() && r.warn)
      r.warn(
          "this I2V model was trained on first frames; --end-img pins the last frame too, "
          "but an FLF2V model follows it better");
  } else {
    SD_CHECK(!r.init_image && !r.end_image && !r.mask && !r.edit_image && !r.control_image,
             "this %s model makes video from text only: -i, --end-img, --mask, --control-image "
             "and -r need an image-to-video model (Wan I2V / FLF2V, Wan 2.2 TI2V-5B, Wan VACE)",
             io::version_name(version));
  }
  SD_CHECK(!r.hires.enabled, "--hires works on images, not video clips");
}

// The high-noise expert's flags, where the model has one; its LoRAs need one.
void StableDiffusion::Impl::check_high_noise(const ImageRequest& r) const {
  for (const ImageRequest::Lora& l : r.loras)
    SD_CHECK(!l.high_noise || high_noise,
             "LoRA '%s' is for a high-noise expert (|high_noise|), which this %s model does not "
             "have (Wan 2.2 A14B's: --high-noise-diffusion-model)",
             l.path.c_str(), io::version_name(version));
  if (!high_noise) return;
  const ImageRequest::HighNoise& h = r.high_noise;
  SD_CHECK(std::isfinite(h.moe_boundary) && h.moe_boundary >= 0.0f && h.moe_boundary <= 1.0f,
           "--moe-boundary must be in [0, 1] (got %g)", h.moe_boundary);
  SD_CHECK(std::isfinite(h.cfg_scale), "--high-noise-cfg-scale must be a finite number");
  SD_CHECK(!h.eta || std::isfinite(*h.eta), "--high-noise-eta must be a finite number");
  SD_CHECK(h.steps <= 10000, "--high-noise-steps %d is more than 10000", h.steps);
}

// 1. Validation: every check before any work; sizes aligned to what the networks take.
ImageRequest StableDiffusion::Impl::validate(const ImageRequest& request) const {
  ImageRequest r = request;
  auto warn = [&](const std::string& text) {
    if (r.warn) r.warn(text);
  };
  SD_CHECK(r.width > 0 && r.height > 0 && r.width % 8 == 0 && r.height % 8 == 0,
           "image size %dx%d: width and height must be positive multiples of 8 (-W, -H)", r.width,
           r.height);
  SD_CHECK(r.steps > 0 || !r.custom_sigmas.empty(), "--steps must be at least 1 (got %d)", r.steps);
  if (const int layers = text->max_clip_skip(); layers > 0)
    SD_CHECK(r.clip_skip <= layers,
             "--clip-skip %d is more than the text encoder's %d layers (use 1..%d, or -1 for "
             "the model's default)",
             r.clip_skip, layers, layers);
  SD_CHECK(r.batch_count >= 1 && r.batch_count <= kMaxBatchCount,
           "batch count %d is outside [1, %d]: every image of a batch is kept until the batch "
           "ends; generate more in several runs",
           r.batch_count, kMaxBatchCount);
  SD_CHECK(r.strength >= 0.0f && r.strength <= 1.0f, "--strength %g is outside [0, 1]", r.strength);
  SD_CHECK(std::isfinite(r.cfg_scale) && r.cfg_scale >= 0.0f,
           "--cfg-scale must be a finite number >= 0 (got %g)", r.cfg_scale);
  SD_CHECK(r.custom_sigmas.empty() || r.custom_sigmas.size() >= 2,
           "--sigmas needs at least two values (a start and the final 0)");
  for (size_t i = 0; i < r.custom_sigmas.size(); ++i) {
    const float s = r.custom_sigmas[i];
    SD_CHECK(std::isfinite(s) && s >= 0.0f, "--sigmas: %g is not a sigma (finite, >= 0)", s);
    SD_CHECK(i == 0 || s <= r.custom_sigmas[i - 1],
             "--sigmas must not increase (%g follows %g): noise goes down as sampling goes on", s,
             r.custom_sigmas[i - 1]);
  }
  const sampling::SkipLayerGuidance& slg = r.skip_layer;
  SD_CHECK(std::isfinite(slg.scale) && std::isfinite(slg.start) && std::isfinite(slg.end) &&
               slg.start >= 0.0f && slg.end <= 1.0f && slg.start <= slg.end,
           "--skip-layer-start %g / --skip-layer-end %g / --slg-scale %g: the start and end are "
           "fractions of the steps with 0 <= start <= end <= 1, the scale a finite number",
           slg.start, slg.end, slg.scale);
  for (int layer : slg.layers)
    SD_CHECK(layer >= 0, "--skip-layers: %d is not a layer index", layer);
  SD_CHECK(!r.eta || std::isfinite(*r.eta), "--eta must be a finite number (got %g)",
           r.eta ? *r.eta : 0.0f);
  SD_CHECK(r.timestep_shift >= 0 && r.timestep_shift <= 1000,
           "--timestep-shift must be in [0, 1000] (got %d)", r.timestep_shift);
  if (r.timestep_shift > 0 && !family->defaults().timestep_shift) {
    warn("--timestep-shift applies to SDXL models only; ignored");
    r.timestep_shift = 0;
  }
  const int unit = size_unit();
  const int aligned_w = (r.width + unit - 1) / unit * unit;
  const int aligned_h = (r.height + unit - 1) / unit * unit;
  if (aligned_w != r.width || aligned_h != r.height) {
    warn(format("image size %dx%d aligned up to %dx%d (a multiple of %d)", r.width, r.height,
                aligned_w, aligned_h, unit));
    r.width = aligned_w;
    r.height = aligned_h;
  }
  if (r.mask && !r.init_image) warn("--mask without an init image (-i) is ignored");
  const ImageInput image_input = family->image_input(version);
  if (image_input == ImageInput::EditImage && !r.edit_image && !r.ref_images.empty()) {
    // Instruct-pix2pix edits the first reference image, as sd.cpp.
    if (r.ref_images.size() > 1)
      warn(
          format("instruct-pix2pix edits one image: only the first of %zu reference images "
                 "(-r) is used",
                 r.ref_images.size()));
    r.edit_image = r.ref_images.front();
    r.ref_images.clear();
  }
  family->check_request(version, r);
  if (!r.ref_images.empty()) check_references(r);
  if (const char* flag = family->defaults().prompt_vision_flag;
      flag && !r.ref_images.empty() && r.ref_options.pass_to_vlm && !text->prompt_images())
    warn(
        format("no vision tower (%s): the reference images (-r) reach the diffusion model but "
               "not the text encoder, which an edit model needs to edit well",
               flag));
  if (image_input == ImageInput::EditImage) {
    SD_CHECK(r.edit_image, "%s edits an image: pass it with -r/--ref-image",
             io::version_name(version));
    SD_CHECK(!r.init_image,
             "%s takes the image to edit with -r/--ref-image, not -i (it starts from noise)",
             io::version_name(version));
    const io::Image& e = *r.edit_image;
    SD_CHECK(e.width > 0 && e.height > 0 && e.channels > 0 &&
                 e.pixels.size() == static_cast<size_t>(e.width) * e.height * e.channels,
             "the reference image (-r) is empty or its pixels do not match its size");
  } else if (r.edit_image) {
    warn("a reference image (-r) is used by instruct-pix2pix models only; ignored");
    r.edit_image = nullptr;
  }
  if (r.img_cfg_scale) {
    SD_CHECK(std::isfinite(*r.img_cfg_scale) && *r.img_cfg_scale >= 0.0f,
             "--img-cfg-scale must be a finite number >= 0 (got %g)", *r.img_cfg_scale);
    // sd.cpp: image guidance needs an image input: the concatenated one of inpainting and
    // pix2pix models, or FLUX.1 Kontext's reference images (left by check_references only
    // on a network that takes them).
    if (image_input == ImageInput::None && r.ref_images.empty()) {
      if (*r.img_cfg_scale != 1.0f)
        warn(
            format("--img-cfg-scale needs an image input (an instruct-pix2pix or inpainting "
                   "model, or reference images -r with FLUX.1 Kontext); %s has none here: "
                   "ignored",
                   io::version_name(version)));
      r.img_cfg_scale.reset();
    }
  }
  if (r.control_image && !control_net)
    warn("a control image without a ControlNet (--control-net) is ignored");
  if (control_net && !r.control_image)
    warn("--control-net without a control image (--control-image): the ControlNet is not used");
  if (control_net && r.control_image) {
    SD_CHECK(std::isfinite(r.control_strength), "--control-strength must be a finite number");
    SD_CHECK(r.control_image->width > 0 && r.control_image->height > 0 &&
                 r.control_image->channels > 0 &&
                 r.control_image->pixels.size() == static_cast<size_t>(r.control_image->width) *
                                                       r.control_image->height *
                                                       r.control_image->channels,
             "the control image is empty or its pixels do not match its size");
  }
  sampling::check_cache_options(r.cache);
  {
    const bool unet = diffusion->is_unet();
    SD_CHECK(sampling::cache_mode_fits(r.cache.mode, unet),
             "--cache-mode %s does not work on %s (a %s); use one of: %s",
             sampling::cache_mode_name(r.cache.mode), io::version_name(version),
             unet ? "UNet" : "transformer", sampling::cache_modes_for(unet).c_str());
  }
  SD_CHECK(r.preview.mode != ImageRequest::Preview::Mode::Tae || vae->has_taesd(),
           "--preview tae needs a TAESD model: pass --taesd FILE");
  check_video(r);
  check_high_noise(r);
  // The diffusion net's image input is made at the first pass's size.
  SD_CHECK(!r.hires.enabled || image_input == ImageInput::None,
           "--hires does not work with inpainting and instruct-pix2pix models; generate, then "
           "run img2img on the upscaled image");
  return r;
}

void StableDiffusion::check(const ImageRequest& request) const {
  ImageRequest quiet = request;
  quiet.warn = nullptr;
  impl_->validate(quiet);
}

void StableDiffusion::Impl::check_references(ImageRequest& r) const {
  if (!diffusion->references()) {
    if (r.warn)
      r.warn(
          format("reference images (-r) are for FLUX.1 Kontext, FLUX.2 and Qwen-Image-Edit "
                 "models; %s does not take them: ignored",
                 io::version_name(version)));
    r.ref_images.clear();
    return;
  }
  if (!r.ref_options.pass_to_dit && !(r.ref_options.pass_to_vlm && text->prompt_images())) {
    r.ref_images.clear();
    return;
  }
  const int unit = reference_unit();
  for (size_t i = 0; i < r.ref_images.size(); ++i) {
    const io::Image* image = r.ref_images[i];
    SD_CHECK(image && image->width > 0 && image->height > 0 && image->channels > 0 &&
                 image->pixels.size() ==
                     static_cast<size_t>(image->width) * image->height * image->channels,
             "reference image %zu is empty or its pixels do not match its size", i + 1);
    if (r.ref_options.resize_before_vae) {
      reference_vae_size(image->width, image->height, r.width, r.height,
                         r.ref_options.vae_input_max_pixels, unit);
    } else {
      SD_CHECK(image->width % unit == 0 && image->height % unit == 0,
               "reference image %zu is %dx%d; unresized (resize_before_vae=0, "
               "--disable-auto-resize-ref-image) its sides must be multiples of %d",
               i + 1, image->width, image->height, unit);
    }
  }
}

}  // namespace sd::pipeline
