// FLUX.2 klein 4B and 9B (Black Forest Labs 2025): the prompt in Qwen's chat template,
// padded to 512 tokens, through Qwen3 (4B or 8B), the hidden states after layers 9, 18 and
// 27 side by side (pipeline/llm_conditioner.h); FLUX.1's two kinds of blocks with shared
// modulations and SwiGLU MLPs (models/flux.h); the FLUX.2 autoencoder, 32 channels in 2x2
// patches under batch-norm statistics (models/vae.h). Euler on FLUX.2's resolution-shifted
// schedule, the timestep being sigma, as sd.cpp runs it. Reference images (-r) join the
// image's tokens at image indices 10, 20, ... Dimensions from the files.
#include "io/name_conversion.h"
#include "pipeline/families/llm_family.h"
#include "pipeline/families/registry.h"
#include "pipeline/families/tokenizers.h"
#include "pipeline/flux_runner.h"
#include "pipeline/llm_conditioner.h"
#include "tensor/error.h"
#include "weights/model_manager.h"

namespace sd::pipeline {

namespace {

using io::ModelVersion;

const std::string kLlmEmbeddings = std::string(io::kLlmRoot) + "model.embed_tokens.weight";
const std::string kVaeConvIn = std::string(io::kVaeRoot) + "decoder.conv_in.weight";
const std::string kVaeBatchNorm = std::string(io::kVaeRoot) + "bn.running_mean";

// Hugging Face's hidden_states indices klein reads (sd.cpp's out_layers), before the norm.
const std::vector<int> kKleinLayers = {9, 18, 27};

class Flux2 final : public LlmFamily {
 public:
  Flux2() : LlmFamily(io::ModelFamily::Flux2, defaults()) {}

  void require_files(const ModelFiles& files) const override {
    SD_CHECK(files.contains(kLlmEmbeddings),
             "FLUX.2 klein needs its Qwen3 text encoder: pass --llm FILE (qwen_3_4b.safetensors "
             "for klein 4B, qwen_3_8b for 9B, or a Qwen3 GGUF)");
    SD_CHECK(files.contains(kVaeConvIn),
             "FLUX.2 needs its autoencoder: pass --vae FILE (flux2-vae.safetensors)");
    SD_CHECK(files.contains(kVaeBatchNorm),
             "the --vae file has no bn.running_mean: FLUX.2 needs its own autoencoder "
             "(flux2-vae.safetensors, 32 latent channels with batch-norm statistics), not "
             "FLUX.1's ae.safetensors");
    note_unused_encoders(files);
  }

  Architecture architecture(ModelVersion version, const ModelFiles& files) const override {
    SD_CHECK(version != ModelVersion::Flux2,
             "FLUX.2 dev (48 single blocks, conditioned by Mistral Small 3.2) is not supported "
             "yet; FLUX.2 klein 4B and 9B run");
    if (version != ModelVersion::Flux2Klein) fail_unsupported(version);
    Architecture arch;
    arch.version = version;
    const ShapeOf shape_of = files.shape_of();
    arch.flux = flux_config_from_shapes(models::FluxConfig::flux2_klein(), io::kUnetRoot, shape_of);
    arch.llm = llm_encoder_config(files, models::LlmConfig::qwen3_4b(),
                                  "FLUX.2 klein takes Qwen3-4B (klein 4B) or Qwen3-8B (klein 9B)");
    // Layer 27 must be a block's output before the final norm, as the model was trained.
    SD_CHECK(arch.llm->layers > kKleinLayers.back(),
             "the --llm encoder has %d layers; FLUX.2 klein reads the hidden states after layers "
             "9, 18 and 27 of Qwen3's 36",
             arch.llm->layers);
    const int64_t text_width = arch.llm->hidden * static_cast<int64_t>(kKleinLayers.size());
    SD_CHECK(text_width == arch.flux->context_dim,
             "the --llm encoder gives %lld-wide hidden states (x3 layers = %lld) but the FLUX.2 "
             "transformer reads %lld (klein 4B takes Qwen3-4B, klein 9B Qwen3-8B)",
             static_cast<long long>(arch.llm->hidden), static_cast<long long>(text_width),
             static_cast<long long>(arch.flux->context_dim));
    arch.vae = vae_config_from_shapes(vae_config(), io::kVaeRoot, shape_of);
    return arch;
  }

  std::unique_ptr<PromptEncoder> make_prompt_encoder(const Architecture& arch,
                                                     const ModelFiles& files,
                                                     const NetworkPlaces& places) const override {
    // Qwen's chat template with thinking closed, no system prompt; all 512 rows (padding
    // included) go to the transformer.
    LlmPromptFormat format;
    format.before = "<|im_start|>user\n";
    format.after = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
    format.hidden_layers = kKleinLayers;
    format.min_tokens = 512;
    format.pad_token = "<|endoftext|>";
    return llm_prompt_encoder(arch, files, places, std::move(format));
  }

  std::unique_ptr<DiffusionNet> make_diffusion_net(const Architecture& arch,
                                                   const NetworkPlaces& places) const override {
    return std::make_unique<FluxRunner>(places.weights, *arch.flux, places.diffusion_backend);
  }

 private:
  static FamilyDefaults defaults() {
    FamilyDefaults d;
    d.vae = models::VaeConfig::flux2;
    d.latent_channels = 32;
    d.scale_factor = 1.0f;  // the batch norm scales instead
    d.shift_factor = 0.0f;
    d.sample_method = sampling::SampleMethod::Euler;
    d.prediction = sampling::Prediction::FluxFlow;  // timestep = sigma
    d.scheduler = sampling::Scheduler::Flux2;
    d.flow_shift = [](ModelVersion v) { return v == ModelVersion::Flux2 ? 1.15f : 1.0f; };
    return d;
  }
};

}  // namespace

const Family& flux2_family() {
  static const Flux2 kFamily;
  return kFamily;
}

}  // namespace sd::pipeline
