// Qwen2.5-VL's vision tower (models/qwen_vl_vision.h) on an image: resized to the sides the
// family asks for, normalized as CLIP's inputs, run, and its tokens put back in row order.
// Qwen-Image-Edit's text encoder reads these in place of the image's placeholder tokens.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "io/name_conversion.h"
#include "models/qwen_vl_vision.h"
#include "nn/graph_runner.h"
#include "nn/param_recorder.h"
#include "nn/weights.h"

namespace sd::pipeline {

class QwenVisionRunner {
 public:
  QwenVisionRunner(nn::Weights& weights, models::QwenVisionConfig config, Backend& backend);

  // image [width, height, 3] in [0, 1], shown to the tower at out_w x out_h (multiples of
  // the config's factor) -> tokens f32 [out_hidden, (out_w / factor) * (out_h / factor)],
  // row by row.
  std::vector<float> encode(const std::vector<float>& image, int64_t width, int64_t height,
                            int64_t out_w, int64_t out_h);

  const models::QwenVisionConfig& config() const { return config_; }
  std::vector<nn::ParamDecl> parameters() const;
  std::string streaming_report() const { return runner_.streaming_report(); }
  void release() { runner_.release(); }
  static constexpr const char* kScope = io::kLlmVisionRoot.data();

 private:
  nn::Weights& weights_;
  models::QwenVisionConfig config_;
  nn::GraphRunner runner_;
};

}  // namespace sd::pipeline
