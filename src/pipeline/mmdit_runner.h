// Runs SD3's MMDiT for one sampling step: the latent planes in, the joint transformer over
// the conditioning's CLIP and T5 tokens and its pooled vector, the patches back into planes.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "io/name_conversion.h"
#include "models/mmdit.h"
#include "nn/graph_runner.h"
#include "nn/weights.h"
#include "pipeline/diffusion_net.h"

namespace sd::pipeline {

class MmditRunner final : public DiffusionNet, public SkipLayerInput {
 public:
  MmditRunner(nn::Weights& weights, models::MmditConfig config, Backend& backend);

  // x: [w, h, in_channels]; `timestep` is sigma * 1000 (sd3_flow). The conditioning's
  // context is the joined CLIP/T5 tokens, its vector the pooled CLIP-L + CLIP-G outputs.
  std::vector<std::vector<float>> predict(const std::vector<float>& x, int64_t w, int64_t h,
                                          float timestep,
                                          const std::vector<const Conditioning*>& conditionings,
                                          const std::vector<float>& concat = {}) override;
  std::vector<nn::ParamDecl> parameters() const override;
  const nn::GraphRunner& graph_runner() const override { return runner_; }
  void release() override { runner_.release(); }
  int64_t latent_multiple() const override { return config_.patch_size; }

  // One prediction with joint blocks left out (skip-layer guidance's extra pass).
  std::vector<float> predict_skipping(const std::vector<float>& x, int64_t w, int64_t h,
                                      float timestep, const Conditioning& c,
                                      const std::vector<int>& skip_layers) override;
  SkipLayerInput* skip_layers() override { return this; }

  const models::MmditConfig& config() const { return config_; }
  static constexpr const char* kScope = io::kUnetRoot.data();

 private:
  nn::Weights& weights_;
  models::MmditConfig config_;
  nn::GraphRunner runner_;
};

}  // namespace sd::pipeline
