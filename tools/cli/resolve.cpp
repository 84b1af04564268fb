// After parsing: defaults that depend on other flags, <lora:...> prompt tags, the
// embeddings folder, the deprecated placement switches; then the checks sd.cpp makes and
// ours (sizes multiple of 8, every named input file exists); finally the views as the C
// API's structs.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <regex>

#include "cli/args.h"
#include "cli/cli_log.h"
#include "io/folder_lookup.h"
#include "sampling/guidance_extras.h"
#include "tensor/error.h"

namespace fs = std::filesystem;

namespace sd::cli {

namespace {

// "None, Latent, ..., Nearest": the names --hires-upscaler takes besides a model file's.
std::string builtin_hires_upscalers() {
  std::string names;
  for (int i = SD_HIRES_UPSCALER_NONE; i < SD_HIRES_UPSCALER_MODEL; ++i)
    names += (names.empty() ? "" : ", ") +
             std::string(sd_hires_upscaler_name(static_cast<sd_hires_upscaler_t>(i)));
  return names;
}

const std::vector<std::string> kModelExtensions = {".gguf", ".safetensors", ".pt", ".ckpt"};

void prepend_assignment(std::string& spec, const char* assignment) {
  spec = spec.empty() ? assignment : std::string(assignment) + "," + spec;
}

sd_vae_format_t vae_format_from_name(const std::string& name) {
  if (name == "auto") return SD_VAE_FORMAT_AUTO;
  if (name == "flux") return SD_VAE_FORMAT_FLUX;
  if (name == "sd3") return SD_VAE_FORMAT_SD3;
  if (name == "flux2") return SD_VAE_FORMAT_FLUX2;
  if (name == "wan") return SD_VAE_FORMAT_WAN;
  return SD_VAE_FORMAT_COUNT;
}

sd_cache_mode_t cache_mode_from_name(const std::string& name) {
  if (name == "easycache") return SD_CACHE_EASYCACHE;
  if (name == "ucache") return SD_CACHE_UCACHE;
  if (name == "dbcache") return SD_CACHE_DBCACHE;
  if (name == "taylorseer") return SD_CACHE_TAYLORSEER;
  if (name == "cache-dit") return SD_CACHE_CACHE_DIT;
  if (name == "spectrum") return SD_CACHE_SPECTRUM;
  return SD_CACHE_DISABLED;
}

void check_exists(const char* flag, const std::string& path) {
  if (path.empty()) return;
  std::error_code ec;
  SD_CHECK(fs::exists(path, ec), "%s: '%s' does not exist", flag, path.c_str());
}

// A file named `name` in `dir`, with or without one of `extensions`.
void check_multiple_of_8(const char* flag, int value) {
  if (value <= 0 || value % 8 == 0) return;
  const int below = value / 8 * 8;
  // (the multiple above would overflow an int near INT_MAX: suggest it only when it exists)
  if (below > INT_MAX - 8) fail("%s %d is not a multiple of 8; use %d", flag, value, below);
  fail("%s %d is not a multiple of 8; use %d or %d", flag, value, below > 0 ? below : 8, below + 8);
}

void resolve_context(ContextOptions& c, Mode mode) {
  if (c.n_threads <= 0) c.n_threads = sd_get_num_physical_cores();

  std::error_code ec;
  if (!c.embedding_dir.empty() && fs::is_directory(c.embedding_dir, ec)) {
    for (const auto& entry : fs::directory_iterator(c.embedding_dir, ec)) {
      if (!entry.is_regular_file()) continue;
      const fs::path& p = entry.path();
      if (std::find(kModelExtensions.begin(), kModelExtensions.end(), p.extension().string()) ==
          kModelExtensions.end()) {
        continue;
      }
      if (c.confine_model_dirs && !io::lies_inside(p, c.embedding_dir)) {
        log_message(SD_LOG_WARN,
                    "embedding '%s' leads outside --embd-dir (--confine-model-dirs); skipped",
                    p.string().c_str());
        continue;
      }
      c.embeddings[p.stem().string()] = p.string();
    }
  }

  // sd.cpp compatibility: the old placement switches become assignments, ahead of what
  // --backend / --params-backend say, so an explicit assignment still wins.
  c.effective_backend = c.backend;
  c.effective_params_backend = c.params_backend;
  if (c.offload_to_cpu) prepend_assignment(c.effective_params_backend, "*=cpu");
  if (c.clip_on_cpu) prepend_assignment(c.effective_backend, "te=cpu");
  if (c.vae_on_cpu) prepend_assignment(c.effective_backend, "vae=cpu");
  if (c.control_net_cpu) prepend_assignment(c.effective_backend, "controlnet=cpu");

  if (mode == Mode::Convert) {
    SD_CHECK(!c.model_path.empty() || !c.diffusion_model_path.empty() || !c.t5xxl_path.empty() ||
                 !c.clip_l_path.empty() || !c.clip_g_path.empty() || !c.llm_path.empty(),
             "convert needs an input model: -m FILE (or --diffusion-model / --t5xxl / --clip_l / "
             "--clip_g / --llm FILE)");
  } else if (mode == Mode::Upscale) {
    SD_CHECK(!c.esrgan_path.empty(), "upscale mode needs an upscaler model: --upscale-model FILE");
  } else {
    SD_CHECK(!c.model_path.empty() || !c.diffusion_model_path.empty(),
             "no model given: pass -m/--model FILE (a full checkpoint) or --diffusion-model FILE");
  }
  SD_CHECK(vae_format_from_name(c.vae_format) != SD_VAE_FORMAT_COUNT,
           "unknown --vae-format '%s'; valid: auto, flux, sd3, flux2, wan", c.vae_format.c_str());

  check_exists("--model", c.model_path);
  check_exists("--clip_l", c.clip_l_path);
  check_exists("--clip_g", c.clip_g_path);
  check_exists("--clip_vision", c.clip_vision_path);
  check_exists("--t5xxl", c.t5xxl_path);
  check_exists("--llm", c.llm_path);
  check_exists("--llm_vision", c.llm_vision_path);
  check_exists("--diffusion-model", c.diffusion_model_path);
  check_exists("--high-noise-diffusion-model", c.high_noise_diffusion_model_path);
  check_exists("--uncond-diffusion-model", c.uncond_diffusion_model_path);
  check_exists("--embeddings-connectors", c.embeddings_connectors_path);
  check_exists("--vae", c.vae_path);
  check_exists("--audio-vae", c.audio_vae_path);
  check_exists("--taesd", c.taesd_path);
  check_exists("--control-net", c.control_net_path);
  check_exists("--ip-adapter", c.ip_adapter_path);
  check_exists("--motion-module", c.motion_module_path);
  check_exists("--photo-maker", c.photo_maker_path);
  check_exists("--pulid-weights", c.pulid_weights_path);
  check_exists("--upscale-model", c.esrgan_path);
}

// <lora:NAME:MULTIPLIER> tags leave the prompt and become LoRA requests; NAME is looked up
// in --lora-model-dir with or without a model extension, "|high_noise|NAME" targets the
// high-noise model. Tags naming no file are dropped with a warning, as in sd.cpp.
void extract_loras(GenerationOptions& g, const std::string& lora_dir, bool confined) {
  static const std::regex tag(R"(<lora:([^:>]+):([^>]+)>)");
  std::string remaining = g.prompt;
  std::smatch m;
  while (std::regex_search(remaining, m, tag)) {
    std::string name = m[1].str();
    const std::string multiplier_text = m[2].str();
    remaining = m.suffix().str();
    g.prompt = std::regex_replace(g.prompt, tag, "", std::regex_constants::format_first_only);

    char* end = nullptr;
    const float multiplier = std::strtof(multiplier_text.c_str(), &end);
    if (end == multiplier_text.c_str()) continue;

    const std::string high_noise_prefix = "|high_noise|";
    const bool high_noise = name.rfind(high_noise_prefix, 0) == 0;
    if (high_noise) name.erase(0, high_noise_prefix.size());

    const io::FolderMatch match = io::find_in_folder(name, lora_dir, kModelExtensions, confined);
    SD_CHECK(match.refused.empty(),
             "LoRA tag '%s' is refused: %s (--confine-model-dirs keeps lookups inside "
             "--lora-model-dir '%s')",
             name.c_str(), match.refused.c_str(), lora_dir.c_str());
    const std::string& file = match.path;
    if (file.empty()) {
      log_message(SD_LOG_WARN, "LoRA '%s' not found in '%s'; tag ignored", name.c_str(),
                  lora_dir.c_str());
      continue;
    }
    (high_noise ? g.high_noise_lora_map : g.lora_map)[file] += multiplier;
  }
}

void resolve_generation(GenerationOptions& g, const ContextOptions& c) {
  if (g.high_noise_sample_params.sample_steps <= 0) g.high_noise_sample_params.sample_steps = -1;
  if (g.seed < 0) {
    std::srand(static_cast<unsigned>(std::time(nullptr)));
    g.seed = std::rand();
  }
  if (g.hires_enabled) {
    if (g.hires_upscaler.empty()) g.hires_upscaler = "Latent";
    g.resolved_hires_upscaler = str_to_sd_hires_upscaler(g.hires_upscaler.c_str());
    SD_CHECK(g.resolved_hires_upscaler != SD_HIRES_UPSCALER_MODEL,
             "--hires-upscaler Model: give the model's file name in --hires-upscalers-dir "
             "instead");
    if (g.resolved_hires_upscaler == SD_HIRES_UPSCALER_NONE) {
      g.hires_enabled = false;
    } else if (g.resolved_hires_upscaler == SD_HIRES_UPSCALER_COUNT) {
      const io::FolderMatch match =
          io::find_in_folder(g.hires_upscaler, c.hires_upscalers_dir,
                             {".gguf", ".safetensors", ".pt", ".pth"}, c.confine_model_dirs);
      SD_CHECK(match.refused.empty(),
               "--hires-upscaler '%s' is refused: %s (--confine-model-dirs keeps lookups inside "
               "--hires-upscalers-dir '%s')",
               g.hires_upscaler.c_str(), match.refused.c_str(), c.hires_upscalers_dir.c_str());
      g.hires_upscaler_model_path = match.path;
      SD_CHECK(!g.hires_upscaler_model_path.empty(),
               "--hires-upscaler '%s' is neither a built-in upscaler (%s) nor a model file "
               "(.gguf, .safetensors, .pt, .pth) in --hires-upscalers-dir '%s'",
               g.hires_upscaler.c_str(), builtin_hires_upscalers().c_str(),
               c.hires_upscalers_dir.c_str());
      g.resolved_hires_upscaler = SD_HIRES_UPSCALER_MODEL;
    }
  }
  // Deprecated switches: sd.cpp turns them into reference-image arguments.
  auto add_ref_arg = [&g](const char* flag, const char* arg) {
    if (!g.ref_image_args.empty()) g.ref_image_args += ",";
    g.ref_image_args += arg;
    log_message(SD_LOG_WARN, "%s is deprecated; use --ref-image-args \"%s\"", flag, arg);
  };
  if (!g.auto_resize_ref_image)
    add_ref_arg("--disable-auto-resize-ref-image", "resize_before_vae=0");
  if (g.increase_ref_index) add_ref_arg("--increase-ref-index", "ref_index_mode=increase");
  g.auto_resize_ref_image = true;
  g.increase_ref_index = false;

  if (!g.cache_mode.empty()) {
    g.cache = sampling::CacheOptions{};
    g.cache.mode = sampling::parse_cache_mode(g.cache_mode);
    sampling::parse_cache_options(g.cache.mode, g.cache_option, g.cache);
  }

  g.prompt_with_lora = g.prompt;
  if (!c.lora_model_dir.empty()) extract_loras(g, c.lora_model_dir, c.confine_model_dirs);
}

// Skip-layer guidance's window, checked here so a mistake is said before the model loads.
void check_skip_layer_window(const char* prefix, const sd_slg_params_t& slg) {
  SD_CHECK(std::isfinite(slg.scale) && slg.layer_start >= 0.f && slg.layer_end <= 1.f &&
               slg.layer_start <= slg.layer_end,
           "--%sskip-layer-start %g / --%sskip-layer-end %g / --%sslg-scale %g: the start and "
           "end are fractions of the steps with 0 <= start <= end <= 1, the scale a finite number",
           prefix, slg.layer_start, prefix, slg.layer_end, prefix, slg.scale);
}

void validate_generation(const GenerationOptions& g, Mode mode) {
  check_skip_layer_window("", g.sample_params.guidance.slg);
  if (mode == Mode::VidGen)
    check_skip_layer_window("high-noise-", g.high_noise_sample_params.guidance.slg);
  SD_CHECK(g.batch_count > 0, "--batch-count must be at least 1, got %d", g.batch_count);
  SD_CHECK(g.qwen_image_layers >= 0, "--qwen-image-layers must be non-negative");
  SD_CHECK(g.sample_params.sample_steps > 0, "--steps must be at least 1, got %d",
           g.sample_params.sample_steps);
  SD_CHECK(g.custom_sigmas.empty() || g.custom_sigmas.size() >= 2,
           "--sigmas needs at least two values (a start and the final 0)");
  for (size_t i = 0; i < g.custom_sigmas.size(); ++i) {
    const float s = g.custom_sigmas[i];
    SD_CHECK(std::isfinite(s) && s >= 0.0f, "--sigmas: %g is not a sigma (finite, >= 0)", s);
    SD_CHECK(i == 0 || s <= g.custom_sigmas[i - 1],
             "--sigmas must not increase (%g follows %g): noise goes down as sampling goes on", s,
             g.custom_sigmas[i - 1]);
  }
  SD_CHECK(g.strength >= 0.f && g.strength <= 1.f, "--strength must be in [0, 1], got %g",
           g.strength);
  SD_CHECK(g.sample_params.guidance.txt_cfg >= 0.f, "--cfg-scale must not be negative, got %g",
           g.sample_params.guidance.txt_cfg);
  SD_CHECK(g.sample_params.shifted_timestep >= 0 && g.sample_params.shifted_timestep <= 1000,
           "--timestep-shift must be in [0, 1000], got %d", g.sample_params.shifted_timestep);
  SD_CHECK(g.upscale_repeats >= 1, "--upscale-repeats must be at least 1");
  SD_CHECK(g.upscale_tile_size >= 1, "--upscale-tile-size must be at least 1");
  if (mode == Mode::VidGen) {
    SD_CHECK(g.video_frames > 0, "--video-frames must be at least 1");
    SD_CHECK(g.fps > 0, "--fps must be at least 1");
  }
  SD_CHECK(g.ref_video_audio_paths.size() <= g.ref_video_paths.size(),
           "each --ref-video-audio needs a --ref-video");
  SD_CHECK(mode == Mode::VidGen || (g.ref_video_paths.empty() && g.ref_video_audio_paths.empty() &&
                                    g.ref_audio_paths.empty()),
           "--ref-video, --ref-video-audio and --ref-audio need -M vid_gen");
  SD_CHECK(mode == Mode::VidGen || g.control_video_path.empty(),
           "--control-video is a Wan VACE model's control video: it needs -M vid_gen");
  if (g.hires_enabled) {
    SD_CHECK(g.hires_width >= 0 && g.hires_height >= 0 && g.hires_width % 8 == 0 &&
                 g.hires_height % 8 == 0,
             "--hires-width %d / --hires-height %d: must be multiples of 8 (0: from "
             "--hires-scale)",
             g.hires_width, g.hires_height);
    SD_CHECK(g.hires_scale > 0.f || g.hires_width > 0 || g.hires_height > 0,
             "--hires-scale must be positive when no --hires-width/--hires-height is given, got "
             "%g",
             g.hires_scale);
    SD_CHECK(g.hires_steps >= 0, "--hires-steps must not be negative; 0 reuses --steps");
    SD_CHECK(g.hires_denoising_strength >= 0.f && g.hires_denoising_strength <= 1.f,
             "--hires-denoising-strength must be in [0, 1], got %g", g.hires_denoising_strength);
    SD_CHECK(g.hires_custom_sigmas.empty() || g.hires_custom_sigmas.size() >= 2,
             "--hires-sigmas needs at least two values");
    SD_CHECK(g.hires_upscale_tile_size >= 1, "--hires-upscale-tile-size must be at least 1");
  }
  if (mode == Mode::Upscale || mode == Mode::Adetailer) {
    SD_CHECK(!g.init_image_path.empty(), "-M %s needs an input image: --init-img FILE",
             mode_name(mode));
  }
  SD_CHECK(mode != Mode::Adetailer || !g.ad_model_path.empty(),
           "-M adetailer needs a detector model: --ad-model FILE");
  SD_CHECK(g.ad_model_path.empty() || mode == Mode::ImgGen || mode == Mode::Adetailer,
           "--ad-model works in img_gen and adetailer modes only");
  SD_CHECK(g.cache_option.empty() || !g.cache_mode.empty(), "--cache-option needs --cache-mode");
  // Parsed again per request by the library; here so that a typo is said before the load.
  if (!g.extra_sample_args.empty()) sd::sampling::parse_guidance_extras(g.extra_sample_args);

  // The latent is 1/8 of the image; other sizes would be cropped or padded silently.
  if (mode == Mode::ImgGen || mode == Mode::VidGen || mode == Mode::Adetailer) {
    check_multiple_of_8("--width", g.width);
    check_multiple_of_8("--height", g.height);
  }

  check_exists("--init-img", g.init_image_path);
  check_exists("--end-img", g.end_image_path);
  check_exists("--mask", g.mask_image_path);
  check_exists("--control-image", g.control_image_path);
  check_exists("--ip-adapter-image", g.ip_adapter_image_path);
  check_exists("--control-video", g.control_video_path);
  check_exists("--pm-id-images-dir", g.pm_id_images_dir);
  check_exists("--pm-id-embed-path", g.pm_id_embed_path);
  check_exists("--pulid-id-embedding", g.pulid_id_embedding_path);
  check_exists("--ad-model", g.ad_model_path);
  for (const auto& p : g.ref_image_paths) check_exists("--ref-image", p);
  for (const auto& p : g.ref_video_paths) check_exists("--ref-video", p);
  for (const auto& p : g.ref_video_audio_paths) check_exists("--ref-video-audio", p);
  for (const auto& p : g.ref_audio_paths) check_exists("--ref-audio", p);
}

}  // namespace

GenerationOptions::GenerationOptions() {
  sd_sample_params_init(&sample_params);
  sd_sample_params_init(&high_noise_sample_params);
}

void resolve_and_validate(Arguments& a) {
  CliOptions& cli = a.cli;
  if (cli.mode == Mode::Convert && cli.output_path == "output.png") cli.output_path = "output.gguf";
  if (cli.mode == Mode::Metadata) {
    SD_CHECK(!cli.image_path.empty(), "metadata mode needs an image: --image FILE");
    SD_CHECK(cli.metadata_format == "text" || cli.metadata_format == "json",
             "unknown --metadata-format '%s'; valid: text, json", cli.metadata_format.c_str());
    check_exists("--image", cli.image_path);
    return;
  }
  if (cli.mode == Mode::Tokenize) {
    if (!cli.tokenizer_path.empty()) check_exists("--tokenizer", cli.tokenizer_path);
    if (!a.context.llm_path.empty()) check_exists("--llm", a.context.llm_path);
    return;
  }
  SD_CHECK(!cli.output_path.empty(), "no output path: -o FILE");
  if (cli.output_begin_idx < 0) cli.output_begin_idx = 0;
  for (const auto& p : cli.imatrix_in) check_exists("--imat-in", p);

  resolve_context(a.context, cli.mode);
  resolve_generation(a.generation, a.context);
  validate_generation(a.generation, cli.mode);
}

void resolve_and_validate_generation(GenerationOptions& g, const ContextOptions& c, Mode mode) {
  resolve_generation(g, c);
  validate_generation(g, mode);
}

sd_ctx_params_t ContextOptions::to_c_params(bool taesd_preview_only) {
  embedding_views_.clear();
  for (const auto& [name, path] : embeddings) {
    embedding_views_.push_back({name.c_str(), path.c_str()});
  }
  sd_ctx_params_t p;
  sd_ctx_params_init(&p);
  p.model_path = model_path.c_str();
  p.clip_l_path = clip_l_path.c_str();
  p.clip_g_path = clip_g_path.c_str();
  p.clip_vision_path = clip_vision_path.c_str();
  p.t5xxl_path = t5xxl_path.c_str();
  p.llm_path = llm_path.c_str();
  p.llm_vision_path = llm_vision_path.c_str();
  p.diffusion_model_path = diffusion_model_path.c_str();
  p.high_noise_diffusion_model_path = high_noise_diffusion_model_path.c_str();
  p.uncond_diffusion_model_path = uncond_diffusion_model_path.c_str();
  p.embeddings_connectors_path = embeddings_connectors_path.c_str();
  p.vae_path = vae_path.c_str();
  p.audio_vae_path = audio_vae_path.c_str();
  p.taesd_path = taesd_path.c_str();
  p.control_net_path = control_net_path.c_str();
  p.ip_adapter_path = ip_adapter_path.c_str();
  p.motion_module_path = motion_module_path.c_str();
  p.embeddings = embedding_views_.empty() ? nullptr : embedding_views_.data();
  p.embedding_count = static_cast<uint32_t>(embedding_views_.size());
  p.photo_maker_path = photo_maker_path.c_str();
  p.pulid_weights_path = pulid_weights_path.c_str();
  p.tensor_type_rules = tensor_type_rules.c_str();
  p.n_threads = n_threads;
  p.wtype = wtype;
  p.rng_type = rng_type;
  p.sampler_rng_type = sampler_rng_type;
  p.prediction = prediction;
  p.lora_apply_mode = lora_apply_mode;
  p.enable_mmap = enable_mmap && !disable_mmap;
  p.flash_attn = flash_attn;
  p.diffusion_flash_attn = diffusion_flash_attn;
  p.tae_preview_only = taesd_preview_only;
  p.diffusion_conv_direct = diffusion_conv_direct;
  p.vae_conv_direct = vae_conv_direct;
  p.force_sdxl_vae_conv_scale = force_sdxl_vae_conv_scale;
  p.vae_format = vae_format_from_name(vae_format);
  p.max_vram = max_vram.c_str();
  p.stream_layers = stream_layers;
  p.eager_load = eager_load;
  p.quantize_convs = quantize_convs;
  p.backend = effective_backend.c_str();
  p.params_backend = effective_params_backend.c_str();
  p.split_mode = split_mode.c_str();
  p.auto_fit = auto_fit;
  p.rpc_servers = rpc_servers.c_str();
  p.model_args = model_args.empty() ? nullptr : model_args.c_str();
  return p;
}

sd_img_gen_params_t GenerationOptions::to_c_params() {
  lora_views_.clear();
  for (const auto& [path, multiplier] : lora_map) {
    lora_views_.push_back({false, multiplier, path.c_str()});
  }
  for (const auto& [path, multiplier] : high_noise_lora_map) {
    lora_views_.push_back({true, multiplier, path.c_str()});
  }
  sample_params.guidance.slg.layers = skip_layers.empty() ? nullptr : skip_layers.data();
  sample_params.guidance.slg.layer_count = skip_layers.size();
  high_noise_sample_params.guidance.slg.layers =
      high_noise_skip_layers.empty() ? nullptr : high_noise_skip_layers.data();
  high_noise_sample_params.guidance.slg.layer_count = high_noise_skip_layers.size();
  sample_params.custom_sigmas = custom_sigmas.empty() ? nullptr : custom_sigmas.data();
  sample_params.custom_sigmas_count = static_cast<int>(custom_sigmas.size());
  sample_params.extra_sample_args = extra_sample_args.empty() ? nullptr : extra_sample_args.c_str();
  high_noise_sample_params.extra_sample_args =
      high_noise_extra_sample_args.empty() ? nullptr : high_noise_extra_sample_args.c_str();
  vae_tiling_params.extra_tiling_args =
      extra_tiling_args.empty() ? nullptr : extra_tiling_args.c_str();

  sd_img_gen_params_t p;
  sd_img_gen_params_init(&p);
  p.loras = lora_views_.empty() ? nullptr : lora_views_.data();
  p.lora_count = static_cast<uint32_t>(lora_views_.size());
  p.prompt = prompt.c_str();
  p.negative_prompt = negative_prompt.c_str();
  p.clip_skip = clip_skip;
  p.ref_image_args = ref_image_args.c_str();
  p.width = resolved_width();
  p.height = resolved_height();
  p.sample_params = sample_params;
  p.strength = strength;
  p.seed = seed;
  p.batch_count = batch_count;
  p.qwen_image_layers = qwen_image_layers;
  p.control_strength = control_strength;
  p.ip_adapter_strength = ip_adapter_strength;
  p.pm_params.id_embed_path = pm_id_embed_path.empty() ? nullptr : pm_id_embed_path.c_str();
  p.pm_params.style_strength = pm_style_strength;
  p.pulid_params.id_embedding_path =
      pulid_id_embedding_path.empty() ? nullptr : pulid_id_embedding_path.c_str();
  p.pulid_params.id_weight = pulid_id_weight;
  p.vae_tiling_params = vae_tiling_params;
  p.cache.mode = cache_mode_from_name(cache_mode);
  // Each mode's threshold goes where the reference keeps it.
  if (cache.mode == sampling::CacheMode::UCache) p.cache.reuse_threshold = cache.ucache.threshold;
  if (cache.mode == sampling::CacheMode::EasyCache) {
    p.cache.reuse_threshold = cache.easycache.threshold;
    p.cache.start_percent = cache.easycache.start;
    p.cache.end_percent = cache.easycache.end;
  } else {
    p.cache.start_percent = cache.ucache.start;
    p.cache.end_percent = cache.ucache.end;
  }
  p.cache.error_decay_rate = cache.ucache.decay;
  p.cache.use_relative_threshold = cache.ucache.relative;
  p.cache.reset_error_on_compute = cache.ucache.reset;
  p.cache.residual_diff_threshold = cache.blocks.threshold;
  p.cache.Fn_compute_blocks = cache.blocks.front_blocks;
  p.cache.Bn_compute_blocks = cache.blocks.back_blocks;
  p.cache.max_warmup_steps = cache.blocks.warmup;
  p.cache.spectrum_w = cache.spectrum.w;
  p.cache.spectrum_m = cache.spectrum.m;
  p.cache.spectrum_lam = cache.spectrum.lam;
  p.cache.spectrum_window_size = cache.spectrum.window;
  p.cache.spectrum_flex_window = cache.spectrum.flex;
  p.cache.spectrum_warmup_steps = cache.spectrum.warmup;
  p.cache.spectrum_stop_percent = cache.spectrum.stop;
  p.cache.scm_mask = scm_mask.empty() ? nullptr : scm_mask.c_str();
  p.cache.scm_policy_dynamic = scm_policy_dynamic;
  p.hires.enabled = hires_enabled;
  p.hires.upscaler = resolved_hires_upscaler;
  p.hires.model_path =
      hires_upscaler_model_path.empty() ? nullptr : hires_upscaler_model_path.c_str();
  p.hires.scale = hires_scale;
  p.hires.target_width = hires_width;
  p.hires.target_height = hires_height;
  p.hires.steps = hires_steps;
  p.hires.denoising_strength = hires_denoising_strength;
  p.hires.upscale_tile_size = hires_upscale_tile_size;
  p.hires.custom_sigmas = hires_custom_sigmas.empty() ? nullptr : hires_custom_sigmas.data();
  p.hires.custom_sigmas_count = static_cast<int>(hires_custom_sigmas.size());
  p.circular_x = circular || circular_x;
  p.circular_y = circular || circular_y;
  return p;
}

sd_vid_gen_params_t GenerationOptions::to_vid_c_params() {
  const sd_img_gen_params_t image = to_c_params();
  sd_vid_gen_params_t v;
  sd_vid_gen_params_init(&v);
  v.loras = image.loras;
  v.lora_count = image.lora_count;
  v.prompt = image.prompt;
  v.negative_prompt = image.negative_prompt;
  v.clip_skip = image.clip_skip;
  v.width = image.width;
  v.height = image.height;
  v.sample_params = image.sample_params;
  v.high_noise_sample_params = high_noise_sample_params;
  v.moe_boundary = moe_boundary;
  v.strength = image.strength;
  v.seed = image.seed;
  v.video_frames = video_frames;
  v.fps = fps;
  v.vace_strength = vace_strength;
  v.vae_tiling_params = image.vae_tiling_params;
  v.cache = image.cache;
  v.hires = image.hires;
  v.circular_x = image.circular_x;
  v.circular_y = image.circular_y;
  return v;
}

}  // namespace sd::cli
