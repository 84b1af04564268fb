// SD3 Medium, SD3.5 Medium and Large (Esser et al. 2024; Stability-AI sd3-ref): CLIP-L,
// CLIP-G and optionally T5-XXL (pipeline/sd3_conditioner.h), the MMDiT
// (pipeline/mmdit_runner.h), the 16-channel autoencoder (scale 1.5305, shift 0.0609),
// sd3_flow prediction with shift 3, euler on the discrete schedule (sd.cpp's defaults).
// Dimensions from the files.
#include "pipeline/families/registry.h"
#include "pipeline/families/tokenizers.h"
#include "pipeline/mmdit_runner.h"
#include "pipeline/sd3_conditioner.h"
#include "pipeline/text_conditioner.h"
#include "tensor/error.h"
#include "weights/model_manager.h"

namespace sd::pipeline {

namespace {

using io::ModelVersion;

class Sd3 final : public Family {
 public:
  Sd3() : Family(io::ModelFamily::SD3, defaults()) {}

  // Both CLIP encoders (named with their flag when missing) and the VAE; T5 may be left
  // out (its tokens are then zeros, as sd.cpp runs it), with a warning.
  void require_files(const ModelFiles& files) const override {
    auto has = [&](std::string_view scope) {
      return files.contains(encoder_scope(files, scope) + "embeddings.token_embedding.weight");
    };
    SD_CHECK(has(Sd3Conditioner::kClipLScope),
             "SD3 needs its CLIP-L text encoder: pass --clip_l FILE (clip_l.safetensors)");
    SD_CHECK(has(Sd3Conditioner::kClipGScope),
             "SD3 needs its CLIP-G text encoder: pass --clip_g FILE (clip_g.safetensors)");
    SD_CHECK(files.contains(std::string(io::kVaeRoot) + "decoder.conv_in.weight"),
             "SD3 needs its autoencoder: pass --vae FILE");
  }

  Architecture architecture(ModelVersion version, const ModelFiles& files) const override {
    Architecture arch;
    arch.version = version;
    const ShapeOf shape_of = files.shape_of();
    arch.mmdit = mmdit_config_from_shapes(mmdit(version), io::kUnetRoot, shape_of);
    if (files.contains(std::string(Sd3Conditioner::kT5Scope) + "shared.weight"))
      arch.t5 = t5_config_from_shapes(models::T5Config::xxl(), Sd3Conditioner::kT5Scope, shape_of);
    else
      files.note(
          "warning: no T5-XXL text encoder (--t5xxl); SD3 runs on zeros in its place and "
          "follows the prompt less closely");
    arch.text =
        clip_config_from_shapes(models::ClipTextConfig::sdxl_vit_l14(),
                                encoder_scope(files, Sd3Conditioner::kClipLScope), shape_of);
    arch.text2 = clip_config_from_shapes(
        vit_bigg14(), encoder_scope(files, Sd3Conditioner::kClipGScope), shape_of);
    arch.vae = vae_config_from_shapes(vae_config(), io::kVaeRoot, shape_of);
    check_widths(arch);
    return arch;
  }

  // The checkpoint keeps all its encoders under text_encoders.
  std::vector<std::string> text_encoder_roots(const Architecture&) const override {
    return {std::string(io::kTextEncoderRoot), "text_encoders."};
  }

  std::unique_ptr<PromptEncoder> make_prompt_encoder(const Architecture& arch,
                                                     const ModelFiles& files,
                                                     const NetworkPlaces& places) const override {
    std::shared_ptr<const models::ClipTokenizer> clip = clip_tokenizer(files);
    std::shared_ptr<const models::T5Tokenizer> t5;
    if (arch.t5) t5 = t5_tokenizer(files);
    return std::make_unique<Sd3Conditioner>(
        clip, Sd3Encoder{arch.text, encoder_scope(files, Sd3Conditioner::kClipLScope)},
        Sd3Encoder{*arch.text2, encoder_scope(files, Sd3Conditioner::kClipGScope)}, t5, arch.t5,
        Sd3Conditioner::kT5Scope, places.weights, places.text_backend);
  }

  std::unique_ptr<DiffusionNet> make_diffusion_net(const Architecture& arch,
                                                   const NetworkPlaces& places) const override {
    return std::make_unique<MmditRunner>(places.weights, *arch.mmdit, places.diffusion_backend);
  }

 private:
  static FamilyDefaults defaults() {
    FamilyDefaults d;
    d.vae = models::VaeConfig::flux;
    d.latent_channels = 16;
    d.latent_colors = LatentColors::Sd3;
    d.scale_factor = 1.5305f;
    d.shift_factor = 0.0609f;
    d.sample_method = sampling::SampleMethod::Euler;
    d.prediction = sampling::Prediction::Sd3Flow;
    return d;
  }

  static models::MmditConfig mmdit(ModelVersion v) {
    switch (v) {
      case ModelVersion::SD3:
        return models::MmditConfig::sd3_medium();
      case ModelVersion::SD3_5Medium:
        return models::MmditConfig::sd3_5_medium();
      case ModelVersion::SD3_5Large:
        return models::MmditConfig::sd3_5_large();
      default:
        fail_unsupported(v);
    }
  }

  // SD3's OpenCLIP bigG: sd.cpp pads its windows with token 0 ("!"), as OpenCLIP does.
  static models::ClipTextConfig vit_bigg14() {
    models::ClipTextConfig c = models::ClipTextConfig::vit_bigg14();
    c.pad_token = 0;
    return c;
  }

  // Where a CLIP encoder's weights are: under the checkpoint's text_encoders.* scope, or
  // where a --clip_l / --clip_g file put them.
  static std::string encoder_scope(const ModelFiles& files, std::string_view checkpoint_scope) {
    const std::string s(checkpoint_scope);
    if (files.contains(s + "embeddings.token_embedding.weight")) return s;
    return s == Sd3Conditioner::kClipLScope ? TextConditioner::kScope : TextConditioner::kScope2;
  }

  // The two CLIP widths side by side fit T5's width, the pooled vectors make the
  // transformer's vector, and T5 (when given) is as wide as the context: a file of another
  // model fails here, naming its flag, before anything is loaded.
  static void check_widths(const Architecture& arch) {
    const models::MmditConfig& m = *arch.mmdit;
    const int64_t pooled = arch.text.hidden + arch.text2->projection_dim;
    SD_CHECK(m.context_dim == Sd3Conditioner::kContextDim,
             "the transformer reads %lld-wide text tokens; SD3's encoders give %lld",
             static_cast<long long>(m.context_dim),
             static_cast<long long>(Sd3Conditioner::kContextDim));
    SD_CHECK(pooled == m.adm_dim,
             "the --clip_l and --clip_g encoders give a %lld + %lld pooled vector but the "
             "transformer reads %lld (a CLIP file of another model?)",
             static_cast<long long>(arch.text.hidden),
             static_cast<long long>(arch.text2->projection_dim), static_cast<long long>(m.adm_dim));
    SD_CHECK(arch.text.hidden + arch.text2->hidden <= Sd3Conditioner::kContextDim,
             "the --clip_l and --clip_g encoders are %lld + %lld wide, more than SD3's %lld-wide "
             "context",
             static_cast<long long>(arch.text.hidden), static_cast<long long>(arch.text2->hidden),
             static_cast<long long>(Sd3Conditioner::kContextDim));
    SD_CHECK(!arch.t5 || arch.t5->model_dim == Sd3Conditioner::kContextDim,
             "the --t5xxl encoder gives %lld-wide tokens but the transformer reads %lld (a T5 "
             "file of another model?)",
             static_cast<long long>(arch.t5 ? arch.t5->model_dim : 0),
             static_cast<long long>(Sd3Conditioner::kContextDim));
  }
};

}  // namespace

const Family& sd3_family() {
  static const Sd3 kFamily;
  return kFamily;
}

}  // namespace sd::pipeline
