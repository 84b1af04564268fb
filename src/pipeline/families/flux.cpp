#include "pipeline/families/flux.h"

#include "pipeline/families/registry.h"
#include "pipeline/families/tokenizers.h"
#include "pipeline/flux_conditioner.h"
#include "pipeline/flux_fill.h"
#include "pipeline/flux_runner.h"
#include "pipeline/text_conditioner.h"
#include "tensor/error.h"
#include "weights/model_manager.h"

namespace sd::pipeline {

namespace {

using io::ModelVersion;

// sd.cpp: 1.15 when the transformer has a guidance embedding (dev, Fill), else 1 (schnell).
float flux_flow_shift(ModelVersion v) {
  return v == ModelVersion::Flux || v == ModelVersion::FluxFill ? 1.15f : 1.0f;
}

const std::string kClipToken =
    std::string(FluxConditioner::kClipScope) + "embeddings.token_embedding.weight";
const std::string kT5Shared = std::string(FluxConditioner::kT5Scope) + "shared.weight";

}  // namespace

FamilyDefaults FluxFamily::flux_defaults() {
  FamilyDefaults d;
  d.vae = models::VaeConfig::flux;
  d.latent_channels = 16;
  d.latent_colors = LatentColors::Flux;
  d.scale_factor = 0.3611f;
  d.shift_factor = 0.1159f;
  d.sample_method = sampling::SampleMethod::Euler;
  d.prediction = sampling::Prediction::FluxFlow;
  d.scheduler = sampling::Scheduler::Flux;
  d.flow_shift = flux_flow_shift;
  return d;
}

void FluxFamily::require_files(const ModelFiles& files) const {
  SD_CHECK(files.contains(kT5Shared),
           "FLUX.1 needs its T5-XXL text encoder: pass --t5xxl FILE (t5xxl_fp16.safetensors)");
  SD_CHECK(files.contains(kClipToken),
           "FLUX.1 needs its CLIP-L text encoder: pass --clip_l FILE (clip_l.safetensors)");
  SD_CHECK(files.contains(io::kVaeConvIn),
           "FLUX.1 needs its autoencoder: pass --vae FILE (ae.safetensors)");
}

models::FluxConfig FluxFamily::transformer(ModelVersion v) const {
  switch (v) {
    case ModelVersion::Flux:
      return models::FluxConfig::dev();
    case ModelVersion::FluxSchnell:
      return models::FluxConfig::schnell();
    case ModelVersion::FluxFill: {
      // dev plus the masked image's latent and the 8x8-folded mask.
      models::FluxConfig c = models::FluxConfig::dev();
      c.in_channels = 384;
      return c;
    }
    default:
      fail_unsupported(v);
  }
}

Architecture FluxFamily::transformer_architecture(ModelVersion version,
                                                  const ModelFiles& files) const {
  Architecture arch;
  arch.version = version;
  const ShapeOf shape_of = files.shape_of();
  arch.flux = flux_config_from_shapes(transformer(version), io::kUnetRoot, shape_of);
  arch.t5 = t5_config_from_shapes(models::T5Config::xxl(), FluxConditioner::kT5Scope, shape_of);
  arch.vae = vae_config_from_shapes(vae_config(), io::kVaeRoot, shape_of);
  // A T5 file of another model fails here, naming the flag, before anything is loaded.
  SD_CHECK(arch.t5->model_dim == arch.flux->context_dim,
           "the --t5xxl encoder gives %lld-wide tokens but the transformer reads %lld (a T5 "
           "file of another model?)",
           static_cast<long long>(arch.t5->model_dim),
           static_cast<long long>(arch.flux->context_dim));
  return arch;
}

Architecture FluxFamily::architecture(ModelVersion version, const ModelFiles& files) const {
  Architecture arch = transformer_architecture(version, files);
  arch.text = clip_config_from_shapes(models::ClipTextConfig::vit_l14(),
                                      FluxConditioner::kClipScope, files.shape_of());
  SD_CHECK(arch.text.hidden == arch.flux->vec_dim,
           "the --clip_l encoder gives a %lld-value pooled vector but the transformer reads "
           "%lld (a CLIP file of another model?)",
           static_cast<long long>(arch.text.hidden), static_cast<long long>(arch.flux->vec_dim));
  return arch;
}

std::vector<std::string> FluxFamily::text_encoder_roots(const Architecture&) const {
  return {std::string(io::kTextEncoderRoot), std::string(io::kT5xxlRoot)};
}

std::unique_ptr<PromptEncoder> FluxFamily::make_prompt_encoder(const Architecture& arch,
                                                               const ModelFiles& files,
                                                               const NetworkPlaces& places) const {
  std::shared_ptr<const models::ClipTokenizer> clip = clip_tokenizer(files);
  return std::make_unique<FluxConditioner>(clip, arch.text, t5_tokenizer(files), *arch.t5,
                                           places.weights, places.text_backend,
                                           FluxConditioner::kClipScope);
}

std::unique_ptr<DiffusionNet> FluxFamily::make_diffusion_net(const Architecture& arch,
                                                             const NetworkPlaces& places) const {
  return std::make_unique<FluxRunner>(places.weights, *arch.flux, places.diffusion_backend);
}

void FluxFamily::check_request(ModelVersion version, ImageRequest& r) const {
  SD_CHECK(version != ModelVersion::FluxFill || r.ref_images.empty(),
           "FLUX.1 Fill does not take reference images (-r); use a FLUX.1 Kontext model, or -i "
           "and --mask to inpaint with Fill");
}

ImageInput FluxFamily::image_input(ModelVersion version) const {
  return version == ModelVersion::FluxFill ? ImageInput::MaskedImage : ImageInput::None;
}

std::vector<float> FluxFamily::masked_image_input(const std::vector<float>& masked_latent,
                                                  const std::vector<float>& mask,
                                                  const std::vector<float>&, int width, int height,
                                                  int64_t downscale) const {
  return flux_fill_concat(masked_latent, mask, width, height, downscale);
}

const Family& flux_family() {
  static const FluxFamily kFamily;
  return kFamily;
}

}  // namespace sd::pipeline
