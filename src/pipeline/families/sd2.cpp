// Stable Diffusion 2.x (Stability-AI v2-inference(-v).yaml): OpenCLIP ViT-H/14, a UNet
// predicting eps or v (which the files do not tell: the net is probed), SD's autoencoder;
// its inpainting variant.
#include "pipeline/families/registry.h"
#include "pipeline/families/unet_family.h"
#include "pipeline/text_conditioner.h"

namespace sd::pipeline {

namespace {

using io::ModelVersion;

class Sd2 final : public UnetFamily {
 public:
  Sd2() : UnetFamily(io::ModelFamily::SD2, defaults(), networks()) {}

 private:
  static FamilyDefaults defaults() {
    FamilyDefaults d;
    d.vae = models::VaeConfig::sd;
    // Align Your Steps publishes no SD2 levels. sd.cpp means to fall back to SD1's but
    // reads an empty list instead (undefined behaviour); SD1's is the intended result.
    d.ays_levels = sampling::AysLevels::SD1;
    return d;
  }
  static Networks networks() {
    Networks n;
    n.text_encoders = {{models::ClipTextConfig::vit_h14, TextConditioner::kScope}};
    n.unet = unet;
    return n;
  }
  static models::UnetConfig unet(ModelVersion v) {
    models::UnetConfig c = models::UnetConfig::sd2();
    switch (v) {
      case ModelVersion::SD2:
        return c;
      case ModelVersion::SD2Inpaint:
        c.in_channels = 9;  // latent + mask + masked-image latent
        return c;
      default:
        fail_unsupported(v);
    }
  }
};

}  // namespace

const Family& sd2_family() {
  static const Sd2 kFamily;
  return kFamily;
}

}  // namespace sd::pipeline
