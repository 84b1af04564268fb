#include "cli/image_params.h"

#include <iomanip>
#include <sstream>

#include <nlohmann/json.hpp>

namespace sd::cli {

const char* const kGeneratorName = "stable-diffusion-engine";

namespace {

using json = nlohmann::json;

std::string file_name(const std::string& path) {
  const auto slash = path.find_last_of("/\\");
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

const char* safe(const char* s) {
  return s ? s : "";
}

json sampling_json(const sd_sample_params_t& p, const std::vector<int>& skip_layers,
                   const std::vector<float>* custom_sigmas) {
  json sampling = {
      {"steps", p.sample_steps},
      {"eta", p.eta},
      {"shifted_timestep", p.shifted_timestep},
      {"flow_shift", p.flow_shift},
      {"extra_sample_args", safe(p.extra_sample_args)},
      {"guidance",
       {
           {"txt_cfg", p.guidance.txt_cfg},
           {"img_cfg", p.guidance.img_cfg},
           {"distilled_guidance", p.guidance.distilled_guidance},
           {"slg",
            {
                {"scale", p.guidance.slg.scale},
                {"layers", skip_layers},
                {"start", p.guidance.slg.layer_start},
                {"end", p.guidance.slg.layer_end},
            }},
       }},
  };
  if (p.sample_method != SAMPLE_METHOD_COUNT) {
    sampling["method"] = sd_sample_method_name(p.sample_method);
  }
  if (p.scheduler != SCHEDULER_COUNT) sampling["scheduler"] = sd_scheduler_name(p.scheduler);
  if (custom_sigmas) sampling["custom_sigmas"] = *custom_sigmas;
  return sampling;
}

}  // namespace

std::string image_parameters_json(const ContextOptions& c, const GenerationOptions& g, int64_t seed,
                                  Mode mode) {
  json root;
  root["schema"] = "sdcpp.image.params/v1";
  root["mode"] = mode == Mode::VidGen      ? "vid_gen"
                 : mode == Mode::Adetailer ? "adetailer"
                                           : "img_gen";
  root["generator"] = {
      {"name", kGeneratorName}, {"version", safe(sd_version())}, {"commit", safe(sd_commit())}};
  root["seed"] = seed;
  root["width"] = g.resolved_width();
  root["height"] = g.resolved_height();
  root["prompt"] = {{"positive", g.prompt}, {"negative", g.negative_prompt}};
  if (!g.ad_model_path.empty()) {
    root["adetailer"] = {{"model", file_name(g.ad_model_path)},
                         {"prompt", g.ad_prompt},
                         {"negative_prompt", g.ad_negative_prompt},
                         {"extra_args", g.extra_ad_args}};
  }
  root["sampling"] = sampling_json(g.sample_params, g.skip_layers, &g.custom_sigmas);

  json models = json::object();
  const std::pair<const char*, const std::string*> model_files[] = {
      {"model", &c.model_path},
      {"clip_l", &c.clip_l_path},
      {"clip_g", &c.clip_g_path},
      {"clip_vision", &c.clip_vision_path},
      {"t5xxl", &c.t5xxl_path},
      {"llm", &c.llm_path},
      {"llm_vision", &c.llm_vision_path},
      {"diffusion_model", &c.diffusion_model_path},
      {"high_noise_diffusion_model", &c.high_noise_diffusion_model_path},
      {"uncond_diffusion_model", &c.uncond_diffusion_model_path},
      {"vae", &c.vae_path},
      {"taesd", &c.taesd_path},
      {"control_net", &c.control_net_path},
  };
  for (const auto& [key, path] : model_files) {
    if (!path->empty()) models[key] = file_name(*path);
  }
  root["models"] = std::move(models);

  root["clip_skip"] = g.clip_skip;
  root["strength"] = g.strength;
  root["control_strength"] = g.control_strength;
  root["ip_adapter_strength"] = g.ip_adapter_strength;
  root["auto_resize_ref_image"] = g.auto_resize_ref_image;
  root["increase_ref_index"] = g.increase_ref_index;
  if (mode == Mode::VidGen) {
    root["video"] = {{"frame_count", g.video_frames}, {"fps", g.fps}};
    root["moe_boundary"] = g.moe_boundary;
    root["vace_strength"] = g.vace_strength;
    root["high_noise_sampling"] =
        sampling_json(g.high_noise_sample_params, g.high_noise_skip_layers, nullptr);
  }
  root["rng"] = sd_rng_type_name(c.rng_type);
  if (c.sampler_rng_type != RNG_TYPE_COUNT)
    root["sampler_rng"] = sd_rng_type_name(c.sampler_rng_type);

  json loras = json::array();
  for (const auto& [path, multiplier] : g.lora_map) {
    loras.push_back(
        {{"name", file_name(path)}, {"multiplier", multiplier}, {"is_high_noise", false}});
  }
  for (const auto& [path, multiplier] : g.high_noise_lora_map) {
    loras.push_back(
        {{"name", file_name(path)}, {"multiplier", multiplier}, {"is_high_noise", true}});
  }
  if (!loras.empty()) root["loras"] = std::move(loras);

  if (g.hires_enabled) {
    root["hires"] = {
        {"enabled", g.hires_enabled},
        {"upscaler", g.hires_upscaler},
        {"model",
         g.hires_upscaler_model_path.empty() ? "" : file_name(g.hires_upscaler_model_path)},
        {"scale", g.hires_scale},
        {"target_width", g.hires_width},
        {"target_height", g.hires_height},
        {"steps", g.hires_steps},
        {"denoising_strength", g.hires_denoising_strength},
        {"custom_sigmas", g.hires_custom_sigmas},
        {"upscale_tile_size", g.hires_upscale_tile_size},
    };
  }

  if (!g.cache_mode.empty()) {
    const bool easy = g.cache.mode == sampling::CacheMode::EasyCache;
    root["cache"] = {
        {"requested_mode", g.cache_mode},
        {"requested_option", g.cache_option},
        {"scm_mask", g.scm_mask},
        {"scm_policy_dynamic", g.scm_policy_dynamic},
        {"reuse_threshold", easy ? g.cache.easycache.threshold : g.cache.ucache.threshold},
        {"start_percent", easy ? g.cache.easycache.start : g.cache.ucache.start},
        {"end_percent", easy ? g.cache.easycache.end : g.cache.ucache.end},
    };
  }

  const auto& tiling = g.vae_tiling_params;
  if (tiling.enabled || tiling.temporal_tiling || !g.extra_tiling_args.empty()) {
    root["vae_tiling"] = {
        {"enabled", tiling.enabled},
        {"temporal_tiling", tiling.temporal_tiling},
        {"tile_size_x", tiling.tile_size_x},
        {"tile_size_y", tiling.tile_size_y},
        {"target_overlap", tiling.target_overlap},
        {"rel_size_x", tiling.rel_size_x},
        {"rel_size_y", tiling.rel_size_y},
        {"extra_tiling_args", g.extra_tiling_args},
    };
  }
  return root.dump();
}

std::string image_parameters(const ContextOptions& c, const GenerationOptions& g, int64_t seed,
                             Mode mode) {
  const auto& sample = g.sample_params;
  std::string s = (g.prompt_with_lora.empty() ? g.prompt : g.prompt_with_lora) + "\n";
  if (!g.negative_prompt.empty()) s += "Negative prompt: " + g.negative_prompt + "\n";
  s += "Steps: " + std::to_string(sample.sample_steps) + ", ";
  s += "CFG scale: " + std::to_string(sample.guidance.txt_cfg) + ", ";
  if (sample.guidance.slg.scale != 0 && !g.skip_layers.empty()) {
    s += "SLG scale: " + std::to_string(sample.guidance.slg.scale) + ", ";
    s += "Skip layers: [";
    for (int layer : g.skip_layers) s += std::to_string(layer) + ", ";
    s += "], ";
    s += "Skip layer start: " + std::to_string(sample.guidance.slg.layer_start) + ", ";
    s += "Skip layer end: " + std::to_string(sample.guidance.slg.layer_end) + ", ";
  }
  s += "Guidance: " + std::to_string(sample.guidance.distilled_guidance) + ", ";
  s += "Eta: " + std::to_string(sample.eta) + ", ";
  if (!g.extra_sample_args.empty()) s += "Extra sample args: " + g.extra_sample_args + ", ";
  if (!g.ad_model_path.empty()) {
    s += "ADetailer model: " + file_name(g.ad_model_path) + ", ";
    if (!g.ad_prompt.empty()) s += "ADetailer prompt: " + g.ad_prompt + ", ";
    if (!g.ad_negative_prompt.empty()) {
      s += "ADetailer negative prompt: " + g.ad_negative_prompt + ", ";
    }
    if (!g.extra_ad_args.empty()) s += "ADetailer args: " + g.extra_ad_args + ", ";
  }
  s += "Seed: " + std::to_string(seed) + ", ";
  s += "Size: " + std::to_string(g.resolved_width()) + "x" + std::to_string(g.resolved_height()) +
       ", ";
  s += "Model: " + file_name(c.model_path) + ", ";
  s += "RNG: " + std::string(sd_rng_type_name(c.rng_type)) + ", ";
  if (c.sampler_rng_type != RNG_TYPE_COUNT) {
    s += "Sampler RNG: " + std::string(sd_rng_type_name(c.sampler_rng_type)) + ", ";
  }
  s += "Sampler: " + std::string(sd_sample_method_name(sample.sample_method));
  if (!g.custom_sigmas.empty()) {
    s += ", Custom Sigmas: [";
    for (size_t i = 0; i < g.custom_sigmas.size(); ++i) {
      std::ostringstream value;
      value << std::fixed << std::setprecision(4) << g.custom_sigmas[i];
      s += value.str() + (i + 1 == g.custom_sigmas.size() ? "" : ", ");
    }
    s += "]";
  } else if (sample.scheduler != SCHEDULER_COUNT) {
    s += " " + std::string(sd_scheduler_name(sample.scheduler));
  }
  s += ", ";
  for (const std::string* te :
       {&c.clip_l_path, &c.clip_g_path, &c.t5xxl_path, &c.llm_path, &c.llm_vision_path}) {
    if (!te->empty()) s += "TE: " + file_name(*te) + ", ";
  }
  if (!c.diffusion_model_path.empty()) s += "Unet: " + file_name(c.diffusion_model_path) + ", ";
  if (!c.uncond_diffusion_model_path.empty()) {
    s += "Uncond Unet: " + file_name(c.uncond_diffusion_model_path) + ", ";
  }
  if (!c.vae_path.empty()) s += "VAE: " + file_name(c.vae_path) + ", ";
  if (g.clip_skip != -1) s += "Clip skip: " + std::to_string(g.clip_skip) + ", ";
  if (g.hires_enabled) {
    s += "Hires upscale: " + g.hires_upscaler + ", ";
    s += "Hires scale: " + std::to_string(g.hires_scale) + ", ";
    s += "Hires resize: " + std::to_string(g.hires_width) + "x" + std::to_string(g.hires_height) +
         ", ";
    s += "Hires steps: " + std::to_string(g.hires_steps) + ", ";
    s += "Denoising strength: " + std::to_string(g.hires_denoising_strength) + ", ";
    if (!g.hires_custom_sigmas.empty()) {
      s += "Hires custom sigmas: [";
      for (size_t i = 0; i < g.hires_custom_sigmas.size(); ++i) {
        std::ostringstream value;
        value << g.hires_custom_sigmas[i];
        s += value.str() + (i + 1 == g.hires_custom_sigmas.size() ? "" : ", ");
      }
      s += "], ";
    }
  }
  s += std::string("Version: ") + kGeneratorName;
  s += ", SDCPP: " + image_parameters_json(c, g, seed, mode);
  return s;
}

}  // namespace sd::cli
