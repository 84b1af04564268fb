// The option tables of sd-cli and the loop that applies them. Each table lists one -h
// section; within a section -h prints string, int, float, switch and other options in
// that order, as sd.cpp does, so its users find flags where they expect them.
#include "cli/args.h"

#include "api/convert.h"
#include "cli/option_table.h"
#include "tensor/dtype.h"
#include "tensor/error.h"

namespace sd::cli {

// The generation table is long; it lives in args_generation.cpp.
Section generation_section(GenerationOptions& o);

namespace {

constexpr const char* kModeNames[] = {"img_gen", "adetailer", "vid_gen", "convert",
                                      "upscale", "metadata",  "tokenize"};
constexpr int kModeCount = sizeof(kModeNames) / sizeof(kModeNames[0]);

std::string rng_list() {
  return join_names(RNG_TYPE_COUNT, [](int i) { return sd_rng_type_name(rng_type_t(i)); });
}
std::string prediction_list() {
  return join_names(PREDICTION_COUNT, [](int i) { return sd_prediction_name(prediction_t(i)); });
}
std::string preview_list() {
  return join_names(PREVIEW_COUNT, [](int i) { return sd_preview_name(preview_t(i)); });
}
std::string lora_apply_mode_list() {
  return join_names(LORA_APPLY_MODE_COUNT,
                    [](int i) { return sd_lora_apply_mode_name(lora_apply_mode_t(i)); });
}
std::string mode_list() {
  return join_names(kModeCount, [](int i) { return kModeNames[i]; });
}

// sd.cpp accepts its exact type names ("q4_K"); any letter case and every type convert
// writes are accepted too.
sd_type_t parse_type(const std::string& text) {
  const sd_type_t exact = str_to_sd_type(text.c_str());
  if (exact != SD_TYPE_COUNT) return exact;
  if (const auto dtype = dtype_from_name(text)) {
    return static_cast<sd_type_t>(dtype_info(*dtype).gguf_id);
  }
  fail("unknown type '%s'; valid types: %s", text.c_str(), api::convert_type_list().c_str());
}

Section cli_section(CliOptions& o) {
  Section s{"CLI Options", {}};
  auto& v = s.options;
  v.push_back(text_option("-o", "--output",
                          "path of the result image. printf-style %d sequences number the "
                          "images of a batch (e.g. output_%03d.png) (default: ./output.png)",
                          &o.output_path));
  v.push_back(text_option("", "--image", "image to inspect (metadata mode)", &o.image_path));
  v.push_back(text_option("", "--tokenizer",
                          "tokenizer.json whose ids -p becomes (tokenize mode; default: "
                          "SD_QWEN_TOKENIZER, the --llm file's, the user cache's, or the "
                          "built-in Qwen tokenizer)",
                          &o.tokenizer_path));
  v.push_back(text_option("", "--metadata-format",
                          "metadata output format, one of [text, json] (default: text)",
                          &o.metadata_format));
  v.push_back(text_option("", "--preview-path",
                          "path of the preview image (default: ./preview.png)", &o.preview_path));
  v.push_back(text_option("", "--imat-out",
                          "collect an importance matrix during this run and save it here",
                          &o.imatrix_out));
  v.push_back(int_option("", "--preview-interval",
                         "denoising steps between preview updates (default: 1, every step)",
                         &o.preview_interval));
  v.push_back(int_option("", "--output-begin-idx",
                         "first index of a numbered output sequence, non-negative (default: 0)",
                         &o.output_begin_idx));
  v.push_back(switch_option("", "--canny", "apply the canny edge preprocessor to the control image",
                            &o.canny));
  v.push_back(
      switch_option("", "--convert-name", "convert tensor names (convert mode)", &o.convert_name));
  v.push_back(switch_option("-v", "--verbose", "print extra information", &o.verbose));
  v.push_back(switch_option("", "--color", "color the log tags by level", &o.color));
  v.push_back(switch_option(
      "", "--taesd-preview-only",
      "use the tiny autoencoder for previews only, not for the final image (with --preview tae)",
      &o.taesd_preview_only));
  v.push_back(switch_option("", "--preview-noisy",
                            "preview the noisy latents instead of the denoised prediction",
                            &o.preview_noisy));
  v.push_back(switch_option("", "--metadata-raw",
                            "show raw hex for metadata payloads that are not parsed",
                            &o.metadata_raw));
  v.push_back(switch_option("", "--metadata-brief", "shorten long metadata values in text output",
                            &o.metadata_brief));
  v.push_back(switch_option("", "--metadata-all",
                            "also list structural entries (IHDR, IDAT, other JPEG segments)",
                            &o.metadata_all));
  v.push_back(
      other_option("-M", "--mode", "run mode, one of [" + mode_list() + "] (default: img_gen)",
                   [&o](const std::string& value) {
                     for (int i = 0; i < kModeCount; ++i) {
                       if (value == kModeNames[i]) {
                         o.mode = static_cast<Mode>(i);
                         return;
                       }
                     }
                     fail("unknown mode '%s'; valid modes: %s", value.c_str(), mode_list().c_str());
                   }));
  v.push_back(other_option(
      "", "--preview", "preview method, one of [" + preview_list() + "] (default: none)",
      [&o](const std::string& value) {
        o.preview_method = str_to_preview(value.c_str());
        SD_CHECK(o.preview_method != PREVIEW_COUNT, "unknown preview method '%s'; valid: %s",
                 value.c_str(), preview_list().c_str());
      }));
  v.push_back(other_option(
      "-h", "--help", "show this help and exit", [&o](const std::string&) { o.help = true; },
      false));
  v.push_back(other_option(
      "", "--version", "print the version and exit", [&o](const std::string&) { o.version = true; },
      false));
  v.push_back(other_option("", "--imat-in", "load an importance matrix (repeatable)",
                           [&o](const std::string& value) { o.imatrix_in.push_back(value); }));
  return s;
}

Section context_section(ContextOptions& o, CliOptions& cli) {
  Section s{"Context Options", {}};
  auto& v = s.options;
  v.push_back(text_option(
      "-m", "--model", "path to the full model (checkpoint or diffusers folder)", &o.model_path));
  v.push_back(text_option("", "--clip_l", "path to the CLIP-L text encoder", &o.clip_l_path));
  v.push_back(text_option("", "--clip_g", "path to the CLIP-G text encoder", &o.clip_g_path));
  v.push_back(
      text_option("", "--clip_vision", "path to the CLIP vision encoder", &o.clip_vision_path));
  v.push_back(text_option("", "--t5xxl", "path to the T5-XXL text encoder", &o.t5xxl_path));
  v.push_back(text_option(
      "", "--llm", "path to the LLM text encoder (e.g. Qwen2.5-VL for Qwen-Image)", &o.llm_path));
  v.push_back(text_option("", "--llm_vision", "path to the LLM vision tower", &o.llm_vision_path));
  v.push_back(text_option("", "--qwen2vl", "deprecated alias of --llm", &o.llm_path));
  v.push_back(
      text_option("", "--qwen2vl_vision", "deprecated alias of --llm_vision", &o.llm_vision_path));
  v.push_back(text_option("", "--diffusion-model", "path to a standalone diffusion model",
                          &o.diffusion_model_path));
  v.push_back(text_option("", "--high-noise-diffusion-model",
                          "path to a standalone high-noise diffusion model",
                          &o.high_noise_diffusion_model_path));
  v.push_back(text_option("", "--uncond-diffusion-model",
                          "path to a standalone unconditional diffusion model",
                          &o.uncond_diffusion_model_path));
  v.push_back(text_option("", "--embeddings-connectors", "path to LTXAV embeddings connectors",
                          &o.embeddings_connectors_path));
  v.push_back(text_option("", "--vae", "path to a standalone VAE", &o.vae_path));
  v.push_back(text_option("", "--vae-format",
                          "VAE latent format, one of [auto, flux, sd3, flux2, wan] (default: auto)",
                          &o.vae_format));
  v.push_back(
      text_option("", "--audio-vae", "path to a standalone LTX audio VAE", &o.audio_vae_path));
  v.push_back(text_option("", "--taesd",
                          "path to a tiny autoencoder (TAESD; TAEHV for Wan's video latents): "
                          "fast, low-quality decoding",
                          &o.taesd_path));
  v.push_back(text_option("", "--tae", "alias of --taesd", &o.taesd_path));
  v.push_back(text_option("", "--control-net", "path to a ControlNet model", &o.control_net_path));
  v.push_back(text_option("", "--ip-adapter", "path to an IP-Adapter model (needs --clip_vision)",
                          &o.ip_adapter_path));
  v.push_back(text_option("", "--motion-module", "path to an AnimateDiff motion module (SD 1.5)",
                          &o.motion_module_path));
  v.push_back(
      text_option("", "--embd-dir", "folder of textual-inversion embeddings", &o.embedding_dir));
  v.push_back(text_option("", "--lora-model-dir",
                          "folder where <lora:name:weight> prompt tags are looked up (default: .)",
                          &o.lora_model_dir));
  v.push_back(switch_option("", "--confine-model-dirs",
                            "LoRA tags and embeddings load only from files inside --lora-model-dir "
                            "and --embd-dir (symlinks resolved); for prompts from others",
                            &o.confine_model_dirs));
  v.push_back(text_option("", "--hires-upscalers-dir", "folder of highres-fix upscaler models",
                          &o.hires_upscalers_dir));
  v.push_back(text_option("", "--tensor-type-rules",
                          "weight type per tensor name pattern, e.g. \"^vae\\.=f16,model\\.=q8_0\"",
                          &o.tensor_type_rules, ','));
  v.push_back(
      text_option("", "--model-args", "extra model arguments, key=value list", &o.model_args, ','));
  v.push_back(text_option("", "--photo-maker", "path to a PhotoMaker model", &o.photo_maker_path));
  v.push_back(
      text_option("", "--pulid-weights", "path to PuLID Flux weights", &o.pulid_weights_path));
  v.push_back(
      text_option("", "--upscale-model", "path to an ESRGAN upscaler model", &o.esrgan_path));
  v.push_back(text_option("", "--backend",
                          "where modules run, e.g. cpu or te=cpu,vae=cuda0,diffusion=cuda0",
                          &o.backend, ','));
  v.push_back(text_option("", "--params-backend",
                          "where weights are kept, e.g. cpu, disk or diffusion=disk,te=cpu",
                          &o.params_backend, ','));
  v.push_back(text_option("", "--split-mode",
                          "how a module given several devices is split: layer (default) or row, "
                          "or per module, e.g. diffusion=row",
                          &o.split_mode, ','));
  v.push_back(text_option("", "--rpc-servers",
                          "RPC servers to offload to, host:port list, e.g. "
                          "localhost:50052,192.168.1.3:50052",
                          &o.rpc_servers, ','));
  v.push_back(text_option("", "--max-vram",
                          "VRAM budget in GiB, one value or per device (cuda0=6,vulkan0=4); 0 "
                          "disables the budget, a negative value uses free memory minus that much "
                          "(default: 0)",
                          &o.max_vram));
  v.push_back(int_option("-t", "--threads",
                         "CPU threads; <= 0 uses the number of physical cores (default: -1)",
                         &o.n_threads));
  v.push_back(switch_option("", "--stream-layers",
                            "with --max-vram: upload the next segment's weights while one computes",
                            &o.stream_layers));
  v.push_back(switch_option("", "--eager-load",
                            "load all weights when the model is opened, not on first use",
                            &o.eager_load));
  v.push_back(switch_option("", "--quantize-convs",
                            "hold the diffusion model's convolution kernels in q8_0 and run them "
                            "on 8-bit integer dot products (CPUs with AVX-512 VNNI): faster "
                            "than f16 kernels, less memory than --type bf16, a slightly "
                            "different image",
                            &o.quantize_convs));
  v.push_back(switch_option("", "--auto-fit",
                            "place modules on devices automatically from model size and free "
                            "memory (overrides --backend and --params-backend)",
                            &o.auto_fit));
  v.push_back(switch_option("", "--force-sdxl-vae-conv-scale",
                            "force the conv scale of the SDXL VAE", &o.force_sdxl_vae_conv_scale));
  v.push_back(switch_option("", "--offload-to-cpu",
                            "keep weights in RAM and move them to the device when needed (same as "
                            "--params-backend cpu)",
                            &o.offload_to_cpu));
  v.push_back(switch_option("", "--mmap", "memory-map model files (the default)", &o.enable_mmap));
  v.push_back(switch_option("", "--no-mmap",
                            "read weights into memory instead of mapping the model files",
                            &o.disable_mmap));
  v.push_back(switch_option("", "--control-net-cpu", "deprecated: --backend controlnet=cpu",
                            &o.control_net_cpu));
  v.push_back(switch_option("", "--clip-on-cpu", "deprecated: --backend te=cpu", &o.clip_on_cpu));
  v.push_back(switch_option("", "--vae-on-cpu", "deprecated: --backend vae=cpu", &o.vae_on_cpu));
  v.push_back(switch_option("", "--fa",
                            "flash attention: every model's attention on bf16-rounded operands "
                            "(twice the rate on CPUs with AVX512_BF16; a slightly different image)",
                            &o.flash_attn));
  v.push_back(switch_option("", "--diffusion-fa", "flash attention in the diffusion model only",
                            &o.diffusion_flash_attn));
  v.push_back(switch_option("", "--diffusion-conv-direct",
                            "use direct convolution in the diffusion model",
                            &o.diffusion_conv_direct));
  v.push_back(switch_option("", "--vae-conv-direct", "use direct convolution in the VAE",
                            &o.vae_conv_direct));
  v.push_back(other_option("", "--type",
                           "weight type, e.g. f32, f16, q8_0, q4_0, q4_K (default: the type "
                           "stored in the file)",
                           [&o](const std::string& value) { o.wtype = parse_type(value); }));
  v.push_back(other_option(
      "", "--rng",
      "noise RNG, one of [" + rng_list() + "] (default: cuda, as sd-webui; cpu matches ComfyUI)",
      [&o](const std::string& value) {
        o.rng_type = str_to_rng_type(value.c_str());
        SD_CHECK(o.rng_type != RNG_TYPE_COUNT, "unknown rng '%s'; valid: %s", value.c_str(),
                 rng_list().c_str());
      }));
  v.push_back(other_option(
      "", "--sampler-rng",
      "RNG of the sampler's noise, one of [" + rng_list() + "] (default: same as --rng)",
      [&o](const std::string& value) {
        o.sampler_rng_type = str_to_rng_type(value.c_str());
        SD_CHECK(o.sampler_rng_type != RNG_TYPE_COUNT, "unknown sampler rng '%s'; valid: %s",
                 value.c_str(), rng_list().c_str());
      }));
  v.push_back(other_option(
      "", "--prediction",
      "prediction type, one of [" + prediction_list() + "] (default: detected from the model)",
      [&o](const std::string& value) {
        o.prediction = str_to_prediction(value.c_str());
        SD_CHECK(o.prediction != PREDICTION_COUNT, "unknown prediction '%s'; valid: %s",
                 value.c_str(), prediction_list().c_str());
      }));
  v.push_back(
      other_option("", "--lora-apply-mode",
                   "how LoRAs are applied, one of [" + lora_apply_mode_list() +
                       "] (default: auto: at_runtime for quantized weights, else immediately)",
                   [&o](const std::string& value) {
                     o.lora_apply_mode = str_to_lora_apply_mode(value.c_str());
                     SD_CHECK(o.lora_apply_mode != LORA_APPLY_MODE_COUNT,
                              "unknown lora apply mode '%s'; valid: %s", value.c_str(),
                              lora_apply_mode_list().c_str());
                   }));
  v.push_back(other_option(
      "", "--list-devices",
      "list the devices --backend and --params-backend accept (name<TAB>description, one "
      "per line) and exit",
      [&cli](const std::string&) { cli.list_devices = true; }, false));
  return s;
}

std::vector<Section> sections(Arguments& a) {
  return {cli_section(a.cli), context_section(a.context, a.cli), generation_section(a.generation)};
}

}  // namespace

const char* mode_name(Mode mode) {
  return kModeNames[static_cast<int>(mode)];
}

Arguments parse_arguments(int argc, const char* const* argv, const std::vector<Section>& extra) {
  Arguments args;
  std::vector<Section> all = sections(args);
  all.insert(all.end(), extra.begin(), extra.end());
  const std::string program = argc > 0 ? argv[0] : "sd-cli";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const Option* match = nullptr;
    for (const auto& section : all) {
      for (const auto& o : section.options) {
        if ((!o.short_name.empty() && arg == o.short_name) ||
            (!o.long_name.empty() && arg == o.long_name)) {
          match = &o;
        }
      }
    }
    SD_CHECK(match, "unknown argument: %s; run '%s -h' for the list of options", arg.c_str(),
             program.c_str());
    std::string value;
    if (match->takes_value) {
      SD_CHECK(i + 1 < argc, "missing value for %s; run '%s -h' for its meaning", arg.c_str(),
               program.c_str());
      value = argv[++i];
    }
    match->apply(value);
    if (args.cli.help || args.cli.version) break;
  }
  return args;
}

std::string usage(const std::string& program, const std::vector<Section>& extra) {
  Arguments scratch;
  std::vector<Section> all = sections(scratch);
  all.insert(all.end(), extra.begin(), extra.end());
  std::string out = "Usage: " + program + " [options]\n";
  for (const auto& section : all) {
    out += "\n" + section.title + ":\n" + format_section(section);
  }
  return out;
}

}  // namespace sd::cli
