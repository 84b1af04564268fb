#include "pipeline/model_family.h"

#include <string>

#include "pipeline/sd3_conditioner.h"
#include "pipeline/text_conditioner.h"
#include "tensor/error.h"

namespace sd::pipeline {

namespace {

using io::ModelVersion;

[[noreturn]] void unsupported(ModelVersion v) {
  std::string names;
  const std::vector<const FamilyDescription*>& all = supported_families();
  for (size_t i = 0; i < all.size(); ++i)
    names += std::string(i == 0                ? ""
                         : i + 1 == all.size() ? " and "
                                               : ", ") +
             io::family_name(all[i]->family);
  sd::fail("%s models are not supported yet; this build runs %s", io::version_name(v),
           names.c_str());
}

models::UnetConfig sd1_unet(ModelVersion v) {
  switch (v) {
    case ModelVersion::SD1:
      return models::UnetConfig::sd1();
    case ModelVersion::SD1Inpaint:
      return models::UnetConfig::sd1_inpaint();
    case ModelVersion::SD1Pix2Pix: {
      models::UnetConfig c = models::UnetConfig::sd1();
      c.in_channels = 8;  // latent + the edited image's latent (instruct-pix2pix)
      return c;
    }
    default:
      unsupported(v);
  }
}

models::UnetConfig sd2_unet(ModelVersion v) {
  models::UnetConfig c = models::UnetConfig::sd2();
  switch (v) {
    case ModelVersion::SD2:
      return c;
    case ModelVersion::SD2Inpaint:
      c.in_channels = 9;  // latent + mask + masked-image latent
      return c;
    default:
      unsupported(v);
  }
}

// Every SDXL UNet's dimensions and blocks come from its file (the inpainting model's 9
// input channels, the refiner's 4 levels, SSD-1B's and Vega's missing blocks); the preset
// only starts the reading.
models::UnetConfig sdxl_unet(ModelVersion v) {
  switch (v) {
    case ModelVersion::SDXL:
    case ModelVersion::SDXLInpaint:
    case ModelVersion::SDXLSSD1B:
    case ModelVersion::SDXLVega:
      return models::UnetConfig::sdxl();
    case ModelVersion::SDXLRefiner: {
      models::UnetConfig c = models::UnetConfig::sdxl();
      c.channel_mult = {1, 2, 4, 4};
      c.attention_levels = {1, 2};
      c.level_depth = {0, 4, 4, 0};
      c.middle_depth = 4;
      c.model_channels = 384;
      c.context_dim = 1280;
      c.adm_in_channels = 2560;
      return c;
    }
    default:
      unsupported(v);  // Instruct-Pix2Pix takes an image latent this build does not feed
  }
}

// The refiner's only encoder is OpenCLIP ViT-bigG; alone, it pads with 0 as OpenCLIP does.
models::ClipTextConfig refiner_vit_bigg14() {
  models::ClipTextConfig c = models::ClipTextConfig::vit_bigg14();
  c.pad_token = 0;
  return c;
}

// Stable Diffusion 1.x (CompVis/runwayml v1-inference.yaml): OpenAI CLIP ViT-L/14,
// eps-prediction.
FamilyDescription sd1() {
  FamilyDescription d;
  d.family = io::ModelFamily::SD1;
  d.text_encoders = {{models::ClipTextConfig::vit_l14, TextConditioner::kScope}};
  d.diffusion = sd1_unet;
  d.vae = models::VaeConfig::sd;
  d.prediction = sampling::Prediction::Eps;
  d.ays_levels = sampling::AysLevels::SD1;
  return d;
}

// Stable Diffusion 2.x (Stability-AI v2-inference(-v).yaml): OpenCLIP ViT-H/14; eps or v
// prediction, which the files do not tell.
FamilyDescription sd2() {
  FamilyDescription d;
  d.family = io::ModelFamily::SD2;
  d.text_encoders = {{models::ClipTextConfig::vit_h14, TextConditioner::kScope}};
  d.diffusion = sd2_unet;
  d.vae = models::VaeConfig::sd;
  // Align Your Steps publishes no SD2 levels. sd.cpp means to fall back to SD1's but
  // reads an empty list instead (undefined behaviour); SD1's is the intended result.
  d.ays_levels = sampling::AysLevels::SD1;
  return d;
}

// SDXL base (Stability-AI sd_xl_base.yaml, Podell et al. 2023): CLIP ViT-L/14 and OpenCLIP
// ViT-bigG/14, a vector of the pooled text and the image sizes, the SD VAE with scale
// factor 0.13025, eps prediction. Dimensions are read from the file.
FamilyDescription sdxl() {
  FamilyDescription d;
  d.family = io::ModelFamily::SDXL;
  d.text_encoders = {{models::ClipTextConfig::sdxl_vit_l14, TextConditioner::kScope},
                     {models::ClipTextConfig::vit_bigg14, TextConditioner::kScope2}};
  d.conditioning = ConditioningKind::ContextAndVector;
  d.diffusion = sdxl_unet;
  d.vae = models::VaeConfig::sd;
  d.scale_factor = 0.13025f;
  d.prediction = sampling::Prediction::Eps;
  d.ays_levels = sampling::AysLevels::SDXL;
  d.shapes_from_file = true;
  d.zero_context_for_empty_negative = true;
  d.timestep_shift = true;
  return d;
}

// SDXL refiner (Stability-AI sd_xl_refiner.yaml): OpenCLIP ViT-bigG/14 alone (its
// penultimate layer as the 1280-wide context), a vector of the pooled text, the image sizes
// and an aesthetic score, the SDXL VAE. sd.cpp does not run it; the conditioning follows
// the SGM code and diffusers' defaults (pipeline/text_conditioner.h).
FamilyDescription sdxl_refiner() {
  FamilyDescription d = sdxl();
  d.text_encoders = {{refiner_vit_bigg14, TextConditioner::kScope}};
  d.conditioning = ConditioningKind::ContextAndAestheticVector;
  // SGM's refiner is "legacy": an empty negative prompt is encoded, not zeroed (diffusers'
  // refiner: force_zeros_for_empty_prompt false).
  d.zero_context_for_empty_negative = false;
  return d;
}

models::FluxConfig flux_dit(ModelVersion v) {
  switch (v) {
    case ModelVersion::Flux:
      return models::FluxConfig::dev();
    case ModelVersion::FluxSchnell:
      return models::FluxConfig::schnell();
    case ModelVersion::FluxFill: {
      // dev plus the masked image's latent and the 8x8-folded mask (pipeline/flux_fill.h).
      models::FluxConfig c = models::FluxConfig::dev();
      c.in_channels = 384;
      return c;
    }
    default:
      unsupported(v);
  }
}

// sd.cpp: 1.15 when the transformer has a guidance embedding (dev, Fill), else 1 (schnell).
float flux_flow_shift(ModelVersion v) {
  return v == ModelVersion::Flux || v == ModelVersion::FluxFill ? 1.15f : 1.0f;
}

// FLUX.1 dev and schnell (black-forest-labs/flux): CLIP-L's pooled output and T5-XXL's
// hidden states, the rectified-flow transformer, the 16-channel autoencoder (scale 0.3611,
// shift 0.1159), euler on the resolution-shifted flux schedule. Dimensions from the files.
FamilyDescription flux() {
  FamilyDescription d;
  d.family = io::ModelFamily::Flux;
  d.text_encoders = {{models::ClipTextConfig::vit_l14, TextConditioner::kScope}};
  d.conditioning = ConditioningKind::T5ContextClipVector;
  d.flux = flux_dit;
  d.vae = models::VaeConfig::flux;
  d.latent_channels = 16;
  d.scale_factor = 0.3611f;
  d.shift_factor = 0.1159f;
  d.sample_method = sampling::SampleMethod::Euler;
  d.prediction = sampling::Prediction::FluxFlow;
  d.scheduler = sampling::Scheduler::Flux;
  d.flow_shift = flux_flow_shift;
  d.shapes_from_file = true;
  return d;
}

models::FluxConfig chroma_dit(ModelVersion v) {
  if (v != ModelVersion::Chroma) unsupported(v);
  return models::FluxConfig::chroma();
}

// Chroma (lodestones/Chroma; sd.cpp's Chroma support): FLUX.1 schnell's transformer with one
// approximator for all modulations, conditioned on T5-XXL alone (no CLIP), FLUX.1's
// autoencoder and sampling defaults; flow shift 1 (no guidance embedding). Dimensions from
// the files.
FamilyDescription chroma() {
  FamilyDescription d = flux();
  d.family = io::ModelFamily::Chroma;
  d.text_encoders = {};
  d.conditioning = ConditioningKind::T5ContextWithMask;
  d.flux = chroma_dit;
  d.flow_shift = [](ModelVersion) { return 1.0f; };
  return d;
}

models::MmditConfig sd3_mmdit(ModelVersion v) {
  switch (v) {
    case ModelVersion::SD3:
      return models::MmditConfig::sd3_medium();
    case ModelVersion::SD3_5Medium:
      return models::MmditConfig::sd3_5_medium();
    case ModelVersion::SD3_5Large:
      return models::MmditConfig::sd3_5_large();
    default:
      unsupported(v);
  }
}

// SD3's OpenCLIP bigG: sd.cpp pads its windows with token 0 ("!"), as OpenCLIP does.
models::ClipTextConfig sd3_vit_bigg14() {
  models::ClipTextConfig c = models::ClipTextConfig::vit_bigg14();
  c.pad_token = 0;
  return c;
}

// SD3 Medium, SD3.5 Medium and Large (Esser et al. 2024; Stability-AI sd3-ref): CLIP-L,
// CLIP-G and optionally T5-XXL, the MMDiT, the 16-channel autoencoder (scale 1.5305, shift
// 0.0609), sd3_flow prediction with shift 3, euler on the discrete schedule (sd.cpp's
// defaults). Dimensions from the files.
FamilyDescription sd3() {
  FamilyDescription d;
  d.family = io::ModelFamily::SD3;
  d.text_encoders = {{models::ClipTextConfig::sdxl_vit_l14, Sd3Conditioner::kClipLScope},
                     {sd3_vit_bigg14, Sd3Conditioner::kClipGScope}};
  d.conditioning = ConditioningKind::ClipAndT5JointContext;
  d.mmdit = sd3_mmdit;
  d.vae = models::VaeConfig::flux;
  d.latent_channels = 16;
  d.scale_factor = 1.5305f;
  d.shift_factor = 0.0609f;
  d.sample_method = sampling::SampleMethod::Euler;
  d.prediction = sampling::Prediction::Sd3Flow;
  d.shapes_from_file = true;
  return d;
}

}  // namespace

models::VaeConfig FamilyDescription::vae_config() const {
  models::VaeConfig c = vae();
  c.z_channels = latent_channels;
  c.scale_factor = scale_factor;
  c.shift_factor = shift_factor;
  return c;
}

sampling::Scheduler FamilyDescription::default_scheduler(sampling::SampleMethod method,
                                                         sampling::Prediction p) const {
  const sampling::Scheduler s = sampling::default_scheduler(method, p);
  // sd.cpp's order: LCM/TCD and ddim_trailing keep theirs, then the family's.
  return s == sampling::Scheduler::Discrete && scheduler ? *scheduler : s;
}

const std::vector<const FamilyDescription*>& supported_families() {
  static const FamilyDescription kSd1 = sd1();
  static const FamilyDescription kSd2 = sd2();
  static const FamilyDescription kSdxl = sdxl();
  static const FamilyDescription kFlux = flux();
  static const FamilyDescription kSd3 = sd3();
  static const FamilyDescription kChroma = chroma();
  static const std::vector<const FamilyDescription*> kAll = {&kSd1,  &kSd2, &kSdxl,
                                                             &kFlux, &kSd3, &kChroma};
  return kAll;
}

const FamilyDescription& family_description(ModelVersion version) {
  // A version whose conditioning differs from the rest of its family.
  static const FamilyDescription kSdxlRefiner = sdxl_refiner();
  if (version == ModelVersion::SDXLRefiner) return kSdxlRefiner;
  const io::ModelFamily family = io::family_of(version);
  for (const FamilyDescription* f : supported_families())
    if (f->family == family) return *f;
  unsupported(version);
}

}  // namespace sd::pipeline
