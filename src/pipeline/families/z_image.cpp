// Z-Image Turbo and Base (Tongyi-MAI, "Z-Image: An Efficient Image Generation Foundation
// Model with Single-Stream Diffusion Transformer", 2025): Qwen3-4B's second-to-last hidden
// states of the prompt in Qwen's chat template (pipeline/llm_conditioner.h), the
// single-stream transformer (models/z_image.h), FLUX.1's 16-channel autoencoder; euler on
// the discrete flow schedule shifted by 3, as sd.cpp runs it. Dimensions from the files.
#include "io/name_conversion.h"
#include "pipeline/families/llm_family.h"
#include "pipeline/families/registry.h"
#include "pipeline/families/tokenizers.h"
#include "pipeline/llm_conditioner.h"
#include "pipeline/z_image_runner.h"
#include "tensor/error.h"
#include "weights/model_manager.h"

namespace sd::pipeline {

namespace {

using io::ModelVersion;

class ZImage final : public LlmFamily {
 public:
  ZImage() : LlmFamily(io::ModelFamily::ZImage, defaults()) {}

  void require_files(const ModelFiles& files) const override {
    SD_CHECK(files.contains(io::kLlmEmbeddings),
             "Z-Image needs its Qwen3 text encoder: pass --llm FILE (qwen_3_4b.safetensors, or "
             "a Qwen3-4B GGUF)");
    SD_CHECK(files.contains(io::kVaeConvIn),
             "Z-Image needs its autoencoder: pass --vae FILE (ae.safetensors, FLUX.1's)");
    note_unused_encoders(files);
  }

  Architecture architecture(ModelVersion version, const ModelFiles& files) const override {
    if (version != ModelVersion::ZImage) fail_unsupported(version);
    Architecture arch;
    arch.version = version;
    const ShapeOf shape_of = files.shape_of();
    arch.z_image =
        models::z_image_config_from_shapes(models::ZImageConfig{}, io::kUnetRoot,
                                           [&](const std::string& name) { return shape_of(name); });
    arch.llm = llm_encoder_config(files, models::LlmConfig::qwen3_4b(),
                                  "Z-Image takes Qwen3-4B (qwen_3_4b.safetensors); a Qwen2.5-VL "
                                  "text model goes with Qwen-Image");
    arch.vae = vae_config_from_shapes(vae_config(), io::kVaeRoot, shape_of);
    // An LLM of another model fails here, naming the flag, before anything is loaded.
    SD_CHECK(arch.llm->hidden == arch.z_image->caption_dim,
             "the --llm encoder gives %lld-wide hidden states but the Z-Image transformer reads "
             "%lld (Z-Image takes Qwen3-4B; an LLM of another model?)",
             static_cast<long long>(arch.llm->hidden),
             static_cast<long long>(arch.z_image->caption_dim));
    SD_CHECK(arch.llm->layers >= 2,
             "the --llm encoder has %d layer; Z-Image reads its second-to-last hidden states",
             arch.llm->layers);
    return arch;
  }

  std::unique_ptr<PromptEncoder> make_prompt_encoder(const Architecture& arch,
                                                     const ModelFiles& files,
                                                     const NetworkPlaces& places) const override {
    // Qwen's chat template around the prompt, no system prompt; the states after all but
    // the last block (Hugging Face's hidden_states[-2]), before the final norm.
    LlmPromptFormat format;
    format.before = "<|im_start|>user\n";
    format.after = "<|im_end|>\n<|im_start|>assistant\n";
    format.hidden_layers = {arch.llm->layers - 1};
    return llm_prompt_encoder(arch, files, places, std::move(format));
  }

  std::unique_ptr<DiffusionNet> make_diffusion_net(const Architecture& arch,
                                                   const NetworkPlaces& places) const override {
    return std::make_unique<ZImageRunner>(places.weights, *arch.z_image, places.diffusion_backend);
  }

 private:
  static FamilyDefaults defaults() {
    FamilyDefaults d;
    d.vae = models::VaeConfig::flux;
    d.latent_channels = 16;
    d.latent_colors = LatentColors::Flux;
    d.scale_factor = 0.3611f;
    d.shift_factor = 0.1159f;
    d.sample_method = sampling::SampleMethod::Euler;
    d.prediction = sampling::Prediction::Sd3Flow;  // discrete flow, t = 1000 sigma
    d.flow_shift = [](ModelVersion) { return 3.0f; };
    return d;
  }
};

}  // namespace

const Family& z_image_family() {
  static const ZImage kFamily;
  return kFamily;
}

}  // namespace sd::pipeline
