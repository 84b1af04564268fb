// sd-cli's command line: sd.cpp's flags (names, short forms, meanings, defaults), parsed
// into three groups as its -h shows them (CLI, Context, Generation options), then resolved
// (defaults that depend on other flags, files named in the prompt) and validated, and
// finally viewed as the C API's sd_ctx_params_t and sd_img_gen_params_t.
//
// Errors are sd::Error exceptions whose message names the flag and the fix; main prints
// them and exits non-zero. Unlike sd.cpp, a malformed number ("--steps 2x") is an error,
// not a crash or a silently truncated value.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cli/option_table.h"
#include "sampling/step_cache.h"
#include "stable-diffusion.h"

namespace sd::cli {

// sd.cpp's run modes, in its order.
enum class Mode { ImgGen, Adetailer, VidGen, Convert, Upscale, Metadata, Tokenize };
const char* mode_name(Mode mode);

struct CliOptions {
  Mode mode = Mode::ImgGen;
  std::string output_path = "output.png";  // "output.gguf" in convert mode
  int output_begin_idx = -1;               // < 0: 0
  std::string image_path;                  // metadata mode
  std::string tokenizer_path;              // tokenize mode: a tokenizer.json
  std::string metadata_format = "text";
  bool verbose = false;
  bool color = false;
  bool canny = false;
  bool convert_name = false;
  preview_t preview_method = PREVIEW_NONE;
  int preview_interval = 1;
  std::string preview_path = "preview.png";
  int preview_fps = 16;  // a clip's previews (set from --fps)
  bool taesd_preview_only = false;
  bool preview_noisy = false;
  bool metadata_raw = false;
  bool metadata_brief = false;
  bool metadata_all = false;
  std::string imatrix_out;
  std::vector<std::string> imatrix_in;
  // Flags that end parsing with an answer rather than a run.
  bool help = false;
  bool version = false;
  bool list_devices = false;
};

struct ContextOptions {
  int n_threads = -1;  // <= 0: physical cores
  std::string model_path;
  std::string clip_l_path;
  std::string clip_g_path;
  std::string clip_vision_path;
  std::string t5xxl_path;
  std::string llm_path;
  std::string llm_vision_path;
  std::string diffusion_model_path;
  std::string high_noise_diffusion_model_path;
  std::string uncond_diffusion_model_path;
  std::string embeddings_connectors_path;
  std::string vae_path;
  std::string vae_format = "auto";
  std::string audio_vae_path;
  std::string taesd_path;
  std::string esrgan_path;
  std::string control_net_path;
  std::string ip_adapter_path;
  std::string motion_module_path;
  std::string embedding_dir;
  std::string photo_maker_path;
  std::string pulid_weights_path;
  std::string tensor_type_rules;
  std::string lora_model_dir = ".";
  bool confine_model_dirs = false;  // see io/folder_lookup.h
  std::string hires_upscalers_dir;
  std::string model_args;
  std::string backend;
  std::string params_backend;
  std::string split_mode;
  std::string rpc_servers;
  std::string max_vram = "0";
  sd_type_t wtype = SD_TYPE_COUNT;
  rng_type_t rng_type = CUDA_RNG;
  rng_type_t sampler_rng_type = RNG_TYPE_COUNT;
  prediction_t prediction = PREDICTION_COUNT;
  lora_apply_mode_t lora_apply_mode = LORA_APPLY_AUTO;
  bool stream_layers = false;
  bool eager_load = false;
  bool quantize_convs = false;
  bool auto_fit = false;
  bool force_sdxl_vae_conv_scale = false;
  bool offload_to_cpu = false;
  bool enable_mmap = true;  // --mmap is the default; --no-mmap reads weights into memory
  bool disable_mmap = false;
  bool control_net_cpu = false;
  bool clip_on_cpu = false;
  bool vae_on_cpu = false;
  bool flash_attn = false;
  bool diffusion_flash_attn = false;
  bool diffusion_conv_direct = false;
  bool vae_conv_direct = false;

  // Filled by resolve().
  std::map<std::string, std::string> embeddings;  // trigger word -> file
  std::string effective_backend;                  // backend with the *-on-cpu rewrites
  std::string effective_params_backend;           // params_backend with --offload-to-cpu

  // A view into this object: valid while it lives and is not modified.
  sd_ctx_params_t to_c_params(bool taesd_preview_only);

 private:
  std::vector<sd_embedding_t> embedding_views_;
};

struct GenerationOptions {
  GenerationOptions();

  std::string prompt;
  std::string negative_prompt;
  std::string ad_model_path;
  std::string ad_prompt;
  std::string ad_negative_prompt;
  std::string extra_ad_args;
  int clip_skip = -1;
  int width = -1;  // <= 0: from the init image, else 512
  int height = -1;
  int batch_count = 1;
  int qwen_image_layers = 3;
  int64_t seed = 42;  // < 0: random
  float strength = 0.75f;
  float control_strength = 0.9f;
  float ip_adapter_strength = 1.0f;
  bool auto_resize_ref_image = true;
  bool increase_ref_index = false;
  bool embed_image_metadata = true;

  std::string init_image_path;
  std::string end_image_path;
  std::string mask_image_path;
  std::string control_image_path;
  std::string ip_adapter_image_path;
  std::vector<std::string> ref_image_paths;
  std::vector<std::string> ref_video_paths;
  std::vector<std::string> ref_video_audio_paths;
  std::vector<std::string> ref_audio_paths;
  std::string control_video_path;

  sd_sample_params_t sample_params;
  sd_sample_params_t high_noise_sample_params;
  std::string extra_sample_args;
  std::string high_noise_extra_sample_args;
  std::vector<int> skip_layers = {7, 8, 9};
  std::vector<int> high_noise_skip_layers = {7, 8, 9};
  std::vector<float> custom_sigmas;

  std::string cache_mode;
  std::string cache_option;
  sampling::CacheOptions cache;  // parsed from the two above
  std::string scm_mask;
  bool scm_policy_dynamic = true;

  float moe_boundary = 0.875f;
  int video_frames = 1;
  int fps = 16;
  float vace_strength = 1.f;
  sd_tiling_params_t vae_tiling_params = {false, false, 0, 0, 0.5f, 0.0f, 0.0f, nullptr};
  std::string extra_tiling_args;
  std::string ref_image_args;

  std::string pm_id_images_dir;
  std::string pm_id_embed_path;
  float pm_style_strength = 20.f;
  std::string pulid_id_embedding_path;
  float pulid_id_weight = 1.0f;

  int upscale_repeats = 1;
  int upscale_tile_size = 128;

  bool circular = false;
  bool circular_x = false;
  bool circular_y = false;

  bool hires_enabled = false;
  std::string hires_upscaler = "Latent";
  int hires_width = 0;
  int hires_height = 0;
  int hires_steps = 0;
  float hires_scale = 2.f;
  float hires_denoising_strength = 0.7f;
  int hires_upscale_tile_size = 128;
  std::vector<float> hires_custom_sigmas;

  // Filled by resolve().
  std::string prompt_with_lora;           // the prompt as given, <lora:...> tags included
  std::map<std::string, float> lora_map;  // file -> multiplier
  std::map<std::string, float> high_noise_lora_map;  // "<lora:|high_noise|name:m>"
  sd_hires_upscaler_t resolved_hires_upscaler = SD_HIRES_UPSCALER_LATENT;
  std::string hires_upscaler_model_path;

  bool size_is_set() const { return width > 0 && height > 0; }
  int resolved_width() const { return width > 0 ? width : 512; }
  int resolved_height() const { return height > 0 ? height : 512; }

  // A view into this object (images are left empty: the caller sets them); valid while
  // it lives and is not modified.
  sd_img_gen_params_t to_c_params();
  // The same for -M vid_gen (input images and frames are left empty too).
  sd_vid_gen_params_t to_vid_c_params();

 private:
  std::vector<sd_lora_t> lora_views_;
};

struct Arguments {
  CliOptions cli;
  ContextOptions context;
  GenerationOptions generation;
};

// Parses argv; stops early at -h and --version (their flags are set). `extra` holds the
// sections of a program built on these flags (sd-server's listening options), tried after
// sd-cli's own. Throws sd::Error for an unknown flag, a missing or malformed value, an
// unknown name.
Arguments parse_arguments(int argc, const char* const* argv,
                          const std::vector<Section>& extra = {});

// Defaults that depend on other flags, <lora:...> tags, embeddings, backend rewrites; then
// the checks sd.cpp makes plus ours (sizes multiple of 8, input files exist). Throws
// sd::Error naming the flag.
void resolve_and_validate(Arguments& args);

// What resolve_and_validate does for the generation options alone, for a program that
// takes them again per request (sd-server). <lora:...> tags are looked up only when
// `context.lora_model_dir` is set.
void resolve_and_validate_generation(GenerationOptions& generation, const ContextOptions& context,
                                     Mode mode);

// The full -h text: every flag, grouped and wrapped like sd.cpp's, then `extra`'s.
std::string usage(const std::string& program, const std::vector<Section>& extra = {});

}  // namespace sd::cli
