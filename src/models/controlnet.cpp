#include "models/controlnet.h"

#include "models/unet_blocks.h"
#include "nn/layers.h"
#include "tensor/error.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/unary.h"

namespace sd::models {

namespace {

long long ll(int64_t v) {
  return static_cast<long long>(v);
}

// 1x1 conv whose weights start at zero in training, so a fresh ControlNet changes nothing.
Tensor* zero_conv(const nn::Scope& s, Tensor* x, int64_t channels) {
  return nn::conv2d(s, x, channels, channels, 1);
}

// input_hint_block: the control image down to the latent's size and model_channels.
Tensor* hint_forward(const nn::Scope& s, const ControlNetConfig& c, Tensor* hint) {
  Context& ctx = s.ctx();
  Tensor* h = hint;  // [8 W, 8 H, hint_channels, N]
  int64_t in = c.hint_channels;
  for (size_t i = 0; i < c.hint_widths.size(); ++i) {
    const int stride = (i % 2 == 0 && i > 0) ? 2 : 1;
    h = nn::conv2d(s[static_cast<int>(2 * i)], h, in, c.hint_widths[i], 3, stride, 1);
    in = c.hint_widths[i];
    if (i + 1 < c.hint_widths.size()) h = silu(ctx, h);
  }
  return set_name(h, s.prefix() + "out");  // [W, H, model_channels, N]
}

}  // namespace

std::vector<int64_t> ControlNetConfig::residual_channels() const {
  std::vector<int64_t> out{unet.model_channels};
  const int levels = static_cast<int>(unet.channel_mult.size());
  for (int level = 0; level < levels; ++level) {
    const int64_t ch = unet.channel_mult[level] * unet.model_channels;
    for (int j = 0; j < unet.num_res_blocks; ++j) out.push_back(ch);
    if (level != levels - 1) out.push_back(ch);
  }
  out.push_back(unet.channel_mult.back() * unet.model_channels);  // the middle block
  return out;
}

void ControlNetConfig::validate() const {
  unet.validate();
  SD_CHECK(hint_channels > 0, "[controlnet] the control image needs channels (got %lld)",
           ll(hint_channels));
  SD_CHECK(hint_widths.size() == 8 && hint_widths.back() == unet.model_channels,
           "[controlnet] input_hint_block has %zu convs ending in %lld channels; it needs 8 "
           "ending in model_channels (%lld)",
           hint_widths.size(), ll(hint_widths.empty() ? 0 : hint_widths.back()),
           ll(unet.model_channels));
}

ControlNetConfig ControlNetConfig::sd1() {
  ControlNetConfig c;
  c.unet = UnetConfig::sd1();
  return c;
}

ControlNetConfig ControlNetConfig::sdxl() {
  ControlNetConfig c;
  c.unet = UnetConfig::sdxl();
  return c;
}

Tensor* controlnet_hint(const nn::Scope& s, const ControlNetConfig& c, Tensor* hint) {
  c.validate();
  SD_CHECK(hint->ne[2] == c.hint_channels && hint->ne[0] % 8 == 0 && hint->ne[1] % 8 == 0,
           "[controlnet] control image %s: this ControlNet takes %lld channels at 8x the "
           "latent's size",
           hint->shape_string().c_str(), ll(c.hint_channels));
  return hint_forward(s["input_hint_block"], c, hint);
}

std::vector<Tensor*> controlnet_forward(const nn::Scope& s, const ControlNetConfig& c, Tensor* x,
                                        Tensor* guided_hint, Tensor* timesteps, Tensor* context,
                                        Tensor* y) {
  c.validate();
  const UnetConfig& u = c.unet;
  SD_CHECK(x->ne[2] == u.in_channels, "[controlnet] latent %s: this ControlNet takes %lld channels",
           x->shape_string().c_str(), ll(u.in_channels));
  SD_CHECK(guided_hint->ne[0] == x->ne[0] && guided_hint->ne[1] == x->ne[1] &&
               guided_hint->ne[2] == u.model_channels &&
               (guided_hint->ne[3] == 1 || guided_hint->ne[3] == x->ne[3]),
           "[controlnet] encoded control image %s does not match the latent %s",
           guided_hint->shape_string().c_str(), x->shape_string().c_str());
  SD_CHECK((u.adm_in_channels > 0) == (y != nullptr), "[controlnet] this ControlNet %s a vector",
           u.adm_in_channels > 0 ? "needs" : "takes no");
  Context& ctx = s.ctx();
  const int64_t mc = u.model_channels, emb_dim = u.time_embed_dim();
  const int levels = static_cast<int>(u.channel_mult.size());

  // 1. Timestep embedding (plus SDXL's vector), as in the UNet.
  Tensor* emb = TimestepEmbedding{mc, emb_dim}.forward(s["time_embed"], timesteps);  // [4 mc, N]
  if (y) {
    const nn::Scope label_emb = s["label_emb.0"];
    Tensor* l = nn::linear(label_emb["0"], y, u.adm_in_channels, emb_dim);
    l = nn::linear(label_emb["2"], silu(ctx, l), emb_dim, emb_dim);
    emb = add(ctx, emb, l);
  }

  // 2. The control image, encoded to the latent's size, joins after the first conv.
  Tensor* h = nn::conv2d(s["input_blocks.0.0"], x, u.in_channels, mc, 3, 1, 1);
  h = add(ctx, h, guided_hint);  // [W, H, mc, N]
  std::vector<Tensor*> residuals{zero_conv(s["zero_convs.0.0"], h, mc)};

  // 3. Input blocks, each output leaving through its zero conv.
  int64_t ch = mc;
  int block = 1;
  for (int level = 0; level < levels; ++level) {
    const int64_t level_ch = u.channel_mult[level] * mc;
    for (int j = 0; j < u.num_res_blocks; ++j, ++block) {
      const nn::Scope b = s["input_blocks"][block];
      h = ResBlock{ch, level_ch, emb_dim}.forward(b["0"], h, emb);
      ch = level_ch;
      if (u.depth_at(level) > 0)
        h = unet_transformer(u, ch, u.depth_at(level)).forward(b["1"], h, context);
      residuals.push_back(zero_conv(s["zero_convs"][block]["0"], h, ch));
    }
    if (level != levels - 1) {
      h = Downsample{ch}.forward(s["input_blocks"][block]["0"], h);  // [W/2, H/2, ch, N]
      residuals.push_back(zero_conv(s["zero_convs"][block]["0"], h, ch));
      ++block;
    }
  }

  // 4. Middle block, out through middle_block_out.
  h = ResBlock{ch, ch, emb_dim}.forward(s["middle_block.0"], h, emb);
  h = unet_transformer(u, ch, u.depth_middle()).forward(s["middle_block.1"], h, context);
  h = ResBlock{ch, ch, emb_dim}.forward(s["middle_block.2"], h, emb);
  residuals.push_back(zero_conv(s["middle_block_out.0"], h, ch));
  for (size_t i = 0; i < residuals.size(); ++i)
    set_name(residuals[i], s.prefix() + "residual." + std::to_string(i));
  return residuals;
}

}  // namespace sd::models
