// CLIP vision tokens of an image (models/clip_vision.h), for networks that attend to an
// image besides the text (Wan 2.1's image to video, --clip_vision).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "io/name_conversion.h"
#include "models/clip_vision.h"
#include "nn/graph_runner.h"
#include "nn/param_recorder.h"
#include "nn/weights.h"

namespace sd::pipeline {

class ClipVisionRunner {
 public:
  ClipVisionRunner(nn::Weights& weights, models::ClipVisionConfig config, Backend& backend);

  // image [width, height, 3] in [0, 1] -> tokens f32 [hidden, 257] (the class token, then
  // the patches), the hidden states as the reference hands them to Wan.
  std::vector<float> encode(const std::vector<float>& image, int64_t width, int64_t height);

  const models::ClipVisionConfig& config() const { return config_; }
  std::vector<nn::ParamDecl> parameters() const;
  void release() { runner_.release(); }
  static constexpr const char* kScope = io::kClipVisionRoot.data();

 private:
  int layers() const;

  nn::Weights& weights_;
  models::ClipVisionConfig config_;
  nn::GraphRunner runner_;
};

}  // namespace sd::pipeline
