// Defaults (*_init) and debug descriptions (*_to_str) of the C API's parameter structs.
// The defaults are sd.cpp's, value for value, so a binding that only overrides a few
// fields gets the same generation here as there.
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "stable-diffusion.h"

namespace {

const char* safe(const char* s) {
  return s ? s : "";
}
const char* boolean(bool b) {
  return b ? "true" : "false";
}

std::string printf_string(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string printf_string(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list measure;
  va_copy(measure, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, measure);
  va_end(measure);
  std::string out(n > 0 ? static_cast<size_t>(n) + 1 : 1, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size(), fmt, args);
  va_end(args);
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return out;
}

// The *_to_str functions hand out malloc'd strings the caller frees with free().
char* to_c_string(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out) std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

const char* vae_format_name(sd_vae_format_t format) {
  switch (format) {
    case SD_VAE_FORMAT_AUTO:
      return "auto";
    case SD_VAE_FORMAT_FLUX:
      return "flux";
    case SD_VAE_FORMAT_SD3:
      return "sd3";
    case SD_VAE_FORMAT_FLUX2:
      return "flux2";
    case SD_VAE_FORMAT_WAN:
      return "wan";
    default:
      return "NONE";
  }
}

// The step-cache threshold in effect: each cache mode has its own default.
float effective_reuse_threshold(const sd_cache_params_t& cache) {
  float threshold = cache.reuse_threshold;
  if (std::isinf(threshold) && threshold > 0) {
    if (cache.mode == SD_CACHE_EASYCACHE) threshold = 0.2f;
    if (cache.mode == SD_CACHE_UCACHE) threshold = 1.0f;
  }
  return threshold > 0.f ? threshold : 0.f;
}

std::string sample_params_string(const sd_sample_params_t& p) {
  const float img_cfg = std::isfinite(p.guidance.img_cfg) ? p.guidance.img_cfg : p.guidance.txt_cfg;
  return printf_string(
      "(txt_cfg: %.2f, img_cfg: %.2f, distilled_guidance: %.2f, slg.layer_count: %zu, "
      "slg.layer_start: %.2f, slg.layer_end: %.2f, slg.scale: %.2f, scheduler: %s, "
      "sample_method: %s, sample_steps: %d, eta: %.2f, shifted_timestep: %d, "
      "flow_shift: %.2f, extra_sample_args: %s)",
      p.guidance.txt_cfg, img_cfg, p.guidance.distilled_guidance, p.guidance.slg.layer_count,
      p.guidance.slg.layer_start, p.guidance.slg.layer_end, p.guidance.slg.scale,
      sd_scheduler_name(p.scheduler), sd_sample_method_name(p.sample_method), p.sample_steps, p.eta,
      p.shifted_timestep, p.flow_shift, safe(p.extra_sample_args));
}

}  // namespace

extern "C" {

void sd_cache_params_init(sd_cache_params_t* p) {
  if (!p) return;
  *p = {};
  p->mode = SD_CACHE_DISABLED;
  p->reuse_threshold = INFINITY;  // per-mode default, see effective_reuse_threshold
  p->start_percent = 0.15f;
  p->end_percent = 0.95f;
  p->error_decay_rate = 1.0f;
  p->use_relative_threshold = true;
  p->reset_error_on_compute = true;
  p->Fn_compute_blocks = 8;
  p->Bn_compute_blocks = 0;
  p->residual_diff_threshold = 0.08f;
  p->max_warmup_steps = 8;
  p->max_cached_steps = -1;
  p->max_continuous_cached_steps = -1;
  p->taylorseer_n_derivatives = 1;
  p->taylorseer_skip_interval = 1;
  p->scm_mask = nullptr;
  p->scm_policy_dynamic = true;
  p->spectrum_w = 0.40f;
  p->spectrum_m = 3;
  p->spectrum_lam = 1.0f;
  p->spectrum_window_size = 2;
  p->spectrum_flex_window = 0.50f;
  p->spectrum_warmup_steps = 4;
  p->spectrum_stop_percent = 0.9f;
}

void sd_hires_params_init(sd_hires_params_t* p) {
  if (!p) return;
  *p = {};
  p->enabled = false;
  p->upscaler = SD_HIRES_UPSCALER_LATENT;
  p->model_path = nullptr;
  p->scale = 2.0f;
  p->target_width = 0;
  p->target_height = 0;
  p->steps = 0;
  p->denoising_strength = 0.7f;
  p->upscale_tile_size = 128;
  p->custom_sigmas = nullptr;
  p->custom_sigmas_count = 0;
}

void sd_ctx_params_init(sd_ctx_params_t* p) {
  if (!p) return;
  *p = {};  // paths NULL, every switch off but mmap
  // Weights used as stored alias the mapped file instead of a copy: the model is not held
  // twice (page cache and heap). Files on filesystems that refuse mmap are read instead.
  p->enable_mmap = true;
  p->n_threads = sd_get_num_physical_cores();
  p->wtype = SD_TYPE_COUNT;
  p->rng_type = CUDA_RNG;
  p->sampler_rng_type = RNG_TYPE_COUNT;
  p->prediction = PREDICTION_COUNT;
  p->lora_apply_mode = LORA_APPLY_AUTO;
  p->vae_format = SD_VAE_FORMAT_AUTO;
}

char* sd_ctx_params_to_str(const sd_ctx_params_t* p) {
  if (!p) return nullptr;
  return to_c_string(printf_string(
      "model_path: %s\n"
      "clip_l_path: %s\n"
      "clip_g_path: %s\n"
      "clip_vision_path: %s\n"
      "t5xxl_path: %s\n"
      "llm_path: %s\n"
      "llm_vision_path: %s\n"
      "diffusion_model_path: %s\n"
      "high_noise_diffusion_model_path: %s\n"
      "uncond_diffusion_model_path: %s\n"
      "embeddings_connectors_path: %s\n"
      "vae_path: %s\n"
      "audio_vae_path: %s\n"
      "taesd_path: %s\n"
      "control_net_path: %s\n"
      "photo_maker_path: %s\n"
      "pulid_weights_path: %s\n"
      "tensor_type_rules: %s\n"
      "n_threads: %d\n"
      "wtype: %s\n"
      "rng_type: %s\n"
      "sampler_rng_type: %s\n"
      "prediction: %s\n"
      "max_vram: %s\n"
      "stream_layers: %s\n"
      "eager_load: %s\n"
      "backend: %s\n"
      "params_backend: %s\n"
      "split_mode: %s\n"
      "model_args: %s\n"
      "auto_fit: %s\n"
      "quantize_convs: %s\n"
      "flash_attn: %s\n"
      "diffusion_flash_attn: %s\n"
      "vae_format: %s\n",
      safe(p->model_path), safe(p->clip_l_path), safe(p->clip_g_path), safe(p->clip_vision_path),
      safe(p->t5xxl_path), safe(p->llm_path), safe(p->llm_vision_path),
      safe(p->diffusion_model_path), safe(p->high_noise_diffusion_model_path),
      safe(p->uncond_diffusion_model_path), safe(p->embeddings_connectors_path), safe(p->vae_path),
      safe(p->audio_vae_path), safe(p->taesd_path), safe(p->control_net_path),
      safe(p->photo_maker_path), safe(p->pulid_weights_path), safe(p->tensor_type_rules),
      p->n_threads, sd_type_name(p->wtype), sd_rng_type_name(p->rng_type),
      sd_rng_type_name(p->sampler_rng_type), sd_prediction_name(p->prediction), safe(p->max_vram),
      boolean(p->stream_layers), boolean(p->eager_load), safe(p->backend), safe(p->params_backend),
      safe(p->split_mode), safe(p->model_args), boolean(p->auto_fit), boolean(p->quantize_convs),
      boolean(p->flash_attn), boolean(p->diffusion_flash_attn), vae_format_name(p->vae_format)));
}

void sd_sample_params_init(sd_sample_params_t* p) {
  if (!p) return;
  *p = {};
  p->guidance.txt_cfg = 7.0f;
  p->guidance.img_cfg = INFINITY;  // follow txt_cfg
  p->guidance.distilled_guidance = 3.5f;
  p->guidance.slg.layer_count = 0;
  p->guidance.slg.layer_start = 0.01f;
  p->guidance.slg.layer_end = 0.2f;
  p->guidance.slg.scale = 0.f;
  p->scheduler = SCHEDULER_COUNT;          // the model's default
  p->sample_method = SAMPLE_METHOD_COUNT;  // the model's default
  p->sample_steps = 20;
  p->eta = INFINITY;  // the sampler's default
  p->custom_sigmas = nullptr;
  p->custom_sigmas_count = 0;
  p->flow_shift = INFINITY;  // the model's default
  p->extra_sample_args = nullptr;
}

char* sd_sample_params_to_str(const sd_sample_params_t* p) {
  if (!p) return nullptr;
  return to_c_string(sample_params_string(*p));
}

void sd_img_gen_params_init(sd_img_gen_params_t* p) {
  if (!p) return;
  *p = {};
  sd_sample_params_init(&p->sample_params);
  p->clip_skip = -1;
  p->ref_images_count = 0;
  p->ref_image_args = "";
  p->width = 512;
  p->height = 512;
  p->strength = 0.75f;
  p->seed = -1;
  p->batch_count = 1;
  p->control_strength = 0.9f;
  p->ip_adapter_strength = 1.0f;
  p->qwen_image_layers = 3;
  p->circular_x = false;
  p->circular_y = false;
  p->pm_params = {nullptr, 0, nullptr, 20.f};
  p->pulid_params = {nullptr, 1.0f};
  p->vae_tiling_params = {false, false, 0, 0, 0.5f, 0.0f, 0.0f, nullptr};
  sd_cache_params_init(&p->cache);
  sd_hires_params_init(&p->hires);
}

char* sd_img_gen_params_to_str(const sd_img_gen_params_t* p) {
  if (!p) return nullptr;
  std::string s = printf_string(
      "prompt: %s\n"
      "negative_prompt: %s\n"
      "clip_skip: %d\n"
      "width: %d\n"
      "height: %d\n"
      "sample_params: %s\n"
      "strength: %.2f\n"
      "seed: %" PRId64
      "\n"
      "batch_count: %d\n"
      "qwen_image_layers: %d\n"
      "ref_images_count: %d\n"
      "ref_image_args: %s\n"
      "control_strength: %.2f\n"
      "photo maker: {style_strength = %.2f, id_images_count = %d, id_embed_path = %s}\n"
      "VAE tiling: %s (temporal=%s, extra_tiling_args=%s)\n"
      "circular_x: %s\n"
      "circular_y: %s\n"
      "hires: {enabled=%s, upscaler=%s, model_path=%s, scale=%.2f, target=%dx%d, steps=%d, "
      "denoising_strength=%.2f}\n",
      safe(p->prompt), safe(p->negative_prompt), p->clip_skip, p->width, p->height,
      sample_params_string(p->sample_params).c_str(), p->strength, p->seed, p->batch_count,
      p->qwen_image_layers, p->ref_images_count, safe(p->ref_image_args), p->control_strength,
      p->pm_params.style_strength, p->pm_params.id_images_count, safe(p->pm_params.id_embed_path),
      boolean(p->vae_tiling_params.enabled), boolean(p->vae_tiling_params.temporal_tiling),
      safe(p->vae_tiling_params.extra_tiling_args), boolean(p->circular_x), boolean(p->circular_y),
      boolean(p->hires.enabled), sd_hires_upscaler_name(p->hires.upscaler),
      safe(p->hires.model_path), p->hires.scale, p->hires.target_width, p->hires.target_height,
      p->hires.steps, p->hires.denoising_strength);
  const char* cache_mode = p->cache.mode == SD_CACHE_EASYCACHE ? "easycache"
                           : p->cache.mode == SD_CACHE_UCACHE  ? "ucache"
                                                               : "disabled";
  s += printf_string("cache: %s (threshold=%.3f, start=%.2f, end=%.2f)\n", cache_mode,
                     effective_reuse_threshold(p->cache), p->cache.start_percent,
                     p->cache.end_percent);
  return to_c_string(s);
}

void sd_vid_gen_params_init(sd_vid_gen_params_t* p) {
  if (!p) return;
  *p = {};
  sd_sample_params_init(&p->sample_params);
  sd_sample_params_init(&p->high_noise_sample_params);
  p->high_noise_sample_params.sample_steps = -1;  // follow sample_params
  p->width = 512;
  p->height = 512;
  p->strength = 0.75f;
  p->seed = -1;
  p->video_frames = 6;
  p->fps = 16;
  p->moe_boundary = 0.875f;
  p->vace_strength = 1.f;
  p->vae_tiling_params = {false, false, 0, 0, 0.5f, 0.0f, 0.0f, nullptr};
  sd_hires_params_init(&p->hires);
  p->circular_x = false;
  p->circular_y = false;
  sd_cache_params_init(&p->cache);
}

}  // extern "C"
