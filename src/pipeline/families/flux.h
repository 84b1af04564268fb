// FLUX.1 dev, schnell, Fill and Kontext (black-forest-labs/flux): CLIP-L's pooled output
// and T5-XXL's hidden states, the rectified-flow transformer (pipeline/flux_runner.h), the
// 16-channel autoencoder (scale 0.3611, shift 0.1159), euler on the resolution-shifted flux
// schedule. Dimensions from the files. Chroma (families/chroma.cpp) is this family's
// transformer on T5 alone.
#pragma once

#include "pipeline/families/family.h"

namespace sd::pipeline {

class FluxFamily : public Family {
 public:
  FluxFamily() : FluxFamily(io::ModelFamily::Flux, flux_defaults()) {}

  // FLUX.1 comes as four files; a missing one is named with its flag.
  void require_files(const ModelFiles& files) const override;
  Architecture architecture(io::ModelVersion version, const ModelFiles& files) const override;
  std::vector<std::string> text_encoder_roots(const Architecture& arch) const override;
  std::unique_ptr<PromptEncoder> make_prompt_encoder(const Architecture& arch,
                                                     const ModelFiles& files,
                                                     const NetworkPlaces& places) const override;
  std::unique_ptr<DiffusionNet> make_diffusion_net(const Architecture& arch,
                                                   const NetworkPlaces& places) const override;
  void check_request(io::ModelVersion version, ImageRequest& r) const override;
  ImageInput image_input(io::ModelVersion version) const override;
  // FLUX.1 Fill: the masked image's latent and the mask folded 8x8 into the latent grid
  // (pipeline/flux_fill.h).
  std::vector<float> masked_image_input(const std::vector<float>& masked_latent,
                                        const std::vector<float>& mask,
                                        const std::vector<float>& latent_mask, int width,
                                        int height, int64_t downscale) const override;

 protected:
  FluxFamily(io::ModelFamily id, FamilyDefaults defaults) : Family(id, defaults) {}
  static FamilyDefaults flux_defaults();
  // The transformer preset of `version`, before the file's dimensions are read.
  virtual models::FluxConfig transformer(io::ModelVersion version) const;
  // The transformer, T5 and the autoencoder with the files' dimensions, and T5's width
  // checked against the transformer's.
  Architecture transformer_architecture(io::ModelVersion version, const ModelFiles& files) const;
};

}  // namespace sd::pipeline
