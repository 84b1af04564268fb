#include "models/unet.h"

#include <algorithm>

#include "models/unet_blocks.h"
#include "nn/layers.h"
#include "tensor/error.h"
#include "tensor/ops/concat.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/unary.h"

namespace sd::models {

namespace {

long long ll(int64_t v) {
  return static_cast<long long>(v);
}

// The context of one sample, repeated for a batch of `n` (classifier-free guidance runs
// one context per sample; a single one may be shared).
Tensor* context_for_batch(Context& ctx, Tensor* context, int64_t n) {
  Tensor* batch = context;
  while (batch->ne[2] < n) {
    batch = concat(ctx, batch, batch->ne[2] * 2 <= n ? batch : context, 2);
  }
  return batch;
}

void check_inputs(const UnetConfig& c, const Tensor* x, const Tensor* timesteps,
                  const Tensor* context) {
  const int64_t n = x->ne[3];
  SD_CHECK(x->ne[2] == c.in_channels,
           "[unet] latent %s has %lld channels; this UNet takes %lld (inpainting models take "
           "9: latent, mask and masked-image latent)",
           x->shape_string().c_str(), ll(x->ne[2]), ll(c.in_channels));
  const int64_t multiple = int64_t{1} << (c.channel_mult.size() - 1);
  SD_CHECK(x->ne[0] % multiple == 0 && x->ne[1] % multiple == 0,
           "[unet] latent %lldx%lld: width and height must be multiples of %lld (images in "
           "multiples of %lld pixels)",
           ll(x->ne[0]), ll(x->ne[1]), ll(multiple), ll(multiple * 8));
  SD_CHECK(timesteps->nelements() == n, "[unet] %lld timesteps for a batch of %lld latents",
           ll(timesteps->nelements()), ll(n));
  SD_CHECK(context->ne[0] == c.context_dim,
           "[unet] context %s has width %lld; this UNet attends to %lld-wide text tokens (SD1: "
           "768, SD2: 1024)",
           context->shape_string().c_str(), ll(context->ne[0]), ll(c.context_dim));
  SD_CHECK(context->ne[2] == n || context->ne[2] == 1,
           "[unet] context batch %lld does not match the latent batch %lld", ll(context->ne[2]),
           ll(n));
}

}  // namespace

int UnetConfig::depth_at(int level) const {
  if (std::find(attention_levels.begin(), attention_levels.end(), level) == attention_levels.end())
    return 0;
  if (level_depth.empty()) return transformer_depth;
  return level >= 0 && level < static_cast<int>(level_depth.size()) ? level_depth[level] : 0;
}

int UnetConfig::depth_middle() const {
  if (middle_depth >= 0) return middle_depth;
  return level_depth.empty() ? transformer_depth : level_depth.back();
}

int UnetConfig::input_depth(int level, int j) const {
  const size_t i = static_cast<size_t>(level * num_res_blocks + j);
  return i < input_block_depth.size() ? input_block_depth[i] : depth_at(level);
}

int UnetConfig::output_depth(int level, int j) const {
  const int levels = static_cast<int>(channel_mult.size());
  const size_t i = static_cast<size_t>((levels - 1 - level) * (num_res_blocks + 1) + j);
  return i < output_block_depth.size() ? output_block_depth[i] : depth_at(level);
}

SpatialTransformer unet_transformer(const UnetConfig& c, int64_t channels, int depth) {
  const int64_t heads = c.heads_for(channels);
  return SpatialTransformer{channels, heads, channels / heads, depth, c.context_dim, c.linear_proj};
}

int64_t UnetConfig::heads_for(int64_t channels) const {
  return head_dim > 0 ? channels / head_dim : num_heads;
}

void UnetConfig::validate() const {
  SD_CHECK(in_channels > 0 && out_channels > 0 && model_channels > 0,
           "[unet] channels must be positive (in %lld, out %lld, model %lld)", ll(in_channels),
           ll(out_channels), ll(model_channels));
  SD_CHECK(!channel_mult.empty() && num_res_blocks > 0 && transformer_depth > 0,
           "[unet] needs at least one level, res block and transformer block");
  SD_CHECK(level_depth.empty() || level_depth.size() == channel_mult.size(),
           "[unet] %zu transformer depths for %zu levels", level_depth.size(), channel_mult.size());
  SD_CHECK(depth_middle() >= 0, "[unet] negative middle transformer depth %d", depth_middle());
  SD_CHECK(
      input_block_depth.empty() || input_block_depth.size() == channel_mult.size() * num_res_blocks,
      "[unet] %zu input block depths for %zu res blocks", input_block_depth.size(),
      channel_mult.size() * num_res_blocks);
  SD_CHECK(output_block_depth.empty() ||
               output_block_depth.size() == channel_mult.size() * (num_res_blocks + 1),
           "[unet] %zu output block depths for %zu res blocks", output_block_depth.size(),
           channel_mult.size() * (num_res_blocks + 1));
  SD_CHECK(adm_in_channels >= 0, "[unet] negative vector width %lld", ll(adm_in_channels));
  for (int level : attention_levels) {
    SD_CHECK(level >= 0 && level < static_cast<int>(channel_mult.size()),
             "[unet] attention level %d does not exist (%zu levels)", level, channel_mult.size());
  }
  for (size_t level = 0; level < channel_mult.size(); ++level) {
    const int mult = channel_mult[level];
    const int64_t ch = mult * model_channels;
    SD_CHECK(mult > 0 && ch % kNormGroups == 0,
             "[unet] %lld channels do not split into %d GroupNorm groups", ll(ch), kNormGroups);
    // Heads matter where there is attention: the level's blocks, and the middle's at the
    // deepest level.
    if (depth_at(static_cast<int>(level)) == 0 && level + 1 != channel_mult.size()) continue;
    const int64_t heads = heads_for(ch);
    SD_CHECK(heads > 0 && ch % heads == 0 && (head_dim <= 0 || ch % head_dim == 0),
             "[unet] %lld channels do not split into heads (num_heads %d, head_dim %d)", ll(ch),
             num_heads, head_dim);
  }
}

UnetConfig UnetConfig::sd1() {
  return UnetConfig{};
}

UnetConfig UnetConfig::sd1_inpaint() {
  UnetConfig c = sd1();
  c.in_channels = 9;
  return c;
}

UnetConfig UnetConfig::sd2() {
  UnetConfig c;
  c.head_dim = 64;
  c.context_dim = 1024;
  c.linear_proj = true;
  return c;
}

UnetConfig UnetConfig::sdxl() {
  UnetConfig c;
  c.channel_mult = {1, 2, 4};
  c.attention_levels = {1, 2};
  c.level_depth = {0, 2, 10};
  c.middle_depth = 10;
  c.head_dim = 64;
  c.context_dim = 2048;
  c.linear_proj = true;
  c.adm_in_channels = 2816;
  return c;
}

Tensor* unet_forward(const nn::Scope& unet, const UnetConfig& c, Tensor* x, Tensor* timesteps,
                     Tensor* context, Tensor* y, const UnetControl* control) {
  c.validate();
  check_inputs(c, x, timesteps, context);
  SD_CHECK((c.adm_in_channels > 0) == (y != nullptr), "[unet] this UNet %s a conditioning vector",
           c.adm_in_channels > 0 ? "needs" : "takes no");
  SD_CHECK(!y || (y->ne[0] == c.adm_in_channels && y->ne[1] == x->ne[3]),
           "[unet] vector %s: this UNet takes [%lld, %lld]", y ? y->shape_string().c_str() : "",
           ll(c.adm_in_channels), ll(x->ne[3]));
  Context& ctx = unet.ctx();
  const int64_t mc = c.model_channels, emb_dim = c.time_embed_dim();
  const int levels = static_cast<int>(c.channel_mult.size());
  context = context_for_batch(ctx, context, x->ne[3]);

  // 1. Timestep embedding.
  Tensor* emb = TimestepEmbedding{mc, emb_dim}.forward(unet["time_embed"], timesteps);  // [4 mc, N]
  // SDXL: the vector through label_emb (Linear, SiLU, Linear), added to it.
  if (y) {
    const nn::Scope label_emb = unet["label_emb.0"];
    Tensor* l = nn::linear(label_emb["0"], y, c.adm_in_channels, emb_dim);
    l = nn::linear(label_emb["2"], silu(ctx, l), emb_dim, emb_dim);
    emb = set_name(add(ctx, emb, l), unet.prefix() + "label_emb.out");  // [4 mc, N]
  }

  // 2. Input blocks: at each level, res blocks (each followed by a transformer where the
  //    level has attention), then a downsampling. Every block's output is kept for the
  //    skip connection of its mirror in the output blocks.
  std::vector<Tensor*> skips;
  std::vector<int64_t> skip_channels;
  Tensor* h = nn::conv2d(unet["input_blocks.0.0"], x, c.in_channels, mc, 3, 1, 1);
  int64_t ch = mc;
  skips.push_back(h);
  skip_channels.push_back(ch);
  int block = 1;
  for (int level = 0; level < levels; ++level) {
    const int64_t level_ch = c.channel_mult[level] * mc;
    for (int j = 0; j < c.num_res_blocks; ++j, ++block) {
      const nn::Scope b = unet["input_blocks"][block];
      h = ResBlock{ch, level_ch, emb_dim}.forward(b["0"], h, emb);
      ch = level_ch;
      if (const int depth = c.input_depth(level, j); depth > 0)
        h = unet_transformer(c, ch, depth).forward(b["1"], h, context);
      skips.push_back(h);
      skip_channels.push_back(ch);
    }
    if (level != levels - 1) {
      h = Downsample{ch}.forward(unet["input_blocks"][block]["0"], h);  // [W/2, H/2, ch, N]
      skips.push_back(h);
      skip_channels.push_back(ch);
      ++block;
    }
  }

  // 3. Middle block: res block, transformer, res block at the lowest resolution (SSD-1B
  //    and Vega: the first res block alone).
  h = ResBlock{ch, ch, emb_dim}.forward(unet["middle_block.0"], h, emb);
  if (c.depth_middle() > 0) {
    h = unet_transformer(c, ch, c.depth_middle()).forward(unet["middle_block.1"], h, context);
    h = ResBlock{ch, ch, emb_dim}.forward(unet["middle_block.2"], h, emb);
  }
  if (control) {
    SD_CHECK(control->residuals.size() == skips.size() + 1,
             "[unet] the ControlNet gives %zu residuals; this UNet takes %zu",
             control->residuals.size(), skips.size() + 1);
    h = add(ctx, h, scale(ctx, control->residuals.back(), control->strength));
    for (size_t i = 0; i < skips.size(); ++i)
      skips[i] = add(ctx, skips[i], scale(ctx, control->residuals[i], control->strength));
  }

  // 4. Output blocks: the input blocks in reverse, each res block taking the matching
  //    skip concatenated along channels; every level but the top ends by upsampling.
  block = 0;
  for (int level = levels - 1; level >= 0; --level) {
    const int64_t level_ch = c.channel_mult[level] * mc;
    for (int j = 0; j <= c.num_res_blocks; ++j, ++block) {
      const nn::Scope b = unet["output_blocks"][block];
      h = concat(ctx, h, skips.back(), 2);  // [W, H, ch + skip channels, N]
      const int64_t in_ch = ch + skip_channels.back();
      skips.pop_back();
      skip_channels.pop_back();
      h = ResBlock{in_ch, level_ch, emb_dim}.forward(b["0"], h, emb);
      ch = level_ch;
      int layer = 1;
      if (const int depth = c.output_depth(level, j); depth > 0)
        h = unet_transformer(c, ch, depth).forward(b[layer++], h, context);
      if (level > 0 && j == c.num_res_blocks) h = Upsample{ch}.forward(b[layer], h);
    }
  }

  // 5. Output: GroupNorm, SiLU, 3x3 conv to the latent's channels.
  h = nn::group_norm_silu(unet["out.0"], h, ch, kNormGroups, kGroupNormEps);
  h = nn::conv2d(unet["out.2"], h, ch, c.out_channels, 3, 1, 1);  // [W, H, out_channels, N]
  return set_name(h, unet.prefix() + "out");
}

}  // namespace sd::models
