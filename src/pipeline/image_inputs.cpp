// The sampler's plan for a request and the image side of image-to-image, inpainting, image
// editing and reference images, encoded once for the whole batch.
#include <algorithm>
#include <tuple>

#include "pipeline/edit_image.h"
#include "pipeline/image_tensor.h"
#include "pipeline/inpaint_mask.h"
#include "pipeline/reference_images.h"
#include "pipeline/stable_diffusion_impl.h"
#include "tensor/error.h"

namespace sd::pipeline {

namespace {

// An 8-bit image as RGB planes [width, height, 3] in [0, 1], resized (nearest) to the size.
std::vector<float> rgb_planes_at(const io::Image& img, int width, int height) {
  std::vector<float> planes = image_to_planes(io::to_channels(img, 3));
  if (img.width != width || img.height != height)
    planes = resize_nearest(planes, img.width, img.height, 3, width, height);
  return planes;
}

}  // namespace

// 2. Setup: LoRAs, the prediction, the sampler and its sigmas, and the image side of
// image-to-image and inpainting (encoded once for the whole batch).
StableDiffusion::Impl::Plan StableDiffusion::Impl::setup(const ImageRequest& r) {
  auto warn = [&](const std::string& text) {
    if (r.warn) r.warn(text);
  };
  {
    std::vector<weights::ModelManager::LoraRequest> loras;
    for (const ImageRequest::Lora& l : r.loras)
      loras.push_back({l.path, l.multiplier,
                       l.high_noise ? std::string(io::kHighNoiseUnetRoot) : std::string()});
    bool changed = false;
    for (const std::string& w : weights->set_loras(loras, &changed, io::version_name(version)))
      warn(w);
    if (changed) backends->release_caches();  // packed copies of the old weights
  }
  probe_prediction();

  Plan p;
  p.method = r.method.value_or(family->defaults().sample_method);
  p.scheduler = r.scheduler.value_or(family->default_scheduler(p.method, prediction));
  if (sampling::is_flow(prediction))
    schedule =
        sampling::DiscreteSchedule(prediction, {}, r.flow_shift.value_or(default_flow_shift));
  p.scheduler_options.ays_levels = family->defaults().ays_levels;
  // sd.cpp's sequence length for the resolution-dependent shifts: latent pixels.
  p.scheduler_options.image_seq_len = (r.width / static_cast<int>(vae->config().downscale())) *
                                      (r.height / static_cast<int>(vae->config().downscale()));
  p.sample_steps = r.steps;
  // A high-noise expert's steps given as a count come on top of --steps (sd.cpp).
  const int expert_steps = high_noise ? r.high_noise.steps : 0;
  if (!r.custom_sigmas.empty()) {
    p.sigmas = r.custom_sigmas;
    const int total = static_cast<int>(p.sigmas.size()) - 1;
    p.sample_steps = std::min(p.sample_steps, total);
    if (expert_steps > 0) p.high_noise_steps = total - p.sample_steps;
  } else {
    p.sigmas = sampling::make_sigmas(p.scheduler, r.steps + std::max(0, expert_steps), schedule,
                                     p.scheduler_options);
    if (expert_steps > 0) p.high_noise_steps = expert_steps;
  }
  if (high_noise && expert_steps < 0) {
    // Automatic: the expert takes every step that starts at a sigma at or above the boundary
    // (none when no sigma is below it, as sd.cpp).
    const auto below = std::find_if(p.sigmas.begin(), p.sigmas.end(),
                                    [&](float s) { return s < r.high_noise.moe_boundary; });
    p.high_noise_steps = below == p.sigmas.end() ? 0 : static_cast<int>(below - p.sigmas.begin());
  }
  const ImageInput image_input = family->image_input(version);
  // (Image to video's -i is the clip's first frame, not a start for image-to-image.)
  const bool video_input = r.video_frames > 0 && (image_input == ImageInput::VideoFrames ||
                                                  image_input == ImageInput::PinnedFrames ||
                                                  image_input == ImageInput::ControlVideo);
  if (r.init_image && r.strength < 1.0f && !video_input)
    p.sigmas = sampling::img2img_sigmas(p.sigmas, p.sample_steps, r.strength);
  if (high_noise) {
    // At most every step (after any image-to-image trimming).
    p.high_noise_steps = std::min(p.high_noise_steps, static_cast<int>(p.sigmas.size()) - 1);
    p.high_noise_method = r.high_noise.method.value_or(family->defaults().sample_method);
    if (r.info)
      r.info(format("high-noise expert: %d of %zu steps (%s), then the main network",
                    p.high_noise_steps, p.sigmas.size() - 1,
                    sampling::sample_method_name(p.high_noise_method)));
  }

  const int64_t f = vae->config().downscale();
  p.w = r.width / f;
  p.h = r.height / f;
  p.c = vae->config().latent_channels();
  if (const int stride = family->defaults().video_frame_stride; stride > 0 && r.video_frames > 0)
    p.frames = (r.video_frames - 1) / stride + 1;
  const size_t latent_size = static_cast<size_t>(p.w * p.h * p.c * p.frames);
  const bool inpaint_model = image_input == ImageInput::MaskedImage;

  // The generation RNG, seeded with the request's seed for the image-side draws; each
  // batch entry reseeds its own.
  std::unique_ptr<sampling::Rng> rng = sampling::make_rng(r.rng, static_cast<uint64_t>(r.seed));

  // Tiling is per request and applies to encoding and decoding alike.
  vae->set_tiling(r.vae_tiling);

  p.init_latent.assign(latent_size, 0.0f);
  // Frames a request fixes are its own: none unless this one pins some (pin_frames).
  if (FixedFrameInput* fixed = diffusion->fixed_frames()) fixed->set_fixed_frames({});
  auto encode = [&](const std::vector<float>& planes) {
    return this->encode(planes, r.width, r.height, *rng);
  };
  if (image_input == ImageInput::VideoFrames) {
    p.concat = video_frames_input(r, p);
    p.img_uncond_concat = p.concat;
  } else if (image_input == ImageInput::PinnedFrames && r.video_frames > 0) {
    pin_frames(r, p);
  } else if (image_input == ImageInput::ControlVideo && r.video_frames > 0) {
    vace_input(r, p);
  } else if (r.init_image) {
    const std::vector<float> planes = rgb_planes_at(*r.init_image, r.width, r.height);
    std::vector<float> mask(static_cast<size_t>(r.width) * r.height, 1.0f);
    if (r.mask) {
      const io::Image& mk = *r.mask;
      mask = image_to_planes(io::to_channels(mk, 1));
      if (mk.width != r.width || mk.height != r.height)
        mask = resize_nearest(mask, mk.width, mk.height, 1, r.width, r.height);
      mask = binarize(std::move(mask));
    }
    p.init_latent = encode(planes);
    const std::vector<float> latent_mask = max_downsample(mask, r.width, r.height, f);
    if (inpaint_model) {
      // The diffusion net also sees the mask and the latent of the image with the masked
      // part made grey, so it knows what to keep (in the family's layout).
      const size_t pixels = mask.size();
      std::vector<float> masked = planes;
      for (int k = 0; k < 3; ++k)
        for (size_t i = 0; i < pixels; ++i)
          masked[k * pixels + i] = (1.0f - mask[i]) * (planes[k * pixels + i] - 0.5f) + 0.5f;
      const std::vector<float> masked_latent = encode(masked);
      // The image-unconditional pass (--img-cfg-scale) sees the mask over a zero latent.
      const std::vector<float> zero_latent(masked_latent.size(), 0.0f);
      p.concat = family->masked_image_input(masked_latent, mask, latent_mask, r.width, r.height, f);
      p.img_uncond_concat =
          family->masked_image_input(zero_latent, mask, latent_mask, r.width, r.height, f);
      p.mask.mask = dilate3x3(latent_mask, p.w, p.h);
    } else {
      p.mask.mask = latent_mask;
    }
    p.mask.init_latent = p.init_latent;
  } else if (inpaint_model) {
    warn("an inpainting model works best with an init image (-i) and a mask (--mask)");
    // Nothing to keep: a zero latent and a mask over everything.
    p.concat = family->masked_image_input(
        std::vector<float>(latent_size, 0.0f),
        std::vector<float>(static_cast<size_t>(r.width) * r.height, 1.0f),
        std::vector<float>(static_cast<size_t>(p.w * p.h), 1.0f), r.width, r.height, f);
    p.img_uncond_concat = p.concat;  // its image part is zero already
  } else if (image_input == ImageInput::EditImage) {
    // The image to edit, encoded near its own aspect (edit_image.h), resized (nearest) to
    // the output latent; the image-unconditional pass gets zeros.
    const io::Image& img = *r.edit_image;
    const PixelSize size = edit_image_encode_size(img.width, img.height, r.width, r.height);
    const std::vector<float> latent =
        encode_mean(rgb_planes_at(img, size.width, size.height), size.width, size.height);
    p.concat = resize_nearest(latent, size.width / f, size.height / f, p.c, p.w, p.h);
    p.img_uncond_concat.assign(p.concat.size(), 0.0f);
    vae->release();
    phase_done(Module::Vae);
  }
  // sd.cpp compatibility: references are encoded after the init image, from the same RNG.
  if (!r.ref_images.empty() && r.ref_options.pass_to_dit) p.refs = encode_references(r, *rng);
  if ((r.init_image && !video_input) || !p.refs.empty()) {
    // Encoding is a phase of its own: the VAE is not needed again until decoding.
    vae->release();
    phase_done(Module::Vae);
  }
  p.img_cfg_scale = r.img_cfg_scale.value_or(1.0f);
  return p;
}

std::vector<float> StableDiffusion::Impl::video_frames_input(const ImageRequest& r, const Plan& p) {
  auto frame_of = [&](const io::Image& img) { return rgb_planes_at(img, r.width, r.height); };
  const std::vector<float> first = r.init_image ? frame_of(*r.init_image) : std::vector<float>{};
  const std::vector<float> last = r.end_image ? frame_of(*r.end_image) : std::vector<float>{};

  // The image tokens first (a phase of the image encoder's own).
  PhaseTimer timer(r.info, *weights);
  if (ImageTokenInput* tokens = diffusion->image_tokens()) {
    SD_CHECK(image_encoder, "%s attends to CLIP vision tokens: pass --clip_vision FILE",
             io::version_name(version));
    std::vector<float> t = image_encoder->encode(first, r.width, r.height);
    if (tokens->reads_last_frame_tokens()) {
      // FLF2V: the last frame's tokens follow (zeros without --end-img, as the reference).
      const std::vector<float> end = r.end_image ? image_encoder->encode(last, r.width, r.height)
                                                 : std::vector<float>(t.size(), 0.0f);
      t.insert(t.end(), end.begin(), end.end());
    }
    tokens->set_image_tokens(std::move(t));
    image_encoder->release();
    phase_done(Module::ClipVision);
    timer.done("CLIP vision");
  }

  // The clip: the given frames, grey (0 in the VAE's [-1, 1]) between.
  const size_t frame_size = static_cast<size_t>(r.width) * r.height * 3;
  std::vector<std::vector<float>> clip(static_cast<size_t>(r.video_frames),
                                       std::vector<float>(frame_size, 0.5f));
  if (!first.empty()) clip.front() = first;
  if (!last.empty()) clip.back() = last;
  const std::vector<float> latent = vae->encode_video(clip, r.width, r.height);
  clip.clear();
  vae->release();
  phase_done(Module::Vae);
  timer.done(format("encoding %d frames", r.video_frames));
  return family->video_frames_input(latent, p.w * p.h, p.frames, !first.empty(), !last.empty());
}

void StableDiffusion::Impl::pin_frames(const ImageRequest& r, Plan& p) {
  FixedFrameInput* fixed = diffusion->fixed_frames();
  SD_CHECK(fixed, "[wan] this transformer cannot take fixed frames");
  std::vector<bool> flags;
  if (r.init_image || r.end_image) {
    PhaseTimer timer(r.info, *weights);
    const int64_t plane = p.w * p.h;
    flags.assign(static_cast<size_t>(p.frames), false);
    std::vector<float> mask(static_cast<size_t>(plane * p.frames), 1.0f);
    // Each given frame encoded alone (a one-frame clip) into its latent frame.
    auto pin = [&](const io::Image& image, int64_t t) {
      const std::vector<float> latent =
          vae->encode_video({rgb_planes_at(image, r.width, r.height)}, r.width, r.height);
      for (int64_t ch = 0; ch < p.c; ++ch)
        std::copy_n(latent.begin() + ch * plane, plane,
                    p.init_latent.begin() + (ch * p.frames + t) * plane);
      std::fill_n(mask.begin() + t * plane, plane, 0.0f);
      flags[static_cast<size_t>(t)] = true;
    };
    if (r.init_image) pin(*r.init_image, 0);
    if (r.end_image) pin(*r.end_image, p.frames - 1);
    vae->release();
    phase_done(Module::Vae);
    timer.done(r.end_image && r.init_image ? "encoding the first and last frames"
                                           : "encoding the fixed frame");
    p.mask.mask = std::move(mask);
    p.mask.init_latent = p.init_latent;
    p.mask.pin_input = true;
  }
  fixed->set_fixed_frames(std::move(flags));
}

void StableDiffusion::Impl::vace_input(const ImageRequest& r, Plan& p) {
  VaceInput* vace = diffusion->vace();
  SD_CHECK(vace, "[wan] this transformer has no VACE blocks to read a control video");
  PhaseTimer timer(r.info, *weights);
  // VACE's mask covers every pixel: what to keep is the video with the masked part grey
  // (all grey), what to make is the control video itself (grey after its last frame).
  const size_t frame_size = static_cast<size_t>(r.width) * r.height * 3;
  std::vector<std::vector<float>> clip(static_cast<size_t>(r.video_frames),
                                       std::vector<float>(frame_size, 0.5f));
  const std::vector<float> keep = vae->encode_video(clip, r.width, r.height);
  const size_t given = std::min(clip.size(), r.control_frames.size());
  for (size_t i = 0; i < given; ++i)
    clip[i] = rgb_planes_at(*r.control_frames[i], r.width, r.height);
  const std::vector<float> make = vae->encode_video(clip, r.width, r.height);
  clip.clear();
  // A reference image is a latent frame of its own before the clip's.
  const std::vector<float> reference =
      r.init_image
          ? vae->encode_video({rgb_planes_at(*r.init_image, r.width, r.height)}, r.width, r.height)
          : std::vector<float>{};
  vae->release();
  phase_done(Module::Vae);
  timer.done(format("encoding the control video (%zu of %d frames given%s)", given, r.video_frames,
                    reference.empty() ? "" : ", a reference image"));

  // The context [w, h, frames, channels]: the two latents, then the mask of each latent
  // pixel's f x f pixels (ones over the clip, zeros over the reference).
  const int64_t plane = p.w * p.h, lead = reference.empty() ? 0 : 1, frames = p.frames + lead;
  const int64_t channels = vace->vace_channels();
  std::vector<float> context(static_cast<size_t>(plane * frames * channels), 0.0f);
  auto frame_at = [&](int64_t channel, int64_t t) {
    return context.begin() + (channel * frames + t) * plane;
  };
  const int64_t span = plane * p.frames;  // a channel's frames, contiguous on both sides
  for (int64_t ch = 0; ch < p.c; ++ch) {
    std::copy_n(keep.begin() + ch * span, span, frame_at(ch, lead));
    std::copy_n(make.begin() + ch * span, span, frame_at(p.c + ch, lead));
    if (lead) std::copy_n(reference.begin() + ch * plane, plane, frame_at(ch, 0));
  }
  for (int64_t ch = 2 * p.c; ch < channels; ++ch) std::fill_n(frame_at(ch, lead), span, 1.0f);
  if (high_noise && high_noise->vace())
    high_noise->vace()->set_vace_context(context, r.vace_strength);
  vace->set_vace_context(std::move(context), r.vace_strength);
  p.frames = frames;
  p.leading_frames = lead;
  p.init_latent.assign(static_cast<size_t>(plane * p.c * frames), 0.0f);
}

std::vector<float> StableDiffusion::Impl::Plan::clip_latent(
    const std::vector<float>& latent) const {
  if (leading_frames == 0) return latent;
  const int64_t plane = w * h, clip = clip_frames();
  std::vector<float> out(static_cast<size_t>(plane * clip * c));
  for (int64_t ch = 0; ch < c; ++ch)
    std::copy_n(latent.begin() + (ch * frames + leading_frames) * plane, plane * clip,
                out.begin() + ch * clip * plane);
  return out;
}

std::vector<ReferenceLatent> StableDiffusion::Impl::encode_references(const ImageRequest& r,
                                                                      sampling::Rng& rng) {
  const int f = static_cast<int>(vae->config().downscale());
  const int multiple = reference_unit();
  std::vector<ReferenceLatent> refs;
  for (const io::Image* image : r.ref_images) {
    std::vector<float> planes = image_to_planes(io::to_channels(*image, 3));
    int w = image->width, h = image->height;
    if (r.ref_options.resize_before_vae) {
      std::tie(w, h) = reference_vae_size(image->width, image->height, r.width, r.height,
                                          r.ref_options.vae_input_max_pixels, multiple);
      if (w != image->width || h != image->height)
        planes = resize_nearest(planes, image->width, image->height, 3, w, h);
    }
    if (r.info)
      r.info(format("reference image %zu: %dx%d, encoded at %dx%d", refs.size() + 1, image->width,
                    image->height, w, h));
    refs.push_back({encode(planes, w, h, rng), w / f, h / f});
  }
  return refs;
}

std::vector<float> StableDiffusion::Impl::encode(const std::vector<float>& planes, int width,
                                                 int height, sampling::Rng& rng) {
  std::vector<float> encoded = vae->encode(planes, width, height);
  if (!vae->encodes_moments()) return encoded;
  const int64_t f = vae->config().downscale();
  const int64_t w = width / f, h = height / f, c = vae->config().latent_channels();
  const std::vector<float> noise = rng.randn(static_cast<size_t>(w * h * c));  // the posterior
  return models::vae_moments_to_latent(encoded, noise, w, h, c, 1, vae->config());
}

std::vector<float> StableDiffusion::Impl::encode_mean(const std::vector<float>& planes, int width,
                                                      int height) {
  std::vector<float> encoded = vae->encode(planes, width, height);
  if (!vae->encodes_moments()) return encoded;
  const int64_t f = vae->config().downscale();
  // [w, h, 2c]: the mean's c planes, then the log-variance's.
  encoded.resize(static_cast<size_t>(width / f * (height / f) * vae->config().latent_channels()));
  return encoded;
}

}  // namespace sd::pipeline
