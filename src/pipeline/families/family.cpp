#include "pipeline/families/family.h"

#include <string>

#include "tensor/error.h"
#include "weights/model_loader.h"

namespace sd::pipeline {

bool ModelFiles::contains(std::string_view name) const {
  return loader.contains(std::string(name));
}

ShapeOf ModelFiles::shape_of() const {
  const weights::ModelLoader* l = &loader;
  return [l](const std::string& name) {
    std::optional<std::array<int64_t, 4>> ne;
    if (l->contains(name)) ne = l->find(name).ne;
    return ne;
  };
}

void Family::check_model_args(const ModelFiles& files) const {
  // The family keys: each family that reads one answers for it (override).
  const T5MaskOptions& chroma = files.model_args.chroma;
  if (chroma.t5_mask || !chroma.dit_mask)
    files.note("warning: --model-args chroma_* options are read by Chroma models only");
  if (files.model_args.qwen_image_zero_cond_t)
    files.note("warning: --model-args qwen_image_zero_cond_t is read by Qwen-Image models only");
}

std::vector<std::string> Family::text_encoder_roots(const Architecture&) const {
  return {std::string(io::kTextEncoderRoot)};
}

std::vector<float> Family::masked_image_input(const std::vector<float>& masked_latent,
                                              const std::vector<float>&,
                                              const std::vector<float>& latent_mask, int, int,
                                              int64_t) const {
  std::vector<float> input = latent_mask;
  input.insert(input.end(), masked_latent.begin(), masked_latent.end());
  return input;
}

std::vector<float> Family::video_frames_input(const std::vector<float>&, int64_t, int64_t, bool,
                                              bool) const {
  fail("%s models take no conditioning clip", name());
}

models::VaeConfig Family::vae_config() const {
  models::VaeConfig c = defaults_.vae();
  c.z_channels = c.embed_dim = defaults_.latent_channels;
  c.scale_factor = defaults_.scale_factor;
  c.shift_factor = defaults_.shift_factor;
  return c;
}

sampling::Scheduler Family::default_scheduler(sampling::SampleMethod method,
                                              sampling::Prediction prediction) const {
  const sampling::Scheduler s = sampling::default_scheduler(method, prediction);
  // sd.cpp's order: LCM/TCD and ddim_trailing keep theirs, then the family's.
  return s == sampling::Scheduler::Discrete && defaults_.scheduler ? *defaults_.scheduler : s;
}

}  // namespace sd::pipeline
