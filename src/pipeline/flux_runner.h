// Runs FLUX.1's transformer for one sampling step: the latent cut into 2x2 patches, text
// and image positions as rotary tables, the prediction put back into latent planes.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "io/name_conversion.h"
#include "models/flux.h"
#include "models/flux_kontext.h"
#include "nn/graph_runner.h"
#include "nn/weights.h"
#include "pipeline/diffusion_net.h"

namespace sd::pipeline {

class FluxRunner final : public DiffusionNet, public ReferenceInput {
 public:
  FluxRunner(nn::Weights& weights, models::FluxConfig config, Backend& backend);

  // x: [w, h, C] with C * patch^2 = in_channels; the conditioning's context is T5's hidden
  // states, its vector CLIP-L's pooled output. `timestep` is sigma (flow matching).
  std::vector<std::vector<float>> predict(const std::vector<float>& x, int64_t w, int64_t h,
                                          float timestep,
                                          const std::vector<const Conditioning*>& conditionings,
                                          const std::vector<float>& concat = {}) override;
  std::vector<nn::ParamDecl> parameters() const override;
  const nn::GraphRunner& graph_runner() const override { return runner_; }
  void release() override { runner_.release(); }
  int64_t latent_multiple() const override { return config_.patch_size; }
  void set_distilled_guidance(float guidance) override { guidance_ = guidance; }

  // FLUX.1 Kontext: encoded reference images whose tokens join the image's.
  using Reference = ReferenceLatent;
  void set_references(std::vector<Reference> references,
                      std::optional<models::RefIndexMode> mode) override;
  // Whole patches, as sd.cpp resizes FLUX references (16 pixels with the 8x VAE).
  int reference_latent_multiple() const override { return config_.patch_size; }
  void use_references(bool on) override { references_on_ = on; }
  ReferenceInput* references() override { return this; }

  const models::FluxConfig& config() const { return config_; }
  static constexpr const char* kScope = io::kUnetRoot.data();

 private:
  std::vector<float> run_one(const std::vector<float>& tokens, int64_t w, int64_t h, float timestep,
                             const Conditioning& c);

  nn::Weights& weights_;
  models::FluxConfig config_;
  nn::GraphRunner runner_;
  float guidance_ = 3.5f;
  // The references' tokens [in_channels, tokens] and their rotary positions.
  std::vector<float> ref_tokens_;
  std::vector<models::FluxPosition> ref_positions_;
  bool references_on_ = true;
};

}  // namespace sd::pipeline
