// What SD 1.x, SD 2.x and SDXL share: CLIP text encoders read in 77-token windows
// (pipeline/text_conditioner.h), a UNet (pipeline/unet_runner.h), SD's autoencoder, and
// the inpainting and instruct-pix2pix variants that feed the UNet an image beside the
// latent.
#pragma once

#include <string_view>
#include <vector>

#include "models/clip_text.h"
#include "models/unet.h"
#include "pipeline/families/family.h"

namespace sd::pipeline {

// A CLIP text encoder of the family and where its weights live (below
// io::kTextEncoderRoot in canonical checkpoints).
struct TextEncoderSpec {
  models::ClipTextConfig (*config)();
  std::string_view scope;
};

class UnetFamily : public Family {
 public:
  struct Networks {
    std::vector<TextEncoderSpec> text_encoders;  // one, or two (SDXL)
    // The UNet of one version (inpaint variants take more input channels); an sd::Error
    // for a version this build cannot run.
    models::UnetConfig (*unet)(io::ModelVersion version) = nullptr;
    // The dimensions come from the file (pipeline/model_shapes.h), the presets giving
    // only what tensors cannot tell.
    bool shapes_from_file = false;
  };
  UnetFamily(io::ModelFamily id, FamilyDefaults defaults, Networks networks)
      : Family(id, defaults), networks_(std::move(networks)) {}

  const std::vector<TextEncoderSpec>& text_encoders() const { return networks_.text_encoders; }
  models::UnetConfig unet(io::ModelVersion version) const { return networks_.unet(version); }

  Architecture architecture(io::ModelVersion version, const ModelFiles& files) const override;
  std::unique_ptr<PromptEncoder> make_prompt_encoder(const Architecture& arch,
                                                     const ModelFiles& files,
                                                     const NetworkPlaces& places) const override;
  std::unique_ptr<DiffusionNet> make_diffusion_net(const Architecture& arch,
                                                   const NetworkPlaces& places) const override;
  ImageInput image_input(io::ModelVersion version) const override;

 private:
  Networks networks_;
};

}  // namespace sd::pipeline
