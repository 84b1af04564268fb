#include "pipeline/clip_vision_runner.h"

namespace sd::pipeline {

ClipVisionRunner::ClipVisionRunner(nn::Weights& weights, models::ClipVisionConfig config,
                                   Backend& backend)
    : weights_(weights), config_(std::move(config)), runner_(backend) {}

// Wan's own code reads the penultimate layer (use_31_block); sd.cpp asks for clip skip -2
// but its encoder honours only positive skips, so it runs every layer. We run every layer
// too, so that a clip made here is the one the reference makes from the same files.
int ClipVisionRunner::layers() const {
  return config_.layers;
}

std::vector<float> ClipVisionRunner::encode(const std::vector<float>& image, int64_t width,
                                            int64_t height) {
  const std::vector<float> pixels = models::clip_vision_pixels(image, width, height, config_);
  nn::GraphCall call;
  const int64_t size = config_.image_size;
  Tensor* x = call.input_f32("pixels", make_shape({size, size, 3, 1}), pixels.data());
  std::vector<float> tokens = runner_.run(
      call,
      models::clip_vision_hidden(nn::Scope(call.ctx(), weights_, kScope), config_, x, layers()));
  weights_.after_compute();
  return tokens;
}

std::vector<nn::ParamDecl> ClipVisionRunner::parameters() const {
  nn::ParamRecorder recorder(weights_);
  Context ctx;
  const int64_t size = config_.image_size;
  models::clip_vision_hidden(nn::Scope(ctx, recorder, kScope), config_,
                             ctx.new_tensor(DType::F32, {size, size, 3, 1}), layers());
  return recorder.params();
}

}  // namespace sd::pipeline
