// Runs Qwen-Image's transformer for one sampling step: the latent (padded to even sides)
// cut into 2x2 patches, the text and image positions as rotary tables, the prediction put
// back into latent planes and cropped.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "io/name_conversion.h"
#include "models/qwen_image.h"
#include "nn/graph_runner.h"
#include "nn/weights.h"
#include "pipeline/diffusion_net.h"

namespace sd::pipeline {

class QwenImageRunner final : public DiffusionNet, public ReferenceInput {
 public:
  QwenImageRunner(nn::Weights& weights, models::QwenImageConfig config, Backend& backend);

  // x: [w, h, C]; the conditioning's context is Qwen2.5-VL's last hidden states [text_dim,
  // tokens]. `timestep` is the flow schedule's t = 1000 sigma.
  std::vector<std::vector<float>> predict(const std::vector<float>& x, int64_t w, int64_t h,
                                          float timestep,
                                          const std::vector<const Conditioning*>& conditionings,
                                          const std::vector<float>& concat = {}) override;
  std::vector<nn::ParamDecl> parameters() const override;
  const nn::GraphRunner& graph_runner() const override { return runner_; }
  void release() override { runner_.release(); }
  // Odd latent sides are padded here, as the reference does: images align to the VAE's 8.
  int64_t latent_multiple() const override { return 1; }

  // Qwen-Image-Edit's references: their tokens follow the image's, at image indices 1, 2,
  // ... centred like the image (sd.cpp's "qwen" preset) unless `mode` says otherwise.
  ReferenceInput* references() override { return this; }
  void set_references(std::vector<ReferenceLatent> references,
                      std::optional<models::RefIndexMode> mode) override;
  void use_references(bool on) override { references_on_ = on; }
  // sd.cpp resizes Qwen-Image's references to multiples of 32 pixels: 4 latent pixels.
  int reference_latent_multiple() const override { return 4; }

  static constexpr const char* kScope = io::kUnetRoot.data();

 private:
  Tensor* build(nn::GraphCall& call, nn::Weights& weights, const std::vector<float>& tokens,
                int64_t patches_h, int64_t patches_w, const Conditioning& text, const float& t,
                models::QwenImageRope& rope) const;

  nn::Weights& weights_;
  models::QwenImageConfig config_;
  nn::GraphRunner runner_;
  std::vector<float> ref_tokens_;  // patchified, one reference after another
  std::vector<models::FluxPosition> ref_positions_;
  bool references_on_ = true;
};

}  // namespace sd::pipeline
