// Wan 2.1 / 2.2 text-to-video (Wan team 2025, "Wan: Open and Advanced Large-Scale Video
// Generative Models"): umT5-XXL's last hidden states over 512 tokens with the padding masked
// in umT5 and zeroed after it (pipeline/chroma_conditioner.h, as sd.cpp's T5 embedder runs
// for Wan), the transformer (models/wan.h) on a video latent [w, h, frames, 16], Wan 2.1's
// causal autoencoder decoding the clip frame by frame (models/wan_vae.h). Euler on the
// discrete flow schedule shifted by 5, as sd.cpp runs it. A latent frame is four video
// frames after the first. Dimensions from the files.
#include "pipeline/chroma_conditioner.h"
#include "pipeline/families/registry.h"
#include "pipeline/families/tokenizers.h"
#include "pipeline/flux_conditioner.h"
#include "pipeline/wan_runner.h"
#include "tensor/error.h"
#include "weights/model_manager.h"

namespace sd::pipeline {

namespace {

using io::ModelVersion;

class Wan final : public Family {
 public:
  Wan() : Family(io::ModelFamily::Wan, defaults()) {}

  void require_files(const ModelFiles& files) const override {
    SD_CHECK(files.contains(std::string(FluxConditioner::kT5Scope) + "shared.weight"),
             "Wan needs its umT5 text encoder: pass --t5xxl FILE (umt5_xxl_fp16.safetensors, or "
             "a umT5-XXL GGUF)");
    SD_CHECK(files.contains(std::string(io::kVaeRoot) + "decoder.conv1.weight"),
             "Wan needs its autoencoder: pass --vae FILE (wan_2.1_vae.safetensors)");
    SD_CHECK(files.contains(std::string(io::kVaeRoot) + "decoder.head.0.gamma"),
             "the --vae file is not Wan 2.1's causal autoencoder (no decoder.head.0.gamma): Wan "
             "2.1 and Wan 2.2 A14B take wan_2.1_vae.safetensors");
    for (const char* clip : {"clip_l", "clip_g"})
      if (files.contains(std::string("text_encoders.") + clip +
                         ".transformer.text_model.embeddings.token_embedding.weight"))
        files.note(std::string("warning: Wan reads no CLIP text encoder; the --") + clip +
                   " file is not used");
  }

  Architecture architecture(ModelVersion version, const ModelFiles& files) const override {
    if (version != ModelVersion::Wan) fail_unsupported(version);
    Architecture arch;
    arch.version = version;
    const ShapeOf shape_of = files.shape_of();
    arch.wan = models::wan_config_from_shapes(
        io::kUnetRoot, [&](const std::string& name) { return shape_of(name); });
    arch.t5 = t5_config_from_shapes(models::T5Config::xxl(), FluxConditioner::kT5Scope, shape_of);
    arch.vae = wan_vae_config_from_shapes(vae_config(), io::kVaeRoot, shape_of);
    SD_CHECK(arch.t5->model_dim == arch.wan->text_dim,
             "the --t5xxl encoder gives %lld-wide tokens but the Wan transformer reads %lld (Wan "
             "takes umT5-XXL)",
             static_cast<long long>(arch.t5->model_dim),
             static_cast<long long>(arch.wan->text_dim));
    SD_CHECK(arch.vae.latent_channels() == arch.wan->in_channels &&
                 arch.wan->out_channels == arch.wan->in_channels,
             "the --vae autoencoder has %lld latent channels but the Wan transformer reads %lld "
             "(Wan 2.2 TI2V-5B takes wan2.2_vae.safetensors, which this build does not run yet)",
             static_cast<long long>(arch.vae.latent_channels()),
             static_cast<long long>(arch.wan->in_channels));
    return arch;
  }

  std::vector<std::string> text_encoder_roots(const Architecture&) const override {
    return {FluxConditioner::kT5Scope};
  }

  std::unique_ptr<PromptEncoder> make_prompt_encoder(const Architecture& arch,
                                                     const ModelFiles& files,
                                                     const NetworkPlaces& places) const override {
    // sd.cpp's T5 embedder for Wan: umT5 masks its own padding, the padding's outputs are
    // zeroed, and the transformer reads all 512 tokens unmasked.
    ChromaOptions options;
    options.t5_mask = true;
    options.dit_mask = false;
    options.zero_masked = true;
    return std::make_unique<ChromaConditioner>(t5_tokenizer(files, /*umt5=*/true), *arch.t5,
                                               options, places.weights, places.text_backend,
                                               FluxConditioner::kT5Scope);
  }

  std::unique_ptr<DiffusionNet> make_diffusion_net(const Architecture& arch,
                                                   const NetworkPlaces& places) const override {
    return std::make_unique<WanRunner>(places.weights, *arch.wan, places.diffusion_backend);
  }

 private:
  static FamilyDefaults defaults() {
    FamilyDefaults d;
    d.vae = models::VaeConfig::wan21;
    d.latent_channels = 16;
    d.scale_factor = 1.0f;
    d.sample_method = sampling::SampleMethod::Euler;
    d.prediction = sampling::Prediction::Sd3Flow;  // discrete flow, t = 1000 sigma
    d.flow_shift = [](ModelVersion) { return 5.0f; };
    d.video_frame_stride = 4;
    return d;
  }
};

}  // namespace

const Family& wan_family() {
  static const Wan kFamily;
  return kFamily;
}

}  // namespace sd::pipeline
