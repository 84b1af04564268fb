// Runs a ControlNet (models/controlnet.h) for the UNet runner: the residuals of one batch
// of latents, each sample with its own conditioning and the same control image. Also reads
// a ControlNet's shape from its file and checks that it fits the model it guides.
#pragma once

#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/controlnet_names.h"
#include "models/controlnet.h"
#include "nn/graph_runner.h"
#include "nn/param_recorder.h"
#include "nn/weights.h"
#include "pipeline/model_shapes.h"

namespace sd::pipeline {

// The residuals of one ControlNet call, each [w_i, h_i, c_i, n] as shapes[i] says.
struct ControlResiduals {
  std::vector<std::vector<float>> values;
  std::vector<Shape> shapes;
};

class ControlNetRunner {
 public:
  ControlNetRunner(nn::Weights& weights, models::ControlNetConfig config, Backend& backend);

  // x: n latents [w, h, unet.in_channels]; timesteps: n values; context: n token sequences
  // [dim, tokens]; vector: n vectors (SDXL) or empty; hint: one control image [8 w, 8 h,
  // hint_channels] in [0, 1], shared by the batch.
  ControlResiduals run(const std::vector<float>& x, int64_t w, int64_t h, int64_t n,
                       const std::vector<float>& timesteps, const std::vector<float>& context,
                       int64_t dim, int64_t tokens, const std::vector<float>& vector,
                       const std::vector<float>& hint);

  const models::ControlNetConfig& config() const { return config_; }
  // Every weight a call reads, with its shape (graph built, nothing computed).
  std::vector<nn::ParamDecl> parameters() const;
  // Frees the compute buffer and the encoded control image (sampling is over).
  void release();
  static constexpr const char* kScope = io::kControlNetRoot.data();

 private:
  nn::Weights& weights_;
  models::ControlNetConfig config_;
  nn::GraphRunner runner_;
  // The control image of the last call and its input_hint_block output, [w, h,
  // model_channels]: the same image at every step is encoded once.
  std::vector<float> hint_source_;
  std::vector<float> guided_hint_;
  int64_t guided_w_ = 0, guided_h_ = 0;
};

// The ControlNet under `scope` (ControlNetRunner::kScope): the encoder's dimensions as
// unet_config_from_shapes reads a UNet's, head layout by family (SDXL when it has
// label_emb, SD 2.x when its context is 1024 wide, else SD 1.x), the hint convs' widths.
models::ControlNetConfig controlnet_config_from_shapes(std::string_view scope,
                                                       const ShapeOf& shape_of);

// Throws an sd::Error naming `file` when the ControlNet cannot guide `unet`: another
// family (context or vector width) or other block widths.
void check_controlnet_fits(const models::ControlNetConfig& control, const models::UnetConfig& unet,
                           const std::string& file);

}  // namespace sd::pipeline
