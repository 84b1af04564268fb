// Stable Diffusion 1.x (CompVis/runwayml v1-inference.yaml): OpenAI CLIP ViT-L/14, a UNet
// predicting eps, SD's autoencoder; its inpainting (9 input channels) and instruct-pix2pix
// (8) variants.
#include "pipeline/families/registry.h"
#include "pipeline/families/unet_family.h"
#include "pipeline/text_conditioner.h"

namespace sd::pipeline {

namespace {

using io::ModelVersion;

class Sd1 final : public UnetFamily {
 public:
  Sd1() : UnetFamily(io::ModelFamily::SD1, defaults(), networks()) {}

 private:
  static FamilyDefaults defaults() {
    FamilyDefaults d;
    d.vae = models::VaeConfig::sd;
    d.prediction = sampling::Prediction::Eps;
    d.ays_levels = sampling::AysLevels::SD1;
    return d;
  }
  static Networks networks() {
    Networks n;
    n.text_encoders = {{models::ClipTextConfig::vit_l14, TextConditioner::kScope}};
    n.unet = unet;
    return n;
  }
  static models::UnetConfig unet(ModelVersion v) {
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
        fail_unsupported(v);
    }
  }
};

}  // namespace

const Family& sd1_family() {
  static const Sd1 kFamily;
  return kFamily;
}

}  // namespace sd::pipeline
