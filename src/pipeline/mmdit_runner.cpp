#include "pipeline/mmdit_runner.h"

#include "tensor/error.h"

namespace sd::pipeline {

MmditRunner::MmditRunner(nn::Weights& weights, models::MmditConfig config, Backend& backend)
    : weights_(weights), config_(std::move(config)), runner_(backend) {}

std::vector<std::vector<float>> MmditRunner::predict(
    const std::vector<float>& x, int64_t w, int64_t h, float timestep,
    const std::vector<const Conditioning*>& conditionings, const std::vector<float>& concat) {
  SD_CHECK(concat.empty(), "[mmdit] this model takes no extra input channels (inpainting)");
  std::vector<std::vector<float>> out;
  for (const Conditioning* c : conditionings)
    out.push_back(predict_skipping(x, w, h, timestep, *c, {}));
  return out;
}

std::vector<float> MmditRunner::predict_skipping(const std::vector<float>& x, int64_t w, int64_t h,
                                                 float timestep, const Conditioning& c,
                                                 const std::vector<int>& skip_layers) {
  const models::MmditConfig& cfg = config_;
  const int p = cfg.patch_size;
  SD_CHECK(w % p == 0 && h % p == 0 && x.size() == static_cast<size_t>(w * h * cfg.in_channels),
           "[mmdit] a %lldx%lld latent of %zu values does not make %dx%d patches of %lld channels",
           static_cast<long long>(w), static_cast<long long>(h), x.size(), p, p,
           static_cast<long long>(cfg.in_channels));
  SD_CHECK(c.dim == cfg.context_dim,
           "[mmdit] the text encoders give %lld-wide tokens, this transformer takes %lld",
           static_cast<long long>(c.dim), static_cast<long long>(cfg.context_dim));
  SD_CHECK(static_cast<int64_t>(c.vector.size()) == cfg.adm_dim,
           "[mmdit] the pooled text vector has %zu values, this transformer takes %lld",
           c.vector.size(), static_cast<long long>(cfg.adm_dim));
  const float t = timestep;
  nn::GraphCall call;
  Tensor* latent = call.input_f32("x", make_shape({w, h, cfg.in_channels, 1}), x.data());
  Tensor* context = call.input_f32("context", make_shape({c.dim, c.tokens, 1}), c.context.data());
  Tensor* ts = call.input_f32("timesteps", make_shape({1}), &t);
  Tensor* y = call.input_f32("y", make_shape({cfg.adm_dim, 1}), c.vector.data());
  Tensor* pred = models::mmdit_forward(nn::Scope(call.ctx(), weights_, kScope), cfg, latent, ts, y,
                                       context, skip_layers);
  std::vector<float> tokens = runner_.run(call, pred);
  weights_.after_compute();
  return models::mmdit_unpatchify(tokens, w, h, cfg.out_channels, p);
}

std::vector<nn::ParamDecl> MmditRunner::parameters() const {
  nn::ParamRecorder recorder(weights_);
  Context ctx;
  const models::MmditConfig& cfg = config_;
  const int64_t side = 2 * cfg.patch_size;
  Tensor* x = ctx.new_tensor(DType::F32, {side, side, cfg.in_channels, 1});
  Tensor* t = ctx.new_tensor(DType::F32, {1});
  Tensor* y = ctx.new_tensor(DType::F32, {cfg.adm_dim, 1});
  Tensor* context = ctx.new_tensor(DType::F32, {cfg.context_dim, 4, 1});
  models::mmdit_forward(nn::Scope(ctx, recorder, kScope), cfg, x, t, y, context);
  return recorder.params();
}

}  // namespace sd::pipeline
