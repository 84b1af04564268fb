#include "pipeline/controlnet_runner.h"

#include "tensor/error.h"

namespace sd::pipeline {

namespace {

long long ll(int64_t v) {
  return static_cast<long long>(v);
}

const char* family_of(const models::UnetConfig& c) {
  if (c.adm_in_channels > 0) return "SDXL";
  return c.context_dim == 1024 ? "SD 2.x" : "SD 1.x";
}

}  // namespace

ControlNetRunner::ControlNetRunner(nn::Weights& weights, models::ControlNetConfig config,
                                   Backend& backend)
    : weights_(weights), config_(std::move(config)), runner_(backend) {}

ControlResiduals ControlNetRunner::run(const std::vector<float>& x, int64_t w, int64_t h, int64_t n,
                                       const std::vector<float>& timesteps,
                                       const std::vector<float>& context, int64_t dim,
                                       int64_t tokens, const std::vector<float>& vector,
                                       const std::vector<float>& hint) {
  const models::UnetConfig& u = config_.unet;
  const size_t hint_size = static_cast<size_t>(64 * w * h * config_.hint_channels);
  SD_CHECK(hint.size() == hint_size,
           "[controlnet] the control image has %zu values; a %lldx%lld latent needs %zu (%lldx%lld "
           "pixels, %lld channels)",
           hint.size(), ll(w), ll(h), hint_size, ll(8 * w), ll(8 * h), ll(config_.hint_channels));
  SD_CHECK(dim == u.context_dim,
           "[controlnet] the text encoder gives %lld-wide tokens, this ControlNet attends to %lld",
           ll(dim), ll(u.context_dim));
  if (hint != hint_source_ || guided_w_ != w || guided_h_ != h) {
    nn::GraphCall encode;
    Tensor* th =
        encode.input_f32("hint", make_shape({8 * w, 8 * h, config_.hint_channels, 1}), hint.data());
    Tensor* guided =
        models::controlnet_hint(nn::Scope(encode.ctx(), weights_, kScope), config_, th);
    guided_hint_ = runner_.run(encode, guided);
    weights_.after_compute();
    hint_source_ = hint;
    guided_w_ = w;
    guided_h_ = h;
  }

  nn::GraphCall call;
  Tensor* tx = call.input_f32("x", make_shape({w, h, u.in_channels, n}), x.data());
  Tensor* tg =
      call.input_f32("guided_hint", make_shape({w, h, u.model_channels, 1}), guided_hint_.data());
  Tensor* tt = call.input_f32("timesteps", make_shape({n}), timesteps.data());
  Tensor* tc = call.input_f32("context", make_shape({dim, tokens, n}), context.data());
  Tensor* ty = u.adm_in_channels > 0
                   ? call.input_f32("y", make_shape({u.adm_in_channels, n}), vector.data())
                   : nullptr;
  std::vector<Tensor*> outs = models::controlnet_forward(nn::Scope(call.ctx(), weights_, kScope),
                                                         config_, tx, tg, tt, tc, ty);
  ControlResiduals r;
  for (Tensor* t : outs) r.shapes.push_back(make_shape({t->ne[0], t->ne[1], t->ne[2], t->ne[3]}));
  r.values = runner_.run(call, outs);
  weights_.after_compute();
  return r;
}

void ControlNetRunner::release() {
  runner_.release();
  hint_source_ = {};
  guided_hint_ = {};
  guided_w_ = guided_h_ = 0;
}

std::vector<nn::ParamDecl> ControlNetRunner::parameters() const {
  nn::ParamRecorder recorder(weights_);
  Context ctx;
  const models::UnetConfig& u = config_.unet;
  Tensor* x = ctx.new_tensor(DType::F32, {8, 8, u.in_channels, 1});
  Tensor* hint = ctx.new_tensor(DType::F32, {64, 64, config_.hint_channels, 1});
  Tensor* t = ctx.new_tensor(DType::F32, {1});
  Tensor* c = ctx.new_tensor(DType::F32, {u.context_dim, 77, 1});
  Tensor* y = u.adm_in_channels > 0 ? ctx.new_tensor(DType::F32, {u.adm_in_channels, 1}) : nullptr;
  const nn::Scope s(ctx, recorder, kScope);
  models::controlnet_forward(s, config_, x, models::controlnet_hint(s, config_, hint), t, c, y);
  return recorder.params();
}

models::ControlNetConfig controlnet_config_from_shapes(std::string_view scope,
                                                       const ShapeOf& shape_of) {
  const std::string root(scope);
  models::ControlNetConfig c;
  // A ControlNet has no output layer: answer for it what the UNet reader looks for.
  const ShapeOf encoder = [&](const std::string& name) -> std::optional<std::array<int64_t, 4>> {
    if (name == root + "out.2.weight") {
      if (auto conv_in = shape_of(root + "input_blocks.0.0.weight"))
        return std::array<int64_t, 4>{3, 3, (*conv_in)[3], (*conv_in)[2]};
    }
    return shape_of(name);
  };
  models::UnetConfig preset = models::UnetConfig::sd1();
  if (shape_of(root + "label_emb.0.0.weight")) {
    preset = models::UnetConfig::sdxl();
  } else if (auto k = shape_of(root + "middle_block.1.transformer_blocks.0.attn2.to_k.weight");
             k && (*k)[0] == 1024) {
    preset = models::UnetConfig::sd2();
  }
  try {
    c.unet = unet_config_from_shapes(preset, scope, encoder);
  } catch (const Error& e) {
    fail("[controlnet] not a ControlNet this engine runs: %s", e.what());
  }
  c.hint_widths.clear();
  for (int i = 0; i <= 14; i += 2) {
    const auto conv = shape_of(root + "input_hint_block." + std::to_string(i) + ".weight");
    SD_CHECK(conv.has_value(), "[controlnet] the file has no tensor '%sinput_hint_block.%d.weight'",
             root.c_str(), i);
    if (i == 0) c.hint_channels = (*conv)[2];
    c.hint_widths.push_back((*conv)[3]);
  }
  c.validate();
  return c;
}

void check_controlnet_fits(const models::ControlNetConfig& control, const models::UnetConfig& unet,
                           const std::string& file) {
  const models::UnetConfig& c = control.unet;
  SD_CHECK(c.context_dim == unet.context_dim && c.adm_in_channels == unet.adm_in_channels,
           "--control-net %s: an %s ControlNet (%lld-wide text context%s) does not fit this %s "
           "model (%lld-wide); use a ControlNet made for %s",
           file.c_str(), family_of(c), ll(c.context_dim), c.adm_in_channels > 0 ? ", a vector" : "",
           family_of(unet), ll(unet.context_dim), family_of(unet));
  models::ControlNetConfig as_unet;
  as_unet.unet = unet;
  SD_CHECK(control.residual_channels() == as_unet.residual_channels(),
           "--control-net %s: its blocks (%lld model channels, %zu levels, %d res blocks each) do "
           "not match this UNet's (%lld, %zu, %d); use a ControlNet made for this model",
           file.c_str(), ll(c.model_channels), c.channel_mult.size(), c.num_res_blocks,
           ll(unet.model_channels), unet.channel_mult.size(), unet.num_res_blocks);
  SD_CHECK(c.in_channels <= unet.in_channels,
           "--control-net %s: it takes %lld latent channels, this model's latent has fewer",
           file.c_str(), ll(c.in_channels));
}

}  // namespace sd::pipeline
