// Runs the UNet for one sampling step: the same latent under several conditionings (the
// prompt, and the negative prompt for classifier-free guidance). Conditionings of equal
// length run as one batch, so every weight is read once per step instead of once per
// conditioning.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "io/name_conversion.h"
#include "models/unet.h"
#include "nn/graph_runner.h"
#include "nn/param_recorder.h"
#include "nn/weights.h"
#include "pipeline/controlnet_runner.h"
#include "pipeline/diffusion_net.h"

namespace sd::pipeline {

class UnetRunner final : public DiffusionNet, public ControlInput {
 public:
  UnetRunner(nn::Weights& weights, models::UnetConfig config, Backend& backend);

  // x: [w, h, C] with C = in_channels - extra channels; `concat` (inpainting models): [w, h,
  // in_channels - C] appended along channels, or empty. Returns one [w, h, out_channels]
  // prediction per conditioning, in order.
  std::vector<std::vector<float>> predict(const std::vector<float>& x, int64_t w, int64_t h,
                                          float timestep,
                                          const std::vector<const Conditioning*>& conditionings,
                                          const std::vector<float>& concat = {}) override;

  const models::UnetConfig& config() const override { return config_; }
  void set_control(ControlNetRunner* net, std::vector<float> hint = {},
                   float strength = 1.0f) override;
  ControlInput* control() override { return this; }
  bool is_unet() const override { return true; }
  // SD 2.x files do not say whether they predict eps or v: the UNet is probed once, as
  // sd.cpp does (x = 0.5 on an 8x8 latent, two context tokens of 0.5, t = 999; v if
  // mean(out - x) < -1).
  std::optional<sampling::Prediction> probe_prediction() override;
  // Every weight a prediction reads, with its shape (graph built, nothing computed).
  std::vector<nn::ParamDecl> parameters() const override;
  const nn::GraphRunner& graph_runner() const override { return runner_; }
  // Frees the compute buffer (sampling is over).
  void release() override { runner_.release(); }
  // SD's UNets halve the latent at every level but the last.
  int64_t latent_multiple() const override {
    return int64_t{1} << (config_.channel_mult.size() - 1);
  }
  static constexpr const char* kScope = io::kUnetRoot.data();

 private:
  std::vector<std::vector<float>> run_batch(const std::vector<float>& x_in, int64_t w, int64_t h,
                                            float timestep,
                                            const std::vector<const Conditioning*>& batch);

  nn::Weights& weights_;
  models::UnetConfig config_;
  nn::GraphRunner runner_;
  ControlNetRunner* control_net_ = nullptr;
  std::vector<float> control_hint_;
  float control_strength_ = 1.0f;
};

}  // namespace sd::pipeline
