#include "pipeline/families/unet_family.h"

#include "pipeline/families/tokenizers.h"
#include "pipeline/text_conditioner.h"
#include "pipeline/unet_runner.h"
#include "tensor/error.h"
#include "weights/model_manager.h"

namespace sd::pipeline {

Architecture UnetFamily::architecture(io::ModelVersion version, const ModelFiles& files) const {
  Architecture arch;
  arch.version = version;
  arch.unet = unet(version);
  arch.text = networks_.text_encoders.front().config();
  if (networks_.text_encoders.size() > 1) arch.text2 = networks_.text_encoders[1].config();
  arch.vae = vae_config();
  if (networks_.shapes_from_file) {
    const ShapeOf shape_of = files.shape_of();
    arch.unet = unet_config_from_shapes(arch.unet, io::kUnetRoot, shape_of);
    arch.text = clip_config_from_shapes(arch.text, networks_.text_encoders.front().scope, shape_of);
    if (arch.text2)
      arch.text2 = clip_config_from_shapes(*arch.text2, networks_.text_encoders[1].scope, shape_of);
    arch.vae = vae_config_from_shapes(arch.vae, io::kVaeRoot, shape_of);
  }
  return arch;
}

std::unique_ptr<PromptEncoder> UnetFamily::make_prompt_encoder(const Architecture& arch,
                                                               const ModelFiles& files,
                                                               const NetworkPlaces& places) const {
  const std::vector<TextEncoderSpec>& encoders = networks_.text_encoders;
  SD_CHECK(arch.text2.has_value() == (encoders.size() == 2), "%s: expected %zu text encoders",
           name(), encoders.size());
  std::optional<TextEncoderSetup> second;
  if (arch.text2) second = TextEncoderSetup{*arch.text2, std::string(encoders[1].scope)};
  return std::make_unique<TextConditioner>(clip_tokenizer(files), arch.text, places.weights,
                                           places.text_backend, files.options.embeddings_dir,
                                           std::string(encoders.front().scope), second);
}

std::unique_ptr<DiffusionNet> UnetFamily::make_diffusion_net(const Architecture& arch,
                                                             const NetworkPlaces& places) const {
  return std::make_unique<UnetRunner>(places.weights, arch.unet, places.diffusion_backend);
}

ImageInput UnetFamily::image_input(io::ModelVersion version) const {
  if (io::is_inpaint(version)) return ImageInput::MaskedImage;
  if (io::is_pix2pix(version)) return ImageInput::EditImage;
  return ImageInput::None;
}

}  // namespace sd::pipeline
