#include "pipeline/qwen_vision_runner.h"

#include <algorithm>

#include "models/clip_vision.h"

namespace sd::pipeline {

QwenVisionRunner::QwenVisionRunner(nn::Weights& weights, models::QwenVisionConfig config,
                                   Backend& backend)
    : weights_(weights), config_(std::move(config)), runner_(backend) {}

std::vector<float> QwenVisionRunner::encode(const std::vector<float>& image, int64_t width,
                                            int64_t height, int64_t out_w, int64_t out_h) {
  const models::QwenVisionConfig& c = config_;
  const models::QwenVisionLayout layout = models::qwen_vision_layout(c, out_w, out_h);
  const models::QwenVisionInputs in = models::qwen_vision_inputs(
      c, layout, models::clip_normalized_pixels(image, width, height, out_w, out_h));
  const int64_t n = layout.patches(), half = c.head_dim() / 2;
  nn::GraphCall call;
  Tensor* patches =
      call.input_f32("vision_patches", make_shape({3 * c.patch * c.patch, n}), in.patches.data());
  Tensor* cos = call.input_f32("vision_rope_cos", make_shape({half, n}), in.cos.data());
  Tensor* sin = call.input_f32("vision_rope_sin", make_shape({half, n}), in.sin.data());
  Tensor* mask = call.input_f32("vision_window_mask", make_shape({n, n}), in.window_mask.data());
  const std::vector<float> windowed =
      runner_.run(call, models::qwen_vision_forward(nn::Scope(call.ctx(), weights_, kScope), c,
                                                    patches, cos, sin, mask));
  weights_.after_compute();
  // Back to row order: the layout lists which group each computed token is.
  std::vector<float> tokens(windowed.size());
  const int64_t d = c.out_hidden;
  for (int64_t i = 0; i < layout.groups(); ++i)
    std::copy_n(windowed.begin() + i * d, d,
                tokens.begin() + static_cast<int64_t>(layout.order[static_cast<size_t>(i)]) * d);
  return tokens;
}

std::vector<nn::ParamDecl> QwenVisionRunner::parameters() const {
  nn::ParamRecorder recorder(weights_);
  Context ctx;
  const models::QwenVisionConfig& c = config_;
  const int64_t n = c.merge * c.merge, half = c.head_dim() / 2;
  models::qwen_vision_forward(
      nn::Scope(ctx, recorder, kScope), c, ctx.new_tensor(DType::F32, {3 * c.patch * c.patch, n}),
      ctx.new_tensor(DType::F32, {half, n}), ctx.new_tensor(DType::F32, {half, n}),
      ctx.new_tensor(DType::F32, {n, n}));
  return recorder.params();
}

}  // namespace sd::pipeline
