// SDXL (Stability-AI sd_xl_base.yaml, Podell et al. 2023): CLIP ViT-L/14 and OpenCLIP
// ViT-bigG/14, a vector of the pooled text and the image sizes, the SD VAE with scale
// factor 0.13025, eps prediction; its inpainting model, SSD-1B and Vega. The refiner
// (sd_xl_refiner.yaml) is bigG alone with an aesthetic score in its vector. Every
// dimension is read from the file.
#include "pipeline/families/registry.h"
#include "pipeline/families/unet_family.h"
#include "pipeline/text_conditioner.h"

namespace sd::pipeline {

namespace {

using io::ModelVersion;

FamilyDefaults sdxl_defaults() {
  FamilyDefaults d;
  d.vae = models::VaeConfig::sd;
  d.scale_factor = 0.13025f;
  d.prediction = sampling::Prediction::Eps;
  d.ays_levels = sampling::AysLevels::SDXL;
  d.timestep_shift = true;
  d.latent_colors = LatentColors::Sdxl;
  return d;
}

// Every SDXL UNet's dimensions and blocks come from its file (the inpainting model's 9
// input channels, SSD-1B's and Vega's missing blocks); the preset only starts the reading.
models::UnetConfig sdxl_unet(ModelVersion v) {
  switch (v) {
    case ModelVersion::SDXL:
    case ModelVersion::SDXLInpaint:
    case ModelVersion::SDXLSSD1B:
    case ModelVersion::SDXLVega:
      return models::UnetConfig::sdxl();
    default:
      // Instruct-Pix2Pix takes an image latent this build does not feed; the refiner is
      // an object of its own.
      fail_unsupported(v);
  }
}

class Sdxl final : public UnetFamily {
 public:
  Sdxl() : UnetFamily(io::ModelFamily::SDXL, sdxl_defaults(), networks()) {}

  bool runs(ModelVersion v) const override {
    return io::family_of(v) == io::ModelFamily::SDXL && v != ModelVersion::SDXLRefiner;
  }
  // sd.cpp: an empty negative prompt gives an all-zero context (SDXL eps models); its
  // vector is still computed from the empty prompt.
  void complete_conditioning(Conditioning& c, const std::string& prompt, bool negative, int width,
                             int height) const override {
    if (negative && prompt.empty()) std::fill(c.context.begin(), c.context.end(), 0.0f);
    c.vector = sdxl_vector(c.pooled, width, height);
  }

 private:
  static Networks networks() {
    Networks n;
    n.text_encoders = {{models::ClipTextConfig::sdxl_vit_l14, TextConditioner::kScope},
                       {models::ClipTextConfig::vit_bigg14, TextConditioner::kScope2}};
    n.unet = sdxl_unet;
    n.shapes_from_file = true;
    return n;
  }
};

class SdxlRefiner final : public UnetFamily {
 public:
  SdxlRefiner() : UnetFamily(io::ModelFamily::SDXL, sdxl_defaults(), networks()) {}

  bool runs(ModelVersion v) const override { return v == ModelVersion::SDXLRefiner; }
  // SGM's refiner is "legacy": an empty negative prompt is encoded, not zeroed (diffusers'
  // refiner: force_zeros_for_empty_prompt false). The conditioning follows the SGM code
  // and diffusers' defaults (sd.cpp does not run the refiner).
  void complete_conditioning(Conditioning& c, const std::string&, bool negative, int width,
                             int height) const override {
    c.vector =
        sdxl_refiner_vector(c.pooled, width, height,
                            negative ? kRefinerNegativeAestheticScore : kRefinerAestheticScore);
  }

 private:
  // OpenCLIP ViT-bigG alone (its penultimate layer as the 1280-wide context); alone, it
  // pads with 0 as OpenCLIP does.
  static models::ClipTextConfig vit_bigg14() {
    models::ClipTextConfig c = models::ClipTextConfig::vit_bigg14();
    c.pad_token = 0;
    return c;
  }
  static models::UnetConfig unet(ModelVersion) {
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
  static Networks networks() {
    Networks n;
    n.text_encoders = {{vit_bigg14, TextConditioner::kScope}};
    n.unet = unet;
    n.shapes_from_file = true;
    return n;
  }
};

}  // namespace

const Family& sdxl_family() {
  static const Sdxl kFamily;
  return kFamily;
}

const Family& sdxl_refiner_family() {
  static const SdxlRefiner kFamily;
  return kFamily;
}

}  // namespace sd::pipeline
