#include "pipeline/flux_runner.h"

#include <algorithm>

#include "tensor/error.h"
#include "tensor/ops/view.h"

namespace sd::pipeline {

FluxRunner::FluxRunner(nn::Weights& weights, models::FluxConfig config, Backend& backend)
    : weights_(weights), config_(std::move(config)), runner_(backend) {}

void FluxRunner::set_references(std::vector<Reference> references,
                                std::optional<models::RefIndexMode> mode) {
  const int p = config_.patch_size;
  const int64_t channels = config_.out_channels / (p * p);
  // Fill's tokens also carry its mask and masked image; a reference has nothing for them.
  SD_CHECK(references.empty() || config_.in_channels == config_.out_channels,
           "[flux] this transformer takes %lld-channel tokens (FLUX.1 Fill?); reference images "
           "need a FLUX.1 Kontext model",
           static_cast<long long>(config_.in_channels));
  ref_tokens_.clear();
  references_on_ = true;
  std::vector<models::FluxRefGrid> grids;
  for (const Reference& r : references) {
    SD_CHECK(r.w % p == 0 && r.h % p == 0 &&
                 r.latent.size() == static_cast<size_t>(r.w * r.h * channels),
             "[flux] a %lldx%lld reference latent of %zu values does not make %dx%d patches of "
             "%lld channels",
             static_cast<long long>(r.w), static_cast<long long>(r.h), r.latent.size(), p, p,
             static_cast<long long>(channels));
    const std::vector<float> t = models::flux_patchify(r.latent, r.w, r.h, channels, p);
    ref_tokens_.insert(ref_tokens_.end(), t.begin(), t.end());
    grids.push_back({r.w, r.h});
  }
  // Unless asked otherwise, FLUX.1 Kontext offsets its references at index 1 and FLUX.2
  // numbers them 10, 20, ... (sd.cpp's "flux_kontext" and "flux2" presets).
  const models::RefIndexMode placed = mode.value_or(
      config_.ref_index_step > 1 ? models::RefIndexMode::Increase : models::RefIndexMode::Fixed);
  ref_positions_ = models::flux_ref_positions(grids, p, placed, config_.ref_index_step);
}

std::vector<std::vector<float>> FluxRunner::predict(
    const std::vector<float>& x, int64_t w, int64_t h, float timestep,
    const std::vector<const Conditioning*>& conditionings, const std::vector<float>& concat) {
  const int p = config_.patch_size;
  const int64_t channels = config_.out_channels / (p * p);
  // Fill: the planes of `concat` (pipeline/flux_fill.h) are patchified too and appended
  // to each token.
  const int64_t extra = config_.in_channels / (p * p) - channels;
  SD_CHECK(concat.size() == static_cast<size_t>(w * h * extra),
           "[flux] this transformer takes %lld extra input planes, got %zu values for a "
           "%lldx%lld latent",
           static_cast<long long>(extra), concat.size(), static_cast<long long>(w),
           static_cast<long long>(h));
  SD_CHECK(w % p == 0 && h % p == 0 && x.size() == static_cast<size_t>(w * h * channels),
           "[flux] a %lldx%lld latent of %zu values does not make %dx%d patches of %lld channels",
           static_cast<long long>(w), static_cast<long long>(h), x.size(), p, p,
           static_cast<long long>(channels));
  std::vector<float> tokens = models::flux_patchify(x, w, h, channels, p);
  if (extra > 0) {
    const std::vector<float> more = models::flux_patchify(concat, w, h, extra, p);
    const int64_t n = (w / p) * (h / p), a = channels * p * p, b = extra * p * p;
    std::vector<float> joined(static_cast<size_t>(n * (a + b)));
    for (int64_t t = 0; t < n; ++t) {
      std::copy(tokens.begin() + t * a, tokens.begin() + (t + 1) * a, joined.begin() + t * (a + b));
      std::copy(more.begin() + t * b, more.begin() + (t + 1) * b, joined.begin() + t * (a + b) + a);
    }
    tokens.swap(joined);
  }
  // Kontext: the references' tokens after the image's.
  if (references_on_) tokens.insert(tokens.end(), ref_tokens_.begin(), ref_tokens_.end());
  std::vector<std::vector<float>> out;
  for (const Conditioning* c : conditionings)
    out.push_back(models::flux_unpatchify(run_one(tokens, w, h, timestep, *c), w, h,
                                          config_.out_channels / (p * p), p));
  return out;
}

std::vector<float> FluxRunner::run_one(const std::vector<float>& tokens, int64_t w, int64_t h,
                                       float timestep, const Conditioning& c) {
  const models::FluxConfig& cfg = config_;
  SD_CHECK(c.dim == cfg.context_dim,
           "[flux] the text encoder gives %lld-wide tokens, this transformer takes %lld",
           static_cast<long long>(c.dim), static_cast<long long>(cfg.context_dim));
  const int64_t vec_dim = cfg.vec_dim;
  SD_CHECK(static_cast<int64_t>(c.vector.size()) == vec_dim,
           "[flux] the pooled CLIP vector has %zu values, this transformer takes %lld",
           c.vector.size(), static_cast<long long>(vec_dim));
  SD_CHECK(c.mask.empty() || static_cast<int64_t>(c.mask.size()) == c.tokens,
           "[flux] the text mask has %zu values for %lld tokens", c.mask.size(),
           static_cast<long long>(c.tokens));
  const int64_t ph = h / cfg.patch_size, pw = w / cfg.patch_size;
  const int64_t image_tokens = static_cast<int64_t>(tokens.size()) / cfg.in_channels;
  const models::FluxRope rope = models::flux_rope(
      cfg, c.tokens, ph, pw, references_on_ ? ref_positions_ : std::vector<models::FluxPosition>{});
  const int64_t all_tokens = c.tokens + image_tokens;
  // sd.cpp compatibility: Chroma's guidance input is always zero (--guidance is not read).
  const float t = timestep, g = cfg.is_chroma() ? 0.0f : guidance_;
  // Chroma's key mask: the text's, then zeros for the image (and reference) tokens.
  std::vector<float> key_mask;
  if (!c.mask.empty()) {
    key_mask = c.mask;
    key_mask.resize(static_cast<size_t>(all_tokens), 0.0f);
  }

  nn::GraphCall call;
  Tensor* img =
      call.input_f32("img", make_shape({cfg.in_channels, image_tokens, 1}), tokens.data());
  Tensor* txt = call.input_f32("txt", make_shape({c.dim, c.tokens, 1}), c.context.data());
  Tensor* ts = call.input_f32("timesteps", make_shape({1}), &t);
  Tensor* guidance = cfg.guidance_embed || cfg.is_chroma()
                         ? call.input_f32("guidance", make_shape({1}), &g)
                         : nullptr;
  Tensor* y =
      vec_dim > 0 ? call.input_f32("y", make_shape({vec_dim, 1}), c.vector.data()) : nullptr;
  Tensor* mask = key_mask.empty()
                     ? nullptr
                     : call.input_f32("key_mask", make_shape({all_tokens}), key_mask.data());
  const int64_t half = cfg.head_dim() / 2;
  Tensor* rc = call.input_f32("rope_cos", make_shape({1, half, all_tokens}), rope.cos.data());
  Tensor* rs = call.input_f32("rope_sin", make_shape({1, half, all_tokens}), rope.sin.data());
  Tensor* pred = models::flux_forward(nn::Scope(call.ctx(), weights_, kScope), cfg, img, txt, ts,
                                      guidance, y, rc, rs, mask);
  // Kontext: the prediction is the generated image's tokens only.
  if (image_tokens > ph * pw) pred = cont(call.ctx(), slice(call.ctx(), pred, 1, 0, ph * pw));
  std::vector<float> out = runner_.run(call, pred);
  weights_.after_compute();
  return out;
}

std::vector<nn::ParamDecl> FluxRunner::parameters() const {
  nn::ParamRecorder recorder(weights_);
  Context ctx;
  const models::FluxConfig& cfg = config_;
  Tensor* img = ctx.new_tensor(DType::F32, {cfg.in_channels, 4, 1});
  Tensor* txt = ctx.new_tensor(DType::F32, {cfg.context_dim, 4, 1});
  Tensor* t = ctx.new_tensor(DType::F32, {1});
  Tensor* g = cfg.guidance_embed || cfg.is_chroma() ? ctx.new_tensor(DType::F32, {1}) : nullptr;
  Tensor* y = cfg.vec_dim > 0 ? ctx.new_tensor(DType::F32, {cfg.vec_dim, 1}) : nullptr;
  Tensor* rc = ctx.new_tensor(DType::F32, {1, cfg.head_dim() / 2, 8});
  Tensor* rs = ctx.new_tensor(DType::F32, {1, cfg.head_dim() / 2, 8});
  models::flux_forward(nn::Scope(ctx, recorder, kScope), cfg, img, txt, t, g, y, rc, rs);
  return recorder.params();
}

}  // namespace sd::pipeline
