// Runs Z-Image's transformer for one sampling step: the latent cut into 2x2 patches, the
// caption and image positions as rotary tables, the prediction put back into latent planes.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "io/name_conversion.h"
#include "models/z_image.h"
#include "nn/graph_runner.h"
#include "nn/weights.h"
#include "pipeline/diffusion_net.h"

namespace sd::pipeline {

class ZImageRunner final : public DiffusionNet {
 public:
  ZImageRunner(nn::Weights& weights, models::ZImageConfig config, Backend& backend);

  // x: [w, h, C]; the conditioning's context is the LLM's hidden states [caption_dim,
  // tokens]. `timestep` is the flow schedule's t = 1000 sigma.
  std::vector<std::vector<float>> predict(const std::vector<float>& x, int64_t w, int64_t h,
                                          float timestep,
                                          const std::vector<const Conditioning*>& conditionings,
                                          const std::vector<float>& concat = {}) override;
  std::vector<nn::ParamDecl> parameters() const override;
  const nn::GraphRunner& graph_runner() const override { return runner_; }
  void release() override { runner_.release(); }
  int64_t latent_multiple() const override { return config_.patch_size; }

  static constexpr const char* kScope = io::kUnetRoot.data();

 private:
  // The graph of one prediction, built alike for a run and for the parameter list.
  struct Inputs {
    const float* tokens = nullptr;
    int64_t image_tokens = 0, patches_h = 0, patches_w = 0;
    const float* caption = nullptr;
    int64_t caption_tokens = 0;
    float timestep = 0;
  };
  Tensor* build(nn::GraphCall& call, nn::Weights& weights, const Inputs& in,
                models::ZImageRope& rope) const;

  nn::Weights& weights_;
  models::ZImageConfig config_;
  nn::GraphRunner runner_;
};

}  // namespace sd::pipeline
