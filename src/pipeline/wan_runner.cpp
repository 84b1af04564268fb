#include "pipeline/wan_runner.h"

#include <algorithm>
#include <cmath>

#include "nn/param_recorder.h"
#include "tensor/error.h"

namespace sd::pipeline {

WanRunner::WanRunner(nn::Weights& weights, models::WanConfig config, Backend& backend,
                     std::string scope)
    : weights_(weights), config_(std::move(config)), scope_(std::move(scope)), runner_(backend) {}

Tensor* WanRunner::build(nn::GraphCall& call, nn::Weights& weights, const Inputs& in,
                         models::WanRope& rope) const {
  const models::WanConfig& c = config_;
  const int64_t tokens = in.frames * in.rows * in.cols;
  const int64_t half = c.head_dim / 2;
  rope = models::wan_rope(c, in.frames, in.rows, in.cols);
  Tensor* patches = call.input_f32("patches", make_shape({c.patch_in(), tokens}), in.patches);
  Tensor* text = call.input_f32("text", make_shape({c.text_dim, in.text_tokens}), in.text);
  const auto steps = static_cast<int64_t>(in.timesteps.size());
  Tensor* t = call.input_f32("timestep", make_shape({steps}), in.timesteps.data());
  Tensor* rc = call.input_f32("rope_cos", make_shape({half, tokens}), rope.cos.data());
  Tensor* rs = call.input_f32("rope_sin", make_shape({half, tokens}), rope.sin.data());
  Tensor* image = nullptr;
  if (c.image_dim > 0)
    image = call.input_f32("image_tokens", make_shape({c.image_dim, in.image_tokens}), in.image);
  Tensor* vace = nullptr;
  if (c.vace_layers > 0)
    vace = call.input_f32("vace_patches", make_shape({c.vace_patch_in(), tokens}), in.vace);
  return models::wan_forward(nn::Scope(call.ctx(), weights, scope_), c, patches, text, t, rc, rs,
                             image, vace, vace_strength_);
}

std::vector<std::vector<float>> WanRunner::predict(
    const std::vector<float>& x, int64_t w, int64_t h, float timestep,
    const std::vector<const Conditioning*>& conditionings, const std::vector<float>& concat) {
  const models::WanConfig& c = config_;
  // The latent has the output's channels; image to video appends its condition's.
  const int64_t frame_values = w * h * c.out_channels;
  SD_CHECK(w % 2 == 0 && h % 2 == 0 && frame_values > 0 && !x.empty() &&
               x.size() % static_cast<size_t>(frame_values) == 0,
           "[wan] a %lldx%lld latent of %zu values is not whole frames of %lld channels in 2x2 "
           "patches",
           static_cast<long long>(w), static_cast<long long>(h), x.size(),
           static_cast<long long>(c.out_channels));
  const int64_t frames = static_cast<int64_t>(x.size()) / frame_values;
  SD_CHECK(fixed_frames_.empty() || static_cast<int64_t>(fixed_frames_.size()) == frames,
           "[wan] %zu fixed-frame flags for a latent of %lld frames", fixed_frames_.size(),
           static_cast<long long>(frames));
  const int64_t extra = c.in_channels - c.out_channels;
  SD_CHECK(concat.size() == static_cast<size_t>(frames * w * h * extra),
           extra > 0 ? "[wan] this image-to-video transformer needs the conditioning clip (-i): "
                       "%zu values given, %lld frames of %lld channels expected"
                     : "[wan] this text-to-video transformer takes no extra input: %zu values "
                       "given, %lld frames of %lld channels expected",
           concat.size(), static_cast<long long>(frames), static_cast<long long>(extra));
  SD_CHECK(c.image_dim == 0 || !image_tokens_.empty(),
           "[wan] this image-to-video transformer needs the CLIP vision tokens of the first "
           "frame (--clip_vision)");
  SD_CHECK(c.vace_layers == 0 ||
               vace_context_.size() == static_cast<size_t>(frames * w * h * c.vace_in_channels),
           "[wan] this VACE transformer needs its context for %lld latent frames (%zu values "
           "given): a control video (--control-video)",
           static_cast<long long>(frames), vace_context_.size());
  std::vector<float> input = x;
  input.insert(input.end(), concat.begin(), concat.end());
  const std::vector<float> patches = models::wan_patchify(input, w, h, frames, c.in_channels);
  const std::vector<float> vace_patches =
      c.vace_layers > 0 ? models::wan_patchify(vace_context_, w, h, frames, c.vace_in_channels)
                        : std::vector<float>{};
  std::vector<std::vector<float>> out;
  for (const Conditioning* cond : conditionings) {
    SD_CHECK(cond->dim == c.text_dim && cond->tokens > 0,
             "[wan] the text encoder gives %lld-wide tokens, this transformer reads %lld",
             static_cast<long long>(cond->dim), static_cast<long long>(c.text_dim));
    Inputs in;
    in.patches = patches.data();
    in.frames = frames;
    in.rows = h / 2;
    in.cols = w / 2;
    in.text = cond->context.data();
    in.text_tokens = cond->tokens;
    in.timesteps = {timestep};
    if (!fixed_frames_.empty()) {
      // Fixed frames are clean: timestep 0; the rest at the step's.
      in.timesteps.assign(static_cast<size_t>(frames), timestep);
      for (size_t f = 0; f < in.timesteps.size(); ++f)
        if (fixed_frames_[f]) in.timesteps[f] = 0.0f;
    }
    in.image = image_tokens_.data();
    in.image_tokens =
        static_cast<int64_t>(image_tokens_.size()) / std::max<int64_t>(c.image_dim, 1);
    in.vace = vace_patches.data();
    nn::GraphCall call;
    models::WanRope rope;
    Tensor* pred = build(call, weights_, in, rope);
    const std::vector<float> result = runner_.run(call, pred);
    weights_.after_compute();
    out.push_back(models::wan_unpatchify(result, w, h, frames, c.out_channels));
  }
  return out;
}

std::vector<nn::ParamDecl> WanRunner::parameters() const {
  nn::ParamRecorder recorder(weights_);
  nn::GraphCall call;
  const std::vector<float> patches(static_cast<size_t>(config_.patch_in() * 4));
  const std::vector<float> text(static_cast<size_t>(config_.text_dim * 2));
  Inputs in;
  in.patches = patches.data();
  in.frames = 1;
  in.rows = in.cols = 2;
  in.text = text.data();
  in.text_tokens = 2;
  in.timesteps = {0.0f};
  const std::vector<float> image(static_cast<size_t>(config_.image_dim * 2));
  in.image = image.data();
  in.image_tokens = 2;
  const std::vector<float> vace(static_cast<size_t>(config_.vace_patch_in() * 4));
  in.vace = vace.data();
  models::WanRope rope;
  build(call, recorder, in, rope);
  return recorder.params();
}

void WanRunner::set_image_tokens(std::vector<float> tokens) {
  SD_CHECK(config_.image_dim > 0 && !tokens.empty() &&
               tokens.size() % static_cast<size_t>(config_.image_dim) == 0,
           "[wan] %zu image token values for an img_emb reading %lld-wide tokens", tokens.size(),
           static_cast<long long>(config_.image_dim));
  image_tokens_ = std::move(tokens);
}

void WanRunner::set_vace_context(std::vector<float> context, float strength) {
  SD_CHECK(config_.vace_layers > 0 && !context.empty() &&
               context.size() % static_cast<size_t>(config_.vace_in_channels) == 0,
           "[wan] %zu VACE context values for a transformer reading %lld channels", context.size(),
           static_cast<long long>(config_.vace_in_channels));
  SD_CHECK(std::isfinite(strength), "--vace-strength must be a finite number");
  vace_context_ = std::move(context);
  vace_strength_ = strength;
}

}  // namespace sd::pipeline
