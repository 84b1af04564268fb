#include "pipeline/qwen_image_runner.h"

#include "models/flux.h"
#include "nn/param_recorder.h"
#include "tensor/error.h"

namespace sd::pipeline {

namespace {

// [w, h, C] planes zero-padded to even sides (right and bottom).
std::vector<float> pad_to_even(const std::vector<float>& x, int64_t w, int64_t h, int64_t c,
                               int64_t pw, int64_t ph) {
  if (pw == w && ph == h) return x;
  std::vector<float> out(static_cast<size_t>(pw * ph * c), 0.0f);
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t y = 0; y < h; ++y)
      std::copy_n(x.begin() + (ch * h + y) * w, w, out.begin() + (ch * ph + y) * pw);
  return out;
}

// A [w, h, C] latent as 2x2-patch tokens, odd sides padded first.
std::vector<float> latent_tokens(const std::vector<float>& x, int64_t w, int64_t h, int64_t c,
                                 int p) {
  const int64_t pw = (w + p - 1) / p * p, ph = (h + p - 1) / p * p;
  return models::flux_patchify(pad_to_even(x, w, h, c, pw, ph), pw, ph, c, p);
}

std::vector<float> crop(const std::vector<float>& x, int64_t pw, int64_t ph, int64_t c, int64_t w,
                        int64_t h) {
  if (pw == w && ph == h) return x;
  std::vector<float> out(static_cast<size_t>(w * h * c));
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t y = 0; y < h; ++y)
      std::copy_n(x.begin() + (ch * ph + y) * pw, w, out.begin() + (ch * h + y) * w);
  return out;
}

}  // namespace

QwenImageRunner::QwenImageRunner(nn::Weights& weights, models::QwenImageConfig config,
                                 Backend& backend)
    : weights_(weights), config_(std::move(config)), runner_(backend) {}

void QwenImageRunner::set_references(std::vector<ReferenceLatent> references,
                                     std::optional<models::RefIndexMode> mode) {
  const int p = config_.patch_size;
  const int64_t channels = config_.in_channels / (p * p);
  ref_tokens_.clear();
  references_on_ = true;
  std::vector<models::FluxRefGrid> grids;
  for (const ReferenceLatent& r : references) {
    SD_CHECK(r.latent.size() == static_cast<size_t>(r.w * r.h * channels),
             "[qwen-image] a %lldx%lld reference latent of %zu values is not %lld channels",
             static_cast<long long>(r.w), static_cast<long long>(r.h), r.latent.size(),
             static_cast<long long>(channels));
    const std::vector<float> t = latent_tokens(r.latent, r.w, r.h, channels, p);
    ref_tokens_.insert(ref_tokens_.end(), t.begin(), t.end());
    grids.push_back({r.w, r.h});
  }
  ref_positions_ = models::flux_ref_positions(
      grids, p, mode.value_or(models::RefIndexMode::Increase), 1, /*centred=*/true);
}

Tensor* QwenImageRunner::build(nn::GraphCall& call, nn::Weights& weights,
                               const std::vector<float>& tokens, int64_t patches_h,
                               int64_t patches_w, const Conditioning& text, const float& t,
                               models::QwenImageRope& rope) const {
  const models::QwenImageConfig& c = config_;
  const int64_t generated = patches_h * patches_w;
  const int64_t refs = static_cast<int64_t>(tokens.size()) / c.in_channels - generated;
  rope = models::qwen_image_rope(c, text.tokens, patches_h, patches_w,
                                 refs > 0 ? ref_positions_ : std::vector<models::FluxPosition>{});
  const int64_t half = c.head_dim / 2, all = text.tokens + generated + refs;
  Tensor* img = call.input_f32("img", make_shape({c.in_channels, generated + refs}), tokens.data());
  Tensor* txt = call.input_f32("txt", make_shape({c.text_dim, text.tokens}), text.context.data());
  Tensor* ts = call.input_f32("timestep", make_shape({1}), &t);
  Tensor* rc = call.input_f32("rope_cos", make_shape({half, all}), rope.cos.data());
  Tensor* rs = call.input_f32("rope_sin", make_shape({half, all}), rope.sin.data());
  return models::qwen_image_forward(nn::Scope(call.ctx(), weights, kScope), c, img, generated, txt,
                                    ts, rc, rs);
}

std::vector<std::vector<float>> QwenImageRunner::predict(
    const std::vector<float>& x, int64_t w, int64_t h, float timestep,
    const std::vector<const Conditioning*>& conditionings, const std::vector<float>& concat) {
  const models::QwenImageConfig& c = config_;
  const int p = c.patch_size;
  const int64_t channels = c.in_channels / (p * p);
  SD_CHECK(concat.empty(), "[qwen-image] the transformer takes no extra input planes");
  SD_CHECK(x.size() == static_cast<size_t>(w * h * channels),
           "[qwen-image] a %lldx%lld latent of %zu values is not %lld channels",
           static_cast<long long>(w), static_cast<long long>(h), x.size(),
           static_cast<long long>(channels));
  const int64_t pw = (w + p - 1) / p * p, ph = (h + p - 1) / p * p;
  std::vector<float> tokens = latent_tokens(x, w, h, channels, p);
  if (references_on_) tokens.insert(tokens.end(), ref_tokens_.begin(), ref_tokens_.end());
  std::vector<std::vector<float>> out;
  for (const Conditioning* cond : conditionings) {
    SD_CHECK(cond->dim == c.text_dim && cond->tokens > 0,
             "[qwen-image] the text encoder gives %lld-wide tokens, this transformer reads %lld",
             static_cast<long long>(cond->dim), static_cast<long long>(c.text_dim));
    nn::GraphCall call;
    models::QwenImageRope rope;
    Tensor* pred = build(call, weights_, tokens, ph / p, pw / p, *cond, timestep, rope);
    const std::vector<float> result = runner_.run(call, pred);
    weights_.after_compute();
    out.push_back(
        crop(models::flux_unpatchify(result, pw, ph, channels, p), pw, ph, channels, w, h));
  }
  return out;
}

std::vector<nn::ParamDecl> QwenImageRunner::parameters() const {
  nn::ParamRecorder recorder(weights_);
  nn::GraphCall call;
  const std::vector<float> tokens(static_cast<size_t>(config_.in_channels * 4));
  Conditioning text;
  text.dim = config_.text_dim;
  text.tokens = 2;
  text.context.assign(static_cast<size_t>(text.dim * 2), 0.0f);
  const float t = 0;
  models::QwenImageRope rope;
  build(call, recorder, tokens, 2, 2, text, t, rope);
  return recorder.params();
}

}  // namespace sd::pipeline
