// sd_ctx_t and image generation: the C API over pipeline::StableDiffusion. C structs are
// translated here (enum values through their names, so the tables live in one place), and
// requests for features this build does not have are refused with a message naming the
// field, before any model is loaded.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "api/callbacks.h"
#include "api/cancellation.h"
#include "api/convert.h"
#include "api/ignored_params.h"
#include "backend/registry.h"
#include "backend/rpc/client/rpc_device.h"
#include "pipeline/stable_diffusion.h"
#include "stable-diffusion.h"
#include "tensor/error.h"

struct sd_ctx_t {
  std::unique_ptr<sd::pipeline::StableDiffusion> sd;
  sd::api::Cancellation cancel;
  sd::sampling::RngType rng = sd::sampling::RngType::Cuda;
  std::optional<sd::sampling::RngType> sampler_rng;  // unset: the generation RNG
};

namespace {

using sd::format;

bool given(const char* s) {
  return s && *s;
}

void refuse_unsupported(const sd_ctx_params_t& p) {
  struct Field {
    const char* value;
    const char* flag;
  };
  const Field unsupported[] = {
      {p.uncond_diffusion_model_path, "--uncond-diffusion-model"},
      {p.embeddings_connectors_path, "--embeddings-connectors"},
      {p.audio_vae_path, "--audio-vae"},
      {p.ip_adapter_path, "--ip-adapter"},
      {p.motion_module_path, "--motion-module"},
      {p.photo_maker_path, "--photo-maker"},
      {p.pulid_weights_path, "--pulid"},
  };
  for (const Field& f : unsupported)
    SD_CHECK(!given(f.value),
             "%s is not supported by this build (SD 1.x/2.x/SDXL, SD3/SD3.5, FLUX.1, Chroma and "
             "Z-Image image generation)",
             f.flag);
}

sd::pipeline::ModelOptions model_options(const sd_ctx_params_t& p) {
  sd::pipeline::ModelOptions o;
  if (given(p.model_path)) o.model = p.model_path;
  if (given(p.diffusion_model_path)) o.diffusion_model = p.diffusion_model_path;
  if (given(p.high_noise_diffusion_model_path))
    o.high_noise_diffusion_model = p.high_noise_diffusion_model_path;
  if (given(p.vae_path)) o.vae = p.vae_path;
  if (given(p.taesd_path)) o.taesd = p.taesd_path;
  if (given(p.control_net_path)) o.control_net = p.control_net_path;
  o.taesd_preview_only = p.tae_preview_only;
  if (given(p.clip_l_path)) o.clip_l = p.clip_l_path;
  if (given(p.clip_g_path)) o.clip_g = p.clip_g_path;
  if (given(p.t5xxl_path)) o.t5xxl = p.t5xxl_path;
  if (given(p.llm_path)) o.llm = p.llm_path;
  if (given(p.llm_vision_path)) o.llm_vision = p.llm_vision_path;
  if (given(p.clip_vision_path)) o.clip_vision = p.clip_vision_path;
  if (given(p.model_args)) o.model_args = p.model_args;
  if (const char* vocab = std::getenv("SD_CLIP_VOCAB")) o.clip_vocab = vocab;
  o.threads = p.n_threads > 0 ? p.n_threads : sd_get_num_physical_cores();
  o.use_mmap = p.enable_mmap;
  if (given(p.backend)) o.backend = p.backend;
  if (given(p.params_backend)) o.params_backend = p.params_backend;
  o.eager_load = p.eager_load;
  o.quantize_convs = p.quantize_convs;
  if (given(p.tensor_type_rules))
    o.tensor_type_rules = sd::api::parse_tensor_type_rules(p.tensor_type_rules);
  o.flash_attn = p.flash_attn;
  o.diffusion_flash_attn = p.diffusion_flash_attn;
  if (given(p.max_vram)) o.max_vram = p.max_vram;
  o.stream_layers = p.stream_layers;
  o.auto_fit = p.auto_fit;
  o.note = [](const std::string& text) { sd::api::log(SD_LOG_INFO, "%s", text.c_str()); };
  using LoraMode = sd::weights::ModelManagerOptions::LoraMode;
  SD_CHECK(p.lora_apply_mode == LORA_APPLY_AUTO || p.lora_apply_mode == LORA_APPLY_IMMEDIATELY ||
               p.lora_apply_mode == LORA_APPLY_AT_RUNTIME,
           "lora_apply_mode %d is not one of the enum's values (auto, immediately, at_runtime)",
           static_cast<int>(p.lora_apply_mode));
  o.lora_mode = p.lora_apply_mode == LORA_APPLY_IMMEDIATELY  ? LoraMode::Merge
                : p.lora_apply_mode == LORA_APPLY_AT_RUNTIME ? LoraMode::AtRuntime
                                                             : LoraMode::Auto;
  if (p.wtype != SD_TYPE_COUNT) {
    const char* name = sd_type_name(p.wtype);
    std::optional<sd::DType> t = name ? sd::dtype_from_name(name) : std::nullopt;
    SD_CHECK(t.has_value(), "weight type %d is not supported", static_cast<int>(p.wtype));
    o.weight_type = *t;
  }
  if (p.prediction != PREDICTION_COUNT)
    o.prediction = sd::sampling::parse_prediction(sd_prediction_name(p.prediction));
  return o;
}

sd::io::Image to_image(const sd_image_t& img, const char* what) {
  SD_CHECK(img.data && img.width > 0 && img.height > 0 &&
               (img.channel == 1 || img.channel == 3 || img.channel == 4),
           "%s: expected 1, 3 or 4 channels of 8-bit pixels", what);
  sd::io::Image out;
  out.width = static_cast<int>(img.width);
  out.height = static_cast<int>(img.height);
  out.channels = static_cast<int>(img.channel);
  out.pixels.assign(img.data, img.data + out.size());
  return out;
}

// Whether an optional image is given: an all-empty sd_image_t is none; one with a size but
// no pixels (or pixels but no size) is a caller's mistake, not silently no image.
bool has_image(const sd_image_t& img) {
  const bool sized = img.width > 0 || img.height > 0;
  SD_CHECK(sized == (img.data != nullptr),
           "an image of %ux%u %s: pass pixel data with its size, or neither", img.width, img.height,
           img.data ? "with pixel data but no size" : "without pixel data");
  return img.data && img.width > 0 && img.height > 0;
}

// sd_hires_params_t as the pipeline takes it. SD_HIRES_UPSCALER_NONE turns the pass off, as
// in stable-diffusion.cpp; the pipeline checks the values before any work.
static_assert(SD_HIRES_UPSCALER_MODEL - SD_HIRES_UPSCALER_LATENT ==
                  static_cast<int>(sd::pipeline::HiresUpscaler::Model),
              "sd_hires_upscaler_t and pipeline::HiresUpscaler must list the same upscalers");

sd::pipeline::HiresOptions hires_options(const sd_hires_params_t& h) {
  sd::pipeline::HiresOptions o;
  o.enabled = h.enabled && h.upscaler != SD_HIRES_UPSCALER_NONE;
  if (!o.enabled) return o;
  SD_CHECK(h.upscaler > SD_HIRES_UPSCALER_NONE && h.upscaler < SD_HIRES_UPSCALER_COUNT,
           "hires upscaler %d is not one of: None, %s", static_cast<int>(h.upscaler),
           sd::pipeline::hires_upscaler_names().c_str());
  // The C enum is the pipeline's, after NONE.
  o.upscaler = static_cast<sd::pipeline::HiresUpscaler>(h.upscaler - SD_HIRES_UPSCALER_LATENT);
  o.model = h.model_path ? h.model_path : "";
  o.scale = h.scale;
  o.width = h.target_width;
  o.height = h.target_height;
  o.steps = h.steps;
  o.denoising_strength = h.denoising_strength;
  o.upscale_tile_size = h.upscale_tile_size;
  SD_CHECK(h.custom_sigmas_count >= 0 && (h.custom_sigmas_count == 0 || h.custom_sigmas),
           "hires custom_sigmas_count is %d but %s", h.custom_sigmas_count,
           h.custom_sigmas ? "negative" : "custom_sigmas is null");
  if (h.custom_sigmas_count > 0)
    o.custom_sigmas.assign(h.custom_sigmas, h.custom_sigmas + h.custom_sigmas_count);
  return o;
}

}  // namespace

extern "C" {

sd_ctx_t* new_sd_ctx(const sd_ctx_params_t* params) {
  return sd::api::c_boundary("new_sd_ctx", static_cast<sd_ctx_t*>(nullptr), [&] {
    SD_CHECK(params, "no parameters given");
    refuse_unsupported(*params);
    SD_CHECK(params->embedding_count == 0 || params->embeddings,
             "embedding_count is %u but no embeddings are given", params->embedding_count);
    auto ctx = std::make_unique<sd_ctx_t>();
    sd::pipeline::ModelOptions options = model_options(*params);
    // Remote devices join the registry before placement is resolved, so --backend can
    // name them.
    if (given(params->rpc_servers)) {
      const auto names =
          sd::rpc::add_rpc_servers(sd::DeviceRegistry::instance(), params->rpc_servers,
                                   sd::rpc::client_options_from_environment());
      for (const std::string& name : names)
        sd::api::log(SD_LOG_INFO, "%s: %s", name.c_str(),
                     sd::DeviceRegistry::instance().get(name).description().c_str());
    }
    if (params->rng_type != RNG_TYPE_COUNT)
      ctx->rng = sd::sampling::parse_rng(sd_rng_type_name(params->rng_type));
    if (params->sampler_rng_type != RNG_TYPE_COUNT)
      ctx->sampler_rng = sd::sampling::parse_rng(sd_rng_type_name(params->sampler_rng_type));
    // Textual inversions come as (name, path) pairs; the text encoder looks them up by
    // file name in one folder, so all must share one.
    for (uint32_t i = 0; i < params->embedding_count; ++i) {
      const std::string path = params->embeddings[i].path ? params->embeddings[i].path : "";
      const std::string dir =
          path.substr(0, path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/'));
      SD_CHECK(options.embeddings_dir.empty() || options.embeddings_dir == dir,
               "textual-inversion embeddings must be in one folder (--embd-dir)");
      options.embeddings_dir = dir.empty() ? "." : dir;
    }
    const auto start = std::chrono::steady_clock::now();
    options.load_progress = [start](const std::string&, size_t done, size_t total) {
      sd::api::progress(
          static_cast<int>(done), static_cast<int>(total),
          std::chrono::duration<float>(std::chrono::steady_clock::now() - start).count());
    };
    ctx->sd = std::make_unique<sd::pipeline::StableDiffusion>(options);
    sd::api::log(SD_LOG_INFO, "placement: %s", ctx->sd->placement().c_str());
    sd::api::log(SD_LOG_INFO, "model: %s, loaded in %.2fs",
                 sd::io::version_name(ctx->sd->version()),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return ctx.release();
  });
}

void free_sd_ctx(sd_ctx_t* sd_ctx) {
  delete sd_ctx;
}

namespace {

// sd_cache_params_t as the sampling layer takes it; a threshold left at INFINITY means the
// mode's default, as in stable-diffusion.cpp.
sd::sampling::CacheOptions cache_options(const sd_cache_params_t& c) {
  using sd::sampling::CacheMode;
  sd::sampling::CacheOptions o;
  switch (c.mode) {
    case SD_CACHE_UCACHE:
      o.mode = CacheMode::UCache;
      break;
    case SD_CACHE_SPECTRUM:
      o.mode = CacheMode::Spectrum;
      break;
    case SD_CACHE_EASYCACHE:
      o.mode = CacheMode::EasyCache;
      break;
    case SD_CACHE_DBCACHE:
      o.mode = CacheMode::DbCache;
      break;
    case SD_CACHE_TAYLORSEER:
      o.mode = CacheMode::TaylorSeer;
      break;
    case SD_CACHE_CACHE_DIT:
      o.mode = CacheMode::CacheDit;
      break;
    case SD_CACHE_DISABLED:
      o.mode = CacheMode::None;
      break;
    default:
      sd::fail("cache.mode %d is not one of sd_cache_mode_t's values", static_cast<int>(c.mode));
  }
  if (std::isfinite(c.reuse_threshold)) o.ucache.threshold = c.reuse_threshold;
  if (std::isfinite(c.reuse_threshold)) o.easycache.threshold = c.reuse_threshold;
  o.easycache.start = c.start_percent;
  o.easycache.end = c.end_percent;
  o.blocks.threshold = c.residual_diff_threshold;
  o.blocks.front_blocks = c.Fn_compute_blocks;
  o.blocks.back_blocks = c.Bn_compute_blocks;
  o.blocks.warmup = c.max_warmup_steps;
  o.ucache.start = c.start_percent;
  o.ucache.end = c.end_percent;
  o.ucache.decay = c.error_decay_rate;
  o.ucache.relative = c.use_relative_threshold;
  o.ucache.reset = c.reset_error_on_compute;
  o.spectrum.w = c.spectrum_w;
  o.spectrum.m = c.spectrum_m;
  o.spectrum.lam = c.spectrum_lam;
  o.spectrum.window = c.spectrum_window_size;
  o.spectrum.flex = c.spectrum_flex_window;
  o.spectrum.warmup = c.spectrum_warmup_steps;
  o.spectrum.stop = c.spectrum_stop_percent;
  return o;
}

// A C request as the pipeline's, with the images it points at (not copyable: the request
// points into it).
struct PipelineRequest {
  sd::pipeline::ImageRequest request;
  sd::io::Image init, mask, control, end;
  std::vector<sd::io::Image> refs;
  std::vector<sd::io::Image> control_frames;  // a VACE control video's
  PipelineRequest() = default;
  PipelineRequest(const PipelineRequest&) = delete;
  PipelineRequest& operator=(const PipelineRequest&) = delete;
};

// Checks the C parameters and builds the pipeline's request from them. `quiet`: no
// warnings about ignored flags (a check, not a run).
void to_pipeline_request(sd_ctx_t* sd_ctx, const sd_img_gen_params_t* p, PipelineRequest& out,
                         bool quiet) {
  SD_CHECK(sd_ctx && sd_ctx->sd, "no model context (new_sd_ctx failed or was not called)");
  SD_CHECK(p, "missing parameters");
  SD_CHECK(p->lora_count == 0 || p->loras, "lora_count is %u but no LoRAs are given",
           p->lora_count);
  SD_CHECK(p->ref_images_count >= 0 && (p->ref_images_count == 0 || p->ref_images),
           "ref_images_count is %d but no reference images are given", p->ref_images_count);
  SD_CHECK(p->pm_params.id_images_count == 0, "PhotoMaker is not supported by this build");
  SD_CHECK(!p->circular_x && !p->circular_y, "--circular is not supported by this build yet");
  const sd_sample_params_t& s = p->sample_params;
  if (!quiet) sd::api::warn_ignored_flags(*p);

  sd::pipeline::ImageRequest& r = out.request;
  for (uint32_t i = 0; i < p->lora_count; ++i) {
    const sd_lora_t& l = p->loras[i];
    SD_CHECK(l.path && *l.path, "LoRA %u has no file path", i);
    r.loras.push_back({l.path, l.multiplier, l.is_high_noise});
  }
  r.prompt = p->prompt ? p->prompt : "";
  r.negative_prompt = p->negative_prompt ? p->negative_prompt : "";
  r.clip_skip = p->clip_skip;
  r.width = p->width;
  r.height = p->height;
  r.steps = s.sample_steps;
  r.cfg_scale = s.guidance.txt_cfg;
  if (std::isfinite(s.guidance.img_cfg)) r.img_cfg_scale = s.guidance.img_cfg;
  r.guidance = s.guidance.distilled_guidance;
  if (std::isfinite(s.flow_shift)) r.flow_shift = s.flow_shift;
  if (s.sample_method != SAMPLE_METHOD_COUNT)
    r.method = sd::sampling::parse_sample_method(sd_sample_method_name(s.sample_method));
  if (s.scheduler != SCHEDULER_COUNT)
    r.scheduler = sd::sampling::parse_scheduler(sd_scheduler_name(s.scheduler));
  if (s.custom_sigmas && s.custom_sigmas_count > 0)
    r.custom_sigmas.assign(s.custom_sigmas, s.custom_sigmas + s.custom_sigmas_count);
  if (std::isfinite(s.eta)) r.eta = s.eta;
  r.timestep_shift = s.shifted_timestep;
  r.seed = p->seed;
  r.rng = sd_ctx->rng;
  r.sampler_rng = sd_ctx->sampler_rng;
  r.batch_count = p->batch_count;
  r.strength = p->strength;
  if (has_image(p->init_image)) {
    out.init = to_image(p->init_image, "init image");
    r.init_image = &out.init;
    if (has_image(p->mask_image)) {
      out.mask = to_image(p->mask_image, "mask image");
      r.mask = &out.mask;
    }
  }
  if (has_image(p->control_image)) {
    out.control = to_image(p->control_image, "control image");
    r.control_image = &out.control;
  }
  r.control_strength = p->control_strength;
  for (int i = 0; i < p->ref_images_count; ++i)
    out.refs.push_back(
        to_image(p->ref_images[i], ("reference image " + std::to_string(i + 1)).c_str()));
  for (const sd::io::Image& ref : out.refs) r.ref_images.push_back(&ref);
  {
    std::vector<std::string> unused;
    r.ref_options = sd::pipeline::parse_reference_image_args(
        p->ref_image_args ? p->ref_image_args : "", &unused);
    if (!quiet)
      for (const std::string& key : unused)
        sd::api::log(SD_LOG_WARN, "--ref-image-args '%s' is not used by this build; ignored",
                     key.c_str());
  }
  if (p->vae_tiling_params.enabled) {
    sd::models::TilingParams t;
    t.tile_size_x = p->vae_tiling_params.tile_size_x;
    t.tile_size_y = p->vae_tiling_params.tile_size_y;
    t.target_overlap = p->vae_tiling_params.target_overlap;
    t.rel_size_x = p->vae_tiling_params.rel_size_x;
    t.rel_size_y = p->vae_tiling_params.rel_size_y;
    r.vae_tiling = t;
  }
  r.cache = cache_options(p->cache);
  r.hires = hires_options(p->hires);
  if (s.extra_sample_args && *s.extra_sample_args) {
    sd::sampling::GuidanceExtras extras = sd::sampling::parse_guidance_extras(s.extra_sample_args);
    r.apg = extras.apg;
    r.guidance_schedule = std::move(extras.schedule);
    if (!quiet)
      for (const std::string& key : extras.unknown)
        sd::api::log(SD_LOG_WARN, "--extra-sample-args '%s' is not used by this build; ignored",
                     key.c_str());
  }
  r.skip_layer.scale = s.guidance.slg.scale;
  r.skip_layer.layers.assign(
      s.guidance.slg.layers,
      s.guidance.slg.layers + (s.guidance.slg.layers ? s.guidance.slg.layer_count : 0));
  r.skip_layer.start = s.guidance.slg.layer_start;
  r.skip_layer.end = s.guidance.slg.layer_end;
}

}  // namespace

}  // extern "C"

namespace {

// Runs a checked request on the context and hands its images (a video's frames) to the
// caller as sd.cpp's API does: one malloc'd array, each image's pixels malloc'd.
void run_request(sd_ctx_t* sd_ctx, sd::pipeline::ImageRequest& r, sd_image_t** images_out,
                 int* num_images_out) {
  if (r.seed < 0) {
    std::srand(static_cast<unsigned>(std::time(nullptr)));
    r.seed = std::rand();
  }
  r.progress = [](int step, int steps, double seconds) {
    sd::api::progress(step, steps, static_cast<float>(seconds));
  };
  sd_ctx->cancel.reset();
  r.cancelled = [sd_ctx] { return sd_ctx->cancel.stop_now(); };
  r.stop_new_images = [sd_ctx] { return sd_ctx->cancel.stop_new_images(); };
  const sd::api::PreviewRequest preview = sd::api::preview_request();
  if (preview.callback && preview.mode != PREVIEW_NONE) {
    using Mode = sd::pipeline::ImageRequest::Preview::Mode;
    r.preview.mode = preview.mode == PREVIEW_PROJ  ? Mode::Proj
                     : preview.mode == PREVIEW_TAE ? Mode::Tae
                                                   : Mode::Vae;
    r.preview.interval = preview.interval;
    r.preview.denoised = preview.denoised;
    r.preview.noisy = preview.noisy;
    r.preview.callback = [](int step, const std::vector<sd::io::Image>& images, bool noisy) {
      std::vector<sd_image_t> frames;
      for (const sd::io::Image& image : images)
        frames.push_back({static_cast<uint32_t>(image.width), static_cast<uint32_t>(image.height),
                          static_cast<uint32_t>(image.channels),
                          const_cast<uint8_t*>(image.pixels.data())});
      sd::api::send_preview(step, static_cast<int>(frames.size()), frames.data(), noisy);
    };
  }
  r.info = [](const std::string& text) { sd::api::log(SD_LOG_INFO, "%s", text.c_str()); };
  r.warn = [](const std::string& text) { sd::api::log(SD_LOG_WARN, "%s", text.c_str()); };

  if (r.video_frames > 0)
    sd::api::log(SD_LOG_INFO, "generate_video %dx%dx%d, seed %lld", r.width, r.height,
                 r.video_frames, static_cast<long long>(r.seed));
  else
    sd::api::log(SD_LOG_INFO, "generate_image %dx%d, seed %lld", r.width, r.height,
                 static_cast<long long>(r.seed));
  std::vector<sd::io::Image> images = sd_ctx->sd->generate(r);
  const std::string traffic = sd::rpc::rpc_traffic_report(sd::DeviceRegistry::instance());
  if (!traffic.empty()) sd::api::log(SD_LOG_INFO, "RPC traffic so far, %s", traffic.c_str());
  const std::string peaks = sd::peak_memory_report(sd::DeviceRegistry::instance());
  if (!peaks.empty()) sd::api::log(SD_LOG_INFO, "device memory at most: %s", peaks.c_str());
  auto* out = static_cast<sd_image_t*>(std::calloc(images.size(), sizeof(sd_image_t)));
  SD_CHECK(out, "out of memory for %zu images", images.size());
  for (size_t i = 0; i < images.size(); ++i) {
    out[i].width = static_cast<uint32_t>(images[i].width);
    out[i].height = static_cast<uint32_t>(images[i].height);
    out[i].channel = static_cast<uint32_t>(images[i].channels);
    out[i].data = static_cast<uint8_t*>(std::malloc(images[i].pixels.size()));
    if (!out[i].data) {
      for (size_t j = 0; j < i; ++j) std::free(out[j].data);
      std::free(out);
      sd::fail("out of memory for image %zu", i);
    }
    std::memcpy(out[i].data, images[i].pixels.data(), images[i].pixels.size());
  }
  *images_out = out;
  *num_images_out = static_cast<int>(images.size());
}

// A video request as an image request of the same prompt, size and sampling (its first
// frame the init image), with the inputs this build does not read refused.
void to_image_params(const sd_vid_gen_params_t& v, sd_img_gen_params_t& p) {
  SD_CHECK(v.ref_videos_count == 0 && v.ref_audios_count == 0 && v.ref_images_count == 0,
           "reference videos, audio and images (--ref-video, --ref-audio, -r) are not "
           "supported for video by this build yet (a Wan VACE model takes its reference image "
           "as -i)");
  sd_img_gen_params_init(&p);
  p.loras = v.loras;
  p.lora_count = v.lora_count;
  p.prompt = v.prompt;
  p.negative_prompt = v.negative_prompt;
  p.clip_skip = v.clip_skip;
  p.width = v.width;
  p.height = v.height;
  p.sample_params = v.sample_params;
  p.strength = v.strength;
  p.init_image = v.init_image;
  p.seed = v.seed;
  p.vae_tiling_params = v.vae_tiling_params;
  p.cache = v.cache;
  p.hires = v.hires;
  p.circular_x = v.circular_x;
  p.circular_y = v.circular_y;
}

// The video request as a pipeline request: the image request of its prompt, size and
// sampling, its frames, last frame and the high-noise expert's sampling.
void to_pipeline_video_request(sd_ctx_t* sd_ctx, const sd_vid_gen_params_t& v,
                               PipelineRequest& request, bool quiet) {
  sd_img_gen_params_t p;
  to_image_params(v, p);
  to_pipeline_request(sd_ctx, &p, request, quiet);
  request.request.video_frames = std::max(1, v.video_frames);
  // The high-noise expert's sampling (Wan 2.2 A14B), read where the model has one: steps < 0
  // for those above the boundary, 0 for none (as the reference).
  const sd_sample_params_t& h = v.high_noise_sample_params;
  sd::pipeline::ImageRequest::HighNoise& high = request.request.high_noise;
  high.steps = h.sample_steps;
  high.cfg_scale = h.guidance.txt_cfg;
  if (h.sample_method != SAMPLE_METHOD_COUNT)
    high.method = sd::sampling::parse_sample_method(sd_sample_method_name(h.sample_method));
  if (std::isfinite(h.eta)) high.eta = h.eta;
  high.moe_boundary = v.moe_boundary;
  if (has_image(v.end_image)) {
    request.end = to_image(v.end_image, "end image");
    request.request.end_image = &request.end;
  }
  SD_CHECK(v.control_frames_size >= 0 && (v.control_frames_size == 0 || v.control_frames),
           "control_frames_size is %d but no control frames are given", v.control_frames_size);
  for (int i = 0; i < v.control_frames_size; ++i)
    request.control_frames.push_back(
        to_image(v.control_frames[i], ("control frame " + std::to_string(i + 1)).c_str()));
  for (const sd::io::Image& frame : request.control_frames)
    request.request.control_frames.push_back(&frame);
  request.request.vace_strength = v.vace_strength;
}

// What generate_* would say of a request before any work, without its warnings: NULL, or
// the reason (malloc'd). `build` makes the pipeline's request.
char* check_request(sd_ctx_t* sd_ctx, const std::function<void(PipelineRequest&)>& build) {
  std::string problem;
  try {
    PipelineRequest request;
    build(request);
    sd_ctx->sd->check(request.request);
    return nullptr;
  } catch (const std::exception& e) {
    problem = e.what();
  } catch (...) {
    problem = "the request could not be checked";
  }
  char* text = static_cast<char*>(std::malloc(problem.size() + 1));
  if (text) std::memcpy(text, problem.c_str(), problem.size() + 1);
  return text;
}

}  // namespace

extern "C" {

bool generate_image(sd_ctx_t* sd_ctx, const sd_img_gen_params_t* p, sd_image_t** images_out,
                    int* num_images_out) {
  if (images_out) *images_out = nullptr;
  if (num_images_out) *num_images_out = 0;
  return sd::api::c_boundary("generate_image", false, [&] {
    SD_CHECK(p && images_out && num_images_out, "missing parameters or output pointers");
    PipelineRequest request;
    to_pipeline_request(sd_ctx, p, request, /*quiet=*/false);
    run_request(sd_ctx, request.request, images_out, num_images_out);
    return true;
  });
}

bool generate_video(sd_ctx_t* sd_ctx, const sd_vid_gen_params_t* v, sd_image_t** frames_out,
                    int* num_frames_out, sd_audio_t** audio_out) {
  if (frames_out) *frames_out = nullptr;
  if (num_frames_out) *num_frames_out = 0;
  if (audio_out) *audio_out = nullptr;  // no model of this build makes sound
  return sd::api::c_boundary("generate_video", false, [&] {
    SD_CHECK(v && frames_out && num_frames_out, "missing parameters or output pointers");
    PipelineRequest request;
    to_pipeline_video_request(sd_ctx, *v, request, /*quiet=*/false);
    run_request(sd_ctx, request.request, frames_out, num_frames_out);
    return true;
  });
}

char* sd_vid_gen_params_check(sd_ctx_t* sd_ctx, const sd_vid_gen_params_t* v) {
  return check_request(sd_ctx, [&](PipelineRequest& request) {
    SD_CHECK(v, "missing parameters");
    to_pipeline_video_request(sd_ctx, *v, request, /*quiet=*/true);
  });
}

char* sd_img_gen_params_check(sd_ctx_t* sd_ctx, const sd_img_gen_params_t* p) {
  return check_request(sd_ctx, [&](PipelineRequest& request) {
    to_pipeline_request(sd_ctx, p, request, /*quiet=*/true);
  });
}

// The context's model decides (pipeline::StableDiffusion::default_scheduler); without one,
// sd.cpp's defaults for UNet models.
enum sample_method_t sd_get_default_sample_method(const sd_ctx_t* sd_ctx) {
  if (!sd_ctx || !sd_ctx->sd) return EULER_A_SAMPLE_METHOD;
  const sample_method_t m =
      str_to_sample_method(sd::sampling::sample_method_name(sd_ctx->sd->default_sample_method()));
  return m == SAMPLE_METHOD_COUNT ? EULER_A_SAMPLE_METHOD : m;
}

enum scheduler_t sd_get_default_scheduler(const sd_ctx_t* sd_ctx,
                                          enum sample_method_t sample_method) {
  namespace sampling = sd::sampling;
  return sd::api::c_boundary("sd_get_default_scheduler", DISCRETE_SCHEDULER, [&] {
    const sampling::SampleMethod method =
        sample_method >= 0 && sample_method < SAMPLE_METHOD_COUNT
            ? sampling::parse_sample_method(sd_sample_method_name(sample_method))
            : sampling::default_sample_method(false);
    const sampling::Scheduler s =
        sd_ctx && sd_ctx->sd ? sd_ctx->sd->default_scheduler(method)
                             : sampling::default_scheduler(method, sampling::Prediction::Eps);
    const scheduler_t c = str_to_scheduler(sampling::scheduler_name(s));
    return c == SCHEDULER_COUNT ? DISCRETE_SCHEDULER : c;
  });
}

bool sd_ctx_supports_image_generation(const sd_ctx_t* sd_ctx) {
  return sd_ctx != nullptr && sd_ctx->sd != nullptr;
}
bool sd_ctx_supports_video_generation(const sd_ctx_t* sd_ctx) {
  return sd_ctx != nullptr && sd_ctx->sd != nullptr && sd_ctx->sd->makes_video();
}

void sd_cancel_generation(sd_ctx_t* sd_ctx, enum sd_cancel_mode_t mode) {
  if (sd_ctx) sd_ctx->cancel.request(mode);
}

bool sd_ctx_load_control_net(sd_ctx_t* sd_ctx, const char* path) {
  return sd::api::c_boundary("sd_ctx_load_control_net", false, [&] {
    SD_CHECK(sd_ctx && sd_ctx->sd, "no model context (new_sd_ctx failed or was not called)");
    SD_CHECK(path && *path, "no ControlNet file given");
    sd_ctx->sd->load_control_net(path);
    return true;
  });
}

bool sd_ctx_unload_control_net(sd_ctx_t* sd_ctx) {
  return sd::api::c_boundary("sd_ctx_unload_control_net", false, [&] {
    SD_CHECK(sd_ctx && sd_ctx->sd, "no model context (new_sd_ctx failed or was not called)");
    sd_ctx->sd->unload_control_net();
    return true;
  });
}

bool sd_ctx_has_control_net(const sd_ctx_t* sd_ctx) {
  return sd_ctx && sd_ctx->sd && sd_ctx->sd->has_control_net();
}

}  // extern "C"
