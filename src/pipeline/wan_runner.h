// Runs Wan's transformer for one sampling step on a video latent: the latent cut into
// 1x2x2 patches, their frame, row and column as rotary tables, the prediction put back.
#pragma once

#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/name_conversion.h"
#include "models/wan.h"
#include "nn/graph_runner.h"
#include "nn/weights.h"
#include "pipeline/diffusion_net.h"

namespace sd::pipeline {

class WanRunner final : public DiffusionNet,
                        private ImageTokenInput,
                        private FixedFrameInput,
                        private VaceInput {
 public:
  // `scope`: where its weights are named (the high-noise expert's root for A14B's).
  WanRunner(nn::Weights& weights, models::WanConfig config, Backend& backend,
            std::string scope = std::string(io::kUnetRoot));

  // x: a video latent [w, h, frames, C] (the frame count is its size over w * h * C); the
  // conditioning's context is umT5's hidden states [text_dim, tokens]. `timestep` is the
  // flow schedule's t = 1000 sigma. Image to video: `concat` holds the condition's planes
  // [w, h, frames, in - out channels] (mask, then the clip's latent).
  std::vector<std::vector<float>> predict(const std::vector<float>& x, int64_t w, int64_t h,
                                          float timestep,
                                          const std::vector<const Conditioning*>& conditionings,
                                          const std::vector<float>& concat = {}) override;
  std::vector<nn::ParamDecl> parameters() const override;
  const nn::GraphRunner& graph_runner() const override { return runner_; }
  void release() override { runner_.release(); }
  int64_t latent_multiple() const override { return 2; }
  ImageTokenInput* image_tokens() override { return config_.image_dim > 0 ? this : nullptr; }
  void set_image_tokens(std::vector<float> tokens) override;
  int64_t image_token_width() const override { return config_.image_dim; }
  bool reads_last_frame_tokens() const override { return config_.image_pos_tokens > 0; }
  FixedFrameInput* fixed_frames() override { return this; }
  void set_fixed_frames(std::vector<bool> fixed) override { fixed_frames_ = std::move(fixed); }
  VaceInput* vace() override { return config_.vace_layers > 0 ? this : nullptr; }
  void set_vace_context(std::vector<float> context, float strength) override;
  int64_t vace_channels() const override { return config_.vace_in_channels; }

  const models::WanConfig& config() const { return config_; }

 private:
  struct Inputs {
    const float* patches = nullptr;
    int64_t frames = 0, rows = 0, cols = 0;
    const float* text = nullptr;
    int64_t text_tokens = 0;
    std::vector<float> timesteps;  // one, or one per frame
    const float* image = nullptr;  // CLIP vision tokens [image_dim, image_tokens]
    int64_t image_tokens = 0;
    const float* vace = nullptr;  // VACE context patches [vace_patch_in, tokens]
  };
  Tensor* build(nn::GraphCall& call, nn::Weights& weights, const Inputs& in,
                models::WanRope& rope) const;

  nn::Weights& weights_;
  models::WanConfig config_;
  std::string scope_;
  nn::GraphRunner runner_;
  std::vector<float> image_tokens_;
  std::vector<bool> fixed_frames_;
  std::vector<float> vace_context_;  // [w, h, frames, vace_in_channels]
  float vace_strength_ = 1.0f;
};

}  // namespace sd::pipeline
