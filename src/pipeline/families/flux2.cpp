// FLUX.2 (Black Forest Labs 2025): klein 4B and 9B read the prompt in Qwen's chat template,
// padded to 512 tokens, through Qwen3 (4B or 8B), the hidden states after layers 9, 18 and
// 27 side by side; dev reads it after Mistral's system prompt through Mistral Small 3.2,
// the hidden states after layers 10, 20 and 30 side by side, zero rows appended up to 512
// (pipeline/llm_conditioner.h), and has a guidance input (--guidance). Both: FLUX.1's two
// kinds of blocks with shared modulations and SwiGLU MLPs (models/flux.h); the FLUX.2
// autoencoder, 32 channels in 2x2 patches under batch-norm statistics (models/vae.h). Euler
// on FLUX.2's resolution-shifted schedule, the timestep being sigma, as sd.cpp runs it.
// Reference images (-r) join the image's tokens at image indices 10, 20, ... Dimensions
// from the files.
#include "io/gguf.h"
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

const std::string kVaeBatchNorm = std::string(io::kVaeRoot) + "bn.running_mean";

// What tells the variants' text encoders apart: the decoder each takes, and the Hugging
// Face hidden_states indices it reads (sd.cpp's out_layers), before the final norm.
struct TextEncoderVariant {
  const char* name;
  models::LlmConfig (*preset)();
  std::vector<int> layers;
  const char* takes;        // for messages: the --llm file expected
  const char* layer_count;  // the released decoder's layers, for messages
  const char* width;        // the released decoder(s) and width, for messages
};
const TextEncoderVariant kKlein{
    "klein",      models::LlmConfig::qwen3_4b,
    {9, 18, 27},  "FLUX.2 klein takes Qwen3-4B (klein 4B) or Qwen3-8B (klein 9B)",
    "Qwen3's 36", "klein 4B takes Qwen3-4B, klein 9B Qwen3-8B"};
const TextEncoderVariant kDev{"dev",
                              models::LlmConfig::mistral_small_3_2,
                              {10, 20, 30},
                              "FLUX.2 dev takes Mistral Small 3.2 (24B)",
                              "Mistral Small 3.2's 40",
                              "dev takes Mistral Small 3.2, 5120 wide"};

// FLUX.2 dev's system prompt (black-forest-labs/flux2, as diffusers and sd.cpp write it,
// with its line break).
const char* const kDevSystemPrompt =
    "You are an AI that reasons about image descriptions. You give structured responses "
    "focusing on object relationships, object\nattribution and actions without speculation.";

// sd.cpp calls a FLUX.2 transformer dev when it has a 48th single block.
bool is_dev(const ModelFiles& files) {
  return files.contains(std::string(io::kUnetRoot) + "single_blocks.47.linear1.weight");
}

// llama.cpp writes Llama-style decoders (Mistral) into GGUF with each head's q and k rows
// permuted so that neighbouring channels rotate together; Hugging Face files keep halves.
models::RopeLayout rope_layout_of(const std::string& llm_file) {
  if (llm_file.size() < 5 || llm_file.compare(llm_file.size() - 5, 5, ".gguf") != 0)
    return models::RopeLayout::Halves;
  const io::GgufFile gguf = io::GgufFile::open(llm_file);
  return gguf.find("blk.0.attn_q.weight") ? models::RopeLayout::Pairs : models::RopeLayout::Halves;
}

class Flux2 final : public LlmFamily {
 public:
  Flux2() : LlmFamily(io::ModelFamily::Flux2, defaults()) {}

  void require_files(const ModelFiles& files) const override {
    SD_CHECK(files.contains(io::kLlmEmbeddings),
             is_dev(files)
                 ? "FLUX.2 dev needs its Mistral Small 3.2 text encoder: pass --llm FILE "
                   "(Mistral-Small-3.2-24B-Instruct-2506 as a GGUF, or its language model as "
                   "safetensors)"
                 : "FLUX.2 klein needs its Qwen3 text encoder: pass --llm FILE "
                   "(qwen_3_4b.safetensors for klein 4B, qwen_3_8b for 9B, or a Qwen3 GGUF)");
    SD_CHECK(files.contains(io::kVaeConvIn),
             "FLUX.2 needs its autoencoder: pass --vae FILE (flux2-vae.safetensors)");
    SD_CHECK(files.contains(kVaeBatchNorm),
             "the --vae file has no bn.running_mean: FLUX.2 needs its own autoencoder "
             "(flux2-vae.safetensors, 32 latent channels with batch-norm statistics), not "
             "FLUX.1's ae.safetensors");
    note_unused_encoders(files);
  }

  Architecture architecture(ModelVersion version, const ModelFiles& files) const override {
    if (version != ModelVersion::Flux2Klein && version != ModelVersion::Flux2)
      fail_unsupported(version);
    const bool dev = version == ModelVersion::Flux2;
    const TextEncoderVariant& te = dev ? kDev : kKlein;
    Architecture arch;
    arch.version = version;
    const ShapeOf shape_of = files.shape_of();
    arch.flux = flux_config_from_shapes(models::FluxConfig::flux2_klein(), io::kUnetRoot, shape_of);
    arch.llm = llm_encoder_config(files, te.preset(), te.takes);
    if (dev) arch.llm->rope_layout = rope_layout_of(files.options.llm);
    // The last layer read must be a block's output before the final norm, as trained.
    SD_CHECK(arch.llm->layers > te.layers.back(),
             "the --llm encoder has %d layers; FLUX.2 %s reads the hidden states after layers "
             "%d, %d and %d of %s",
             arch.llm->layers, te.name, te.layers[0], te.layers[1], te.layers[2], te.layer_count);
    const int64_t text_width = arch.llm->hidden * static_cast<int64_t>(te.layers.size());
    SD_CHECK(text_width == arch.flux->context_dim,
             "the --llm encoder gives %lld-wide hidden states (x3 layers = %lld) but the FLUX.2 "
             "transformer reads %lld (%s)",
             static_cast<long long>(arch.llm->hidden), static_cast<long long>(text_width),
             static_cast<long long>(arch.flux->context_dim), te.width);
    arch.vae = vae_config_from_shapes(vae_config(), io::kVaeRoot, shape_of);
    return arch;
  }

  std::unique_ptr<PromptEncoder> make_prompt_encoder(const Architecture& arch,
                                                     const ModelFiles& files,
                                                     const NetworkPlaces& places) const override {
    LlmPromptFormat format;
    if (arch.version == ModelVersion::Flux2) {
      // Mistral's chat template with BFL's system prompt after the BOS token; only the
      // prompt's tokens are read, and zero rows make the text 512 long.
      format.before =
          std::string("<s>[SYSTEM_PROMPT]") + kDevSystemPrompt + "[/SYSTEM_PROMPT][INST]";
      format.after = "[/INST]";
      format.hidden_layers = kDev.layers;
      format.min_rows = 512;
      format.special_tokens = {"<s>", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[INST]", "[/INST]"};
      return llm_prompt_encoder(arch, files, places, std::move(format), models::kMistralVocab);
    }
    // Qwen's chat template with thinking closed, no system prompt; all 512 rows (padding
    // included) go to the transformer.
    format.before = "<|im_start|>user\n";
    format.after = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
    format.hidden_layers = kKlein.layers;
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
    d.latent_colors = LatentColors::Flux2;
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
