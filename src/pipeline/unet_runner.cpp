#include "pipeline/unet_runner.h"

#include <optional>

#include "tensor/error.h"

namespace sd::pipeline {

UnetRunner::UnetRunner(nn::Weights& weights, models::UnetConfig config, Backend& backend)
    : weights_(weights), config_(std::move(config)), runner_(backend) {}

std::vector<std::vector<float>> UnetRunner::predict(
    const std::vector<float>& x, int64_t w, int64_t h, float timestep,
    const std::vector<const Conditioning*>& conditionings, const std::vector<float>& concat) {
  const size_t plane = static_cast<size_t>(w * h);
  SD_CHECK(x.size() + concat.size() == plane * static_cast<size_t>(config_.in_channels),
           "[unet] input has %zu + %zu values; a %lldx%lld latent needs %lld channels", x.size(),
           concat.size(), static_cast<long long>(w), static_cast<long long>(h),
           static_cast<long long>(config_.in_channels));
  std::vector<float> x_in = x;
  x_in.insert(x_in.end(), concat.begin(), concat.end());

  // Group conditionings of equal length into batches, keeping the caller's order.
  std::vector<std::vector<float>> out(conditionings.size());
  std::vector<bool> done(conditionings.size(), false);
  for (size_t i = 0; i < conditionings.size(); ++i) {
    if (done[i]) continue;
    std::vector<size_t> members;
    std::vector<const Conditioning*> batch;
    for (size_t j = i; j < conditionings.size(); ++j) {
      if (!done[j] && conditionings[j]->tokens == conditionings[i]->tokens &&
          conditionings[j]->dim == conditionings[i]->dim) {
        members.push_back(j);
        batch.push_back(conditionings[j]);
        done[j] = true;
      }
    }
    std::vector<std::vector<float>> results = run_batch(x_in, w, h, timestep, batch);
    for (size_t k = 0; k < members.size(); ++k) out[members[k]] = std::move(results[k]);
  }
  return out;
}

void UnetRunner::set_control(ControlNetRunner* net, std::vector<float> hint, float strength) {
  control_net_ = net;
  control_hint_ = std::move(hint);
  control_strength_ = strength;
}

std::vector<std::vector<float>> UnetRunner::run_batch(
    const std::vector<float>& x_in, int64_t w, int64_t h, float timestep,
    const std::vector<const Conditioning*>& batch) {
  const int64_t n = static_cast<int64_t>(batch.size());
  const int64_t dim = batch[0]->dim, tokens = batch[0]->tokens;
  SD_CHECK(dim == config_.context_dim,
           "[unet] the text encoder gives %lld-wide tokens, this UNet attends to %lld",
           static_cast<long long>(dim), static_cast<long long>(config_.context_dim));
  const int64_t adm = config_.adm_in_channels;
  std::vector<float> x_batch, context, vector, timesteps(static_cast<size_t>(n), timestep);
  for (const Conditioning* c : batch) {
    x_batch.insert(x_batch.end(), x_in.begin(), x_in.end());
    context.insert(context.end(), c->context.begin(), c->context.end());
    SD_CHECK(static_cast<int64_t>(c->vector.size()) == adm,
             "[unet] the conditioning vector has %zu values, this UNet takes %lld",
             c->vector.size(), static_cast<long long>(adm));
    vector.insert(vector.end(), c->vector.begin(), c->vector.end());
  }
  nn::GraphCall call;
  Tensor* x = call.input_f32("x", make_shape({w, h, config_.in_channels, n}), x_batch.data());
  Tensor* t = call.input_f32("timesteps", make_shape({n}), timesteps.data());
  Tensor* ctx = call.input_f32("context", make_shape({dim, tokens, n}), context.data());
  Tensor* y = adm > 0 ? call.input_f32("y", make_shape({adm, n}), vector.data()) : nullptr;
  // ControlNet: its residuals for this batch first (on its own backend), then inputs here.
  ControlResiduals residuals;
  std::optional<models::UnetControl> control;
  if (control_net_) {
    // It sees the latent alone, not an inpainting model's extra channels.
    const size_t per = static_cast<size_t>(w * h * control_net_->config().unet.in_channels);
    std::vector<float> latents;
    for (int64_t i = 0; i < n; ++i) latents.insert(latents.end(), x_in.begin(), x_in.begin() + per);
    residuals =
        control_net_->run(latents, w, h, n, timesteps, context, dim, tokens, vector, control_hint_);
    control.emplace();
    control->strength = control_strength_;
    for (size_t i = 0; i < residuals.values.size(); ++i)
      control->residuals.push_back(call.input_f32("control." + std::to_string(i),
                                                  residuals.shapes[i], residuals.values[i].data()));
  }
  Tensor* pred = models::unet_forward(nn::Scope(call.ctx(), weights_, kScope), config_, x, t, ctx,
                                      y, control ? &*control : nullptr);
  std::vector<float> all = runner_.run(call, pred);
  weights_.after_compute();
  const size_t per = all.size() / static_cast<size_t>(n);
  std::vector<std::vector<float>> out;
  for (int64_t i = 0; i < n; ++i)
    out.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(per * i),
                     all.begin() + static_cast<std::ptrdiff_t>(per * (i + 1)));
  return out;
}

std::vector<nn::ParamDecl> UnetRunner::parameters() const {
  nn::ParamRecorder recorder(weights_);
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {8, 8, config_.in_channels, 1});
  Tensor* t = ctx.new_tensor(DType::F32, {1});
  Tensor* c = ctx.new_tensor(DType::F32, {config_.context_dim, 77, 1});
  Tensor* y = config_.adm_in_channels > 0 ? ctx.new_tensor(DType::F32, {config_.adm_in_channels, 1})
                                          : nullptr;
  models::unet_forward(nn::Scope(ctx, recorder, kScope), config_, x, t, c, y);
  return recorder.params();
}

std::optional<sampling::Prediction> UnetRunner::probe_prediction() {
  const int64_t w = 8, h = 8, c = 4;
  std::vector<float> x(static_cast<size_t>(w * h * c), 0.5f);
  Conditioning ctx;
  ctx.dim = config_.context_dim;
  ctx.tokens = 2;
  ctx.context.assign(static_cast<size_t>(ctx.dim * ctx.tokens), 0.5f);
  std::vector<float> concat;
  if (config_.in_channels > c)
    concat.assign(static_cast<size_t>(w * h * (config_.in_channels - c)), 0.0f);
  const std::vector<float> out = predict(x, w, h, 999.0f, {&ctx}, concat)[0];
  double sum = 0;
  for (size_t i = 0; i < out.size(); ++i) sum += out[i] - x[i];
  return sum / static_cast<double>(out.size()) < -1.0 ? sampling::Prediction::V
                                                      : sampling::Prediction::Eps;
}

}  // namespace sd::pipeline
