#include "pipeline/z_image_runner.h"

#include "nn/param_recorder.h"
#include "tensor/error.h"

namespace sd::pipeline {

ZImageRunner::ZImageRunner(nn::Weights& weights, models::ZImageConfig config, Backend& backend)
    : weights_(weights), config_(std::move(config)), runner_(backend) {}

Tensor* ZImageRunner::build(nn::GraphCall& call, nn::Weights& weights, const Inputs& in,
                            models::ZImageRope& rope) const {
  const models::ZImageConfig& c = config_;
  const int64_t width = int64_t{c.patch_size} * c.patch_size * c.in_channels;
  rope = models::z_image_rope(c, in.caption_tokens, in.patches_h, in.patches_w);
  const int64_t half = c.head_dim / 2;
  const int64_t tokens = static_cast<int64_t>(rope.cos.size()) / half;
  Tensor* img = call.input_f32("img", make_shape({width, in.image_tokens}), in.tokens);
  Tensor* cap =
      call.input_f32("caption", make_shape({c.caption_dim, in.caption_tokens}), in.caption);
  Tensor* t = call.input_f32("timestep", make_shape({1}), &in.timestep);
  Tensor* rc = call.input_f32("rope_cos", make_shape({half, tokens}), rope.cos.data());
  Tensor* rs = call.input_f32("rope_sin", make_shape({half, tokens}), rope.sin.data());
  return models::z_image_forward(nn::Scope(call.ctx(), weights, kScope), c, img, cap, t, rc, rs);
}

std::vector<std::vector<float>> ZImageRunner::predict(
    const std::vector<float>& x, int64_t w, int64_t h, float timestep,
    const std::vector<const Conditioning*>& conditionings, const std::vector<float>& concat) {
  const models::ZImageConfig& c = config_;
  const int p = c.patch_size;
  SD_CHECK(concat.empty(), "[z-image] the transformer takes no extra input planes");
  SD_CHECK(w % p == 0 && h % p == 0 && x.size() == static_cast<size_t>(w * h * c.in_channels),
           "[z-image] a %lldx%lld latent of %zu values does not make %dx%d patches of %lld "
           "channels",
           static_cast<long long>(w), static_cast<long long>(h), x.size(), p, p,
           static_cast<long long>(c.in_channels));
  const std::vector<float> tokens = models::z_image_patchify(x, w, h, c.in_channels, p);
  std::vector<std::vector<float>> out;
  for (const Conditioning* cond : conditionings) {
    SD_CHECK(cond->dim == c.caption_dim && cond->tokens > 0,
             "[z-image] the text encoder gives %lld-wide tokens, this transformer reads %lld",
             static_cast<long long>(cond->dim), static_cast<long long>(c.caption_dim));
    Inputs in;
    in.tokens = tokens.data();
    in.patches_h = h / p;
    in.patches_w = w / p;
    in.image_tokens = in.patches_h * in.patches_w;
    in.caption = cond->context.data();
    in.caption_tokens = cond->tokens;
    in.timestep = 1000.0f - timestep;  // Z-Image's time runs from noise (0) to image (1000)
    nn::GraphCall call;
    models::ZImageRope rope;
    Tensor* pred = build(call, weights_, in, rope);
    const std::vector<float> result = runner_.run(call, pred);
    weights_.after_compute();
    out.push_back(models::z_image_unpatchify(result, w, h, c.out_channels, p));
  }
  return out;
}

std::vector<nn::ParamDecl> ZImageRunner::parameters() const {
  nn::ParamRecorder recorder(weights_);
  nn::GraphCall call;
  const int64_t width = int64_t{config_.patch_size} * config_.patch_size * config_.in_channels;
  const std::vector<float> tokens(static_cast<size_t>(width * 4));
  const std::vector<float> caption(static_cast<size_t>(config_.caption_dim * 2));
  Inputs in;
  in.tokens = tokens.data();
  in.image_tokens = 4;
  in.patches_h = in.patches_w = 2;
  in.caption = caption.data();
  in.caption_tokens = 2;
  models::ZImageRope rope;
  build(call, recorder, in, rope);
  return recorder.params();
}

}  // namespace sd::pipeline
