// The "Generation Options" table of sd-cli: what one run generates and how it samples.
#include <fstream>
#include <iterator>
#include <sstream>

#include "cli/args.h"
#include "cli/option_table.h"
#include "tensor/error.h"

namespace sd::cli {

namespace {

// An image side: a positive number of pixels. Unset (-1 in the options) means "from the
// init image, else 512"; 0 or a negative value given on the command line is an error.
Option size_option(std::string short_name, std::string long_name, std::string description,
                   int* target) {
  Option o = int_option(short_name, long_name, std::move(description), target);
  o.apply = [flag = long_name, target](const std::string& text) {
    const int value = parse_int(flag, text);
    SD_CHECK(value > 0, "%s must be a positive number of pixels (a multiple of 8), got %d",
             flag.c_str(), value);
    *target = value;
  };
  return o;
}

std::string sample_method_list() {
  return join_names(SAMPLE_METHOD_COUNT, [](int i) { return sample_method_to_str[i]; });
}
std::string scheduler_list() {
  return join_names(SCHEDULER_COUNT, [](int i) { return scheduler_to_str[i]; });
}
std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r\n\f\v");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r\n\f\v") - first + 1);
}

// "[7,8,9]" or "[7 8 9]": sd.cpp requires the brackets.
std::vector<int> parse_layers(const std::string& flag, const std::string& text) {
  SD_CHECK(text.size() >= 2 && text.front() == '[' && text.back() == ']',
           "%s takes a bracketed list such as [7,8,9], got '%s'", flag.c_str(), text.c_str());
  std::vector<int> layers;
  std::string item;
  for (char c : text.substr(1, text.size() - 2) + ",") {
    if (c == ',' || c == ' ') {
      if (!item.empty()) layers.push_back(parse_int(flag, item));
      item.clear();
    } else {
      item += c;
    }
  }
  return layers;
}

// "14.6,7.8,0" with optional surrounding brackets; appends, as repeated flags do in sd.cpp.
void parse_sigmas(const std::string& flag, std::string text, std::vector<float>& sigmas) {
  if (!text.empty() && text.front() == '[') text.erase(0, 1);
  if (!text.empty() && text.back() == ']') text.pop_back();
  std::stringstream items(text);
  std::string item;
  size_t added = 0;
  while (std::getline(items, item, ',')) {
    item = trim(item);
    if (item.empty()) continue;
    sigmas.push_back(parse_float(flag, item));
    ++added;
  }
  SD_CHECK(added > 0 || trim(text).empty(), "%s: no sigma values in '%s'", flag.c_str(),
           text.c_str());
}

// "X" or "XxY".
template <class T, class Parse>
void parse_pair(const std::string& flag, const std::string& text, T& x, T& y, Parse parse) {
  const auto at = text.find('x');
  if (at == std::string::npos) {
    x = y = parse(flag, text);
  } else {
    x = parse(flag, text.substr(0, at));
    y = parse(flag, text.substr(at + 1));
  }
}

std::string read_text_file(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SD_CHECK(in.good(), "%s: cannot read '%s'", flag.c_str(), path.c_str());
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

Section generation_section(GenerationOptions& o) {
  Section s{"Generation Options", {}};
  auto& v = s.options;
  auto& sample = o.sample_params;
  auto& high_noise = o.high_noise_sample_params;

  v.push_back(text_option("-p", "--prompt", "the prompt to render", &o.prompt));
  v.push_back(text_option("-n", "--negative-prompt", "the negative prompt (default: \"\")",
                          &o.negative_prompt));
  v.push_back(text_option("", "--ad-model", "path to a YOLOv8 detector model for ADetailer",
                          &o.ad_model_path));
  v.push_back(text_option("", "--ad-prompt",
                          "ADetailer prompt; empty: the main prompt ([PROMPT], [SEP] and [SKIP] "
                          "are expanded)",
                          &o.ad_prompt));
  v.push_back(text_option("", "--ad-negative-prompt",
                          "ADetailer negative prompt; empty: the main negative prompt",
                          &o.ad_negative_prompt));
  v.push_back(text_option("", "--extra-ad-args", "extra ADetailer arguments, key=value list",
                          &o.extra_ad_args, ','));
  v.push_back(
      text_option("-i", "--init-img", "path to the init image (img2img)", &o.init_image_path));
  v.push_back(text_option("", "--end-img", "path to the end image (first-last-frame video)",
                          &o.end_image_path));
  v.push_back(text_option("", "--mask", "path to the inpainting mask (white is repainted)",
                          &o.mask_image_path));
  v.push_back(text_option("", "--control-image", "path to the ControlNet control image",
                          &o.control_image_path));
  v.push_back(text_option("", "--ip-adapter-image", "path to the IP-Adapter reference image",
                          &o.ip_adapter_image_path));
  v.push_back(text_option("", "--control-video",
                          "folder of a Wan VACE model's control video frames, read in "
                          "file-name order (00.png, 01.png, ...); -i is then its reference image",
                          &o.control_video_path));
  v.push_back(text_option("", "--pm-id-images-dir", "folder of PhotoMaker identity images",
                          &o.pm_id_images_dir));
  v.push_back(text_option("", "--pm-id-embed-path", "path to a PhotoMaker v2 identity embedding",
                          &o.pm_id_embed_path));
  v.push_back(text_option("", "--pulid-id-embedding", "path to a PuLID identity embedding",
                          &o.pulid_id_embedding_path));
  v.push_back(text_option("", "--hires-upscaler",
                          "highres-fix upscaler: Lanczos, Nearest, Latent, Latent (nearest), "
                          "Latent (nearest-exact), Latent (antialiased), Latent (bicubic), Latent "
                          "(bicubic antialiased), or a model name in --hires-upscalers-dir "
                          "(default: Latent)",
                          &o.hires_upscaler));
  v.push_back(text_option("", "--extra-sample-args",
                          "extra sampler, scheduler and guidance arguments, key=value list",
                          &o.extra_sample_args, ','));
  v.push_back(text_option("", "--extra-tiling-args", "extra VAE tiling arguments, key=value list",
                          &o.extra_tiling_args, ','));
  v.push_back(text_option("", "--ref-image-args",
                          "how reference images are prepared, key=value list (empty: from the "
                          "model)",
                          &o.ref_image_args, ','));

  v.push_back(size_option("-H", "--height", "image height in pixels (default: 512)", &o.height));
  v.push_back(size_option("-W", "--width", "image width in pixels (default: 512)", &o.width));
  v.push_back(
      int_option("", "--steps", "number of sampling steps (default: 20)", &sample.sample_steps));
  v.push_back(int_option("", "--high-noise-steps",
                         "(high noise) sampling steps of the high-noise expert, before and on top "
                         "of --steps (default: 20, as the reference; <= 0: the steps whose "
                         "sigma is at or above --moe-boundary, within --steps)",
                         &high_noise.sample_steps));
  v.push_back(int_option("", "--clip-skip",
                         "CLIP layers to skip from the end; 1 skips none (default: -1, the "
                         "model's: 1 for SD 1.x, 2 for SD 2.x)",
                         &o.clip_skip));
  v.push_back(int_option("-b", "--batch-count", "number of images to generate (default: 1)",
                         &o.batch_count));
  v.push_back(int_option("", "--qwen-image-layers",
                         "Qwen-Image-Layered layers; it outputs layers + 1 images (default: 3)",
                         &o.qwen_image_layers));
  v.push_back(int_option("", "--video-frames", "video frames (default: 1)", &o.video_frames));
  v.push_back(int_option("", "--fps", "video frames per second (default: 16)", &o.fps));
  v.push_back(int_option("", "--timestep-shift",
                         "timestep shift for NitroFusion models, in [0, 1000] (default: 0)",
                         &sample.shifted_timestep));
  v.push_back(int_option("", "--upscale-repeats", "times to run the ESRGAN upscaler (default: 1)",
                         &o.upscale_repeats));
  v.push_back(int_option("", "--upscale-tile-size", "ESRGAN tile size (default: 128)",
                         &o.upscale_tile_size));
  v.push_back(int_option("", "--hires-width",
                         "highres-fix target width; 0 uses --hires-scale (default: 0)",
                         &o.hires_width));
  v.push_back(int_option("", "--hires-height",
                         "highres-fix target height; 0 uses --hires-scale (default: 0)",
                         &o.hires_height));
  v.push_back(int_option("", "--hires-steps",
                         "highres-fix second-pass steps; 0 reuses --steps (default: 0)",
                         &o.hires_steps));
  v.push_back(int_option("", "--hires-upscale-tile-size",
                         "highres-fix model upscaler tile size (default: 128)",
                         &o.hires_upscale_tile_size));

  v.push_back(float_option("", "--cfg-scale", "classifier-free guidance scale (default: 7.0)",
                           &sample.guidance.txt_cfg));
  v.push_back(float_option("", "--img-cfg-scale",
                           "image guidance scale of instruct-pix2pix and inpainting models "
                           "(default: 1, no image guidance)",
                           &sample.guidance.img_cfg));
  v.push_back(float_option("", "--guidance",
                           "distilled guidance scale, for models with a guidance input (default: "
                           "3.5)",
                           &sample.guidance.distilled_guidance));
  v.push_back(float_option("", "--slg-scale",
                           "skip-layer guidance scale (SD3/SD3.5); 0 disables it (default: 0)",
                           &sample.guidance.slg.scale));
  v.push_back(float_option("", "--skip-layer-start",
                           "fraction of the steps where skip-layer guidance starts (default: 0.01)",
                           &sample.guidance.slg.layer_start));
  v.push_back(float_option("", "--skip-layer-end",
                           "fraction of the steps where skip-layer guidance ends (default: 0.2)",
                           &sample.guidance.slg.layer_end));
  v.push_back(float_option("", "--eta",
                           "noise multiplier of stochastic samplers (default: the sampler's: 0 "
                           "for ddim_trailing, tcd, res_multistep, res_2s; 1 for euler_a, er_sde, "
                           "dpm++2s_a, dpm++2m_sde, dpm++2m_sde_bt)",
                           &sample.eta));
  v.push_back(float_option("", "--flow-shift",
                           "shift of flow models such as SD3.x or Wan (default: the model's)",
                           &sample.flow_shift));
  v.push_back(float_option("", "--high-noise-cfg-scale",
                           "(high noise) classifier-free guidance scale (default: 7.0)",
                           &high_noise.guidance.txt_cfg));
  v.push_back(float_option("", "--high-noise-img-cfg-scale",
                           "(high noise) image guidance scale (default: same as --cfg-scale)",
                           &high_noise.guidance.img_cfg));
  v.push_back(float_option("", "--high-noise-guidance",
                           "(high noise) distilled guidance scale (default: 3.5)",
                           &high_noise.guidance.distilled_guidance));
  v.push_back(float_option("", "--high-noise-slg-scale",
                           "(high noise) skip-layer guidance scale (default: 0)",
                           &high_noise.guidance.slg.scale));
  v.push_back(float_option("", "--high-noise-skip-layer-start",
                           "(high noise) skip-layer guidance start (default: 0.01)",
                           &high_noise.guidance.slg.layer_start));
  v.push_back(float_option("", "--high-noise-skip-layer-end",
                           "(high noise) skip-layer guidance end (default: 0.2)",
                           &high_noise.guidance.slg.layer_end));
  v.push_back(float_option("", "--high-noise-eta",
                           "(high noise) noise multiplier (default: the sampler's)",
                           &high_noise.eta));
  v.push_back(float_option("", "--strength",
                           "img2img strength: how much of the init image is replaced, in [0, 1] "
                           "(default: 0.75)",
                           &o.strength));
  v.push_back(float_option("", "--pm-style-strength", "PhotoMaker style strength (default: 20)",
                           &o.pm_style_strength));
  v.push_back(float_option("", "--pulid-id-weight", "strength of the PuLID identity (default: 1)",
                           &o.pulid_id_weight));
  v.push_back(float_option("", "--control-strength", "ControlNet strength (default: 0.9)",
                           &o.control_strength));
  v.push_back(float_option("", "--ip-adapter-strength", "IP-Adapter strength (default: 1.0)",
                           &o.ip_adapter_strength));
  v.push_back(float_option("", "--moe-boundary",
                           "timestep boundary of Wan2.2 MoE models, used when --high-noise-steps "
                           "is -1 (default: 0.875)",
                           &o.moe_boundary));
  v.push_back(
      float_option("", "--vace-strength", "Wan VACE strength (default: 1)", &o.vace_strength));
  v.push_back(float_option("", "--vae-tile-overlap",
                           "VAE tile overlap, a fraction of the tile size (default: 0.5)",
                           &o.vae_tiling_params.target_overlap));
  v.push_back(float_option("", "--hires-scale",
                           "highres-fix scale when no target size is given (default: 2.0)",
                           &o.hires_scale));
  v.push_back(float_option("", "--hires-denoising-strength",
                           "highres-fix second-pass denoising strength (default: 0.7)",
                           &o.hires_denoising_strength));

  v.push_back(switch_option("", "--increase-ref-index",
                            "deprecated: --ref-image-args ref_index_mode=increase",
                            &o.increase_ref_index));
  v.push_back(switch_option("", "--disable-auto-resize-ref-image",
                            "deprecated: --ref-image-args resize_before_vae=0",
                            &o.auto_resize_ref_image, false));
  v.push_back(
      switch_option("", "--circular", "tileable output: wrap padding on both axes", &o.circular));
  v.push_back(switch_option("", "--circularx", "tileable output: wrap padding horizontally",
                            &o.circular_x));
  v.push_back(
      switch_option("", "--circulary", "tileable output: wrap padding vertically", &o.circular_y));
  v.push_back(switch_option("", "--disable-image-metadata",
                            "do not embed the generation parameters in the image files",
                            &o.embed_image_metadata, false));
  v.push_back(switch_option("", "--vae-tiling", "decode in tiles to save memory",
                            &o.vae_tiling_params.enabled));
  v.push_back(switch_option("", "--temporal-tiling", "tile the LTX video VAE in time too",
                            &o.vae_tiling_params.temporal_tiling));
  v.push_back(switch_option("", "--hires", "enable the highres fix", &o.hires_enabled));

  v.push_back(
      other_option("-s", "--seed", "RNG seed; < 0 picks a random one (default: 42)",
                   [&o](const std::string& value) { o.seed = parse_int64("--seed", value); }));
  v.push_back(other_option("", "--sampling-method",
                           "sampling method, one of [" + sample_method_list() +
                               "] (default: euler for Flux/SD3/Wan, euler_a otherwise)",
                           [&sample](const std::string& value) {
                             sample.sample_method = str_to_sample_method(value.c_str());
                             SD_CHECK(sample.sample_method != SAMPLE_METHOD_COUNT,
                                      "unknown sampling method '%s'; valid methods: %s",
                                      value.c_str(), sample_method_list().c_str());
                           }));
  v.push_back(other_option("", "--high-noise-sampling-method",
                           "(high noise) sampling method, one of [" + sample_method_list() + "]",
                           [&high_noise](const std::string& value) {
                             high_noise.sample_method = str_to_sample_method(value.c_str());
                             SD_CHECK(high_noise.sample_method != SAMPLE_METHOD_COUNT,
                                      "unknown high-noise sampling method '%s'; valid methods: %s",
                                      value.c_str(), sample_method_list().c_str());
                           }));
  v.push_back(other_option("", "--scheduler",
                           "sigma schedule, one of [" + scheduler_list() +
                               "] (normal is an alias of discrete; default: the model's)",
                           [&sample](const std::string& value) {
                             sample.scheduler = str_to_scheduler(value.c_str());
                             SD_CHECK(
                                 sample.scheduler != SCHEDULER_COUNT,
                                 "unknown scheduler '%s'; valid schedulers: %s (normal = discrete)",
                                 value.c_str(), scheduler_list().c_str());
                           }));
  v.push_back(other_option(
      "", "--sigmas",
      "custom sigmas, comma-separated (e.g. \"14.61,7.8,3.5,0.0\"); replace "
      "the scheduler",
      [&o](const std::string& value) { parse_sigmas("--sigmas", value, o.custom_sigmas); }));
  v.push_back(other_option("", "--hires-sigmas",
                           "custom sigmas of the highres-fix second pass, comma-separated",
                           [&o](const std::string& value) {
                             parse_sigmas("--hires-sigmas", value, o.hires_custom_sigmas);
                           }));
  v.push_back(other_option(
      "", "--skip-layers", "layers skipped by skip-layer guidance (default: [7,8,9])",
      [&o](const std::string& value) { o.skip_layers = parse_layers("--skip-layers", value); }));
  v.push_back(other_option("", "--high-noise-skip-layers",
                           "(high noise) layers skipped by skip-layer guidance (default: [7,8,9])",
                           [&o](const std::string& value) {
                             o.high_noise_skip_layers =
                                 parse_layers("--high-noise-skip-layers", value);
                           }));
  v.push_back(other_option("-r", "--ref-image",
                           "reference image, e.g. for Flux Kontext (repeatable)",
                           [&o](const std::string& value) { o.ref_image_paths.push_back(value); }));
  v.push_back(other_option("", "--ref-video", "folder of reference video frames (repeatable)",
                           [&o](const std::string& value) { o.ref_video_paths.push_back(value); }));
  v.push_back(other_option(
      "", "--ref-video-audio", "WAV soundtrack of the --ref-video of the same index (repeatable)",
      [&o](const std::string& value) { o.ref_video_audio_paths.push_back(value); }));
  v.push_back(other_option("", "--ref-audio", "reference WAV audio (repeatable)",
                           [&o](const std::string& value) { o.ref_audio_paths.push_back(value); }));
  v.push_back(
      other_option("", "--cache-mode",
                   "step caching: ucache (UNet), easycache, dbcache, taylorseer, cache-dit (DiT), "
                   "spectrum (both); see docs/caching.md",
                   [&o](const std::string& value) {
                     sampling::parse_cache_mode(value);  // throws, listing the modes
                     o.cache_mode = value;
                   }));
  v.push_back(other_option("", "--cache-option", "step-cache parameters, key=value list",
                           [&o](const std::string& value) { o.cache_option = value; }));
  v.push_back(other_option("", "--scm-mask",
                           "cache-dit step mask, comma-separated 0/1; accepted for "
                           "compatibility, no effect (as in the reference's sampler)",
                           [&o](const std::string& value) {
                             for (size_t i = 0; i < value.size(); ++i)
                               SD_CHECK(i % 2 == 0 ? (value[i] == '0' || value[i] == '1')
                                                   : value[i] == ',',
                                        "--scm-mask '%s': expected 0s and 1s separated by "
                                        "commas, e.g. 1,1,0,0,1",
                                        value.c_str());
                             o.scm_mask = value;
                           }));
  v.push_back(other_option(
      "", "--scm-policy", "cache-dit mask policy: dynamic (default) or static; no effect",
      [&o](const std::string& value) {
        SD_CHECK(value == "dynamic" || value == "static",
                 "unknown scm policy '%s'; valid: dynamic, static", value.c_str());
        o.scm_policy_dynamic = value == "dynamic";
      }));
  v.push_back(other_option("", "--vae-tile-size", "VAE tile size, [X]x[Y] (default: 32x32)",
                           [&o](const std::string& value) {
                             parse_pair("--vae-tile-size", value, o.vae_tiling_params.tile_size_x,
                                        o.vae_tiling_params.tile_size_y, parse_int);
                           }));
  v.push_back(other_option(
      "", "--vae-relative-tile-size",
      "VAE tile size relative to the image, [X]x[Y]: below 1 a fraction of the image, from 1 up "
      "tiles per axis (overrides --vae-tile-size)",
      [&o](const std::string& value) {
        parse_pair("--vae-relative-tile-size", value, o.vae_tiling_params.rel_size_x,
                   o.vae_tiling_params.rel_size_y, parse_float);
      }));
  v.push_back(other_option(
      "", "--prompt-file", "read the prompt from this file",
      [&o](const std::string& value) { o.prompt = read_text_file("--prompt-file", value); }));
  v.push_back(other_option("", "--negative-prompt-file", "read the negative prompt from this file",
                           [&o](const std::string& value) {
                             o.negative_prompt = read_text_file("--negative-prompt-file", value);
                           }));
  return s;
}

}  // namespace sd::cli
