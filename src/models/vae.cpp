#include "models/vae.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "models/wan_vae.h"
#include "nn/layers.h"
#include "tensor/error.h"
#include "tensor/ops/attention.h"
#include "tensor/ops/cast.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/pad.h"
#include "tensor/ops/unary.h"
#include "tensor/ops/upscale.h"
#include "tensor/ops/view.h"

namespace sd::models {

VaeConfig VaeConfig::sd() {
  return VaeConfig{};
}

VaeConfig VaeConfig::flux() {
  VaeConfig c;
  c.z_channels = c.embed_dim = 16;
  c.scale_factor = 0.3611f;
  c.shift_factor = 0.1159f;
  c.use_quant_conv = false;
  return c;
}

VaeConfig VaeConfig::flux2() {
  VaeConfig c;
  c.z_channels = c.embed_dim = 32;
  c.scale_factor = 1.0f;
  c.use_quant_conv = true;
  c.latent_patch = 2;
  c.batch_norm_latent = true;
  return c;
}

VaeConfig VaeConfig::wan21() {
  VaeConfig c;
  c.arch = Arch::Wan21;
  c.ch = 96;
  c.z_channels = c.embed_dim = 16;
  c.scale_factor = 1.0f;
  c.use_quant_conv = false;
  // Wan 2.1's latents_mean / latents_std (its released VAE config; Qwen-Image keeps them).
  c.latent_mean = {-0.7571f, -0.7089f, -0.9113f, 0.1075f,  -0.1745f, 0.9653f,  -0.1517f, 1.5508f,
                   0.4134f,  -0.0715f, 0.5517f,  -0.3632f, -0.1922f, -0.9497f, 0.2503f,  -0.2921f};
  c.latent_std = {2.8184f, 1.4541f, 2.3275f, 2.6558f, 1.2196f, 1.7708f, 2.6052f, 2.0743f,
                  3.2687f, 2.1526f, 2.8652f, 1.5579f, 1.6382f, 1.1253f, 2.8251f, 1.9160f};
  return c;
}

VaeConfig VaeConfig::wan22() {
  VaeConfig c;
  c.arch = Arch::Wan22;
  c.ch = 160;
  c.decoder_ch = 256;
  c.image_patch = 2;
  c.z_channels = c.embed_dim = 48;
  c.scale_factor = 1.0f;
  c.use_quant_conv = false;
  // Wan 2.2's latents_mean / latents_std (its released VAE config).
  c.latent_mean = {-0.2289f, -0.0052f, -0.1323f, -0.2339f, -0.2799f, 0.0174f,  0.1838f,  0.1557f,
                   -0.1382f, 0.0542f,  0.2813f,  0.0891f,  0.1570f,  -0.0098f, 0.0375f,  -0.1825f,
                   -0.2246f, -0.1207f, -0.0698f, 0.5109f,  0.2665f,  -0.2108f, -0.2158f, 0.2502f,
                   -0.2055f, -0.0322f, 0.1109f,  0.1567f,  -0.0729f, 0.0899f,  -0.2799f, -0.1230f,
                   -0.0313f, -0.1649f, 0.0117f,  0.0723f,  -0.2839f, -0.2083f, -0.0520f, 0.3748f,
                   0.0152f,  0.1957f,  0.1433f,  -0.2944f, 0.3573f,  -0.0548f, -0.1681f, -0.0667f};
  c.latent_std = {0.4765f, 1.0364f, 0.4514f, 1.1677f, 0.5313f, 0.4990f, 0.4818f, 0.5013f,
                  0.8158f, 1.0344f, 0.5894f, 1.0901f, 0.6885f, 0.6165f, 0.8454f, 0.4978f,
                  0.5759f, 0.3523f, 0.7135f, 0.6804f, 0.5833f, 1.4146f, 0.8986f, 0.5659f,
                  0.7069f, 0.5338f, 0.4889f, 0.4917f, 0.4069f, 0.4999f, 0.6866f, 0.4093f,
                  0.5709f, 0.6065f, 0.6415f, 0.4944f, 0.5726f, 1.2042f, 0.5458f, 1.6887f,
                  0.3971f, 1.0600f, 0.3943f, 0.5537f, 0.5444f, 0.4089f, 0.7468f, 0.7744f};
  return c;
}

namespace {

// LDM's Normalize(): GroupNorm(32, C, eps=1e-6).
constexpr int kGroups = 32;
constexpr float kNormEps = 1e-6f;

// Names a block's output after its scope ("first_stage_model.decoder.up.1.block.0"), so
// debug dumps and profiles read in checkpoint terms.
Tensor* named(const nn::Scope& s, Tensor* t) {
  std::string name = s.prefix();
  if (!name.empty() && name.back() == '.') name.pop_back();
  return set_name(t, std::move(name));
}

Tensor* norm_silu(const nn::Scope& s, Tensor* x, int64_t channels) {
  return nn::group_norm_silu(s, x, channels, kGroups, kNormEps);
}

// ResnetBlock without time embedding (temb_channels = 0 in the autoencoder):
//   x + conv2(silu(norm2(conv1(silu(norm1(x)))))), x through a 1x1 nin_shortcut when the
//   channel count changes.
// The shortcut is the add's first operand so that the graph computes it first: the wider
// input then dies at norm1 instead of living through the block (at the decoder's 512x512
// level that frees 256 MiB of the compute buffer's peak).
Tensor* resnet_block(const nn::Scope& s, Tensor* x, int64_t in, int64_t out) {
  Tensor* shortcut = in != out ? nn::conv2d(s["nin_shortcut"], x, in, out, 1) : x;
  Tensor* h = nn::conv2d(s["conv1"], norm_silu(s["norm1"], x, in), in, out, 3, 1, 1);
  h = nn::conv2d(s["conv2"], norm_silu(s["norm2"], h, out), out, out, 3, 1, 1);
  return named(s, add(s.ctx(), shortcut, h));
}

// A 1x1 conv's weight [1, 1, C, C] as the [C, C] matrix it already is in memory.
Tensor* token_projection(const nn::Scope& s, int64_t c) {
  return reshape(s.ctx(), s.param("weight", {1, 1, c, c}), {c, c});
}

// The 1x1 conv with weight w applied to tokens [C, L, N]: the same product as a matmul.
Tensor* project_tokens(const nn::Scope& s, Tensor* w, Tensor* tokens, int64_t c) {
  Context& ctx = s.ctx();
  return add(ctx, matmul(ctx, w, tokens), s.param("bias", {c}));
}

// AttnBlock: single-head self-attention over all H x W positions, residual.
Tensor* attn_block(const nn::Scope& s, Tensor* x, int64_t c) {
  Context& ctx = s.ctx();
  const int64_t w = x->ne[0], h = x->ne[1], n = x->ne[3], l = w * h;
  Tensor* normed = nn::group_norm(s["norm"], x, c, kGroups, kNormEps);
  // [W, H, C, N] -> tokens [C, L, N] once, so q, k, v and proj_out are plain matmuls.
  Tensor* tokens = cont(ctx, permute(ctx, reshape(ctx, normed, {l, c, n}), {1, 0, 2, 3}));
  Tensor* wq = token_projection(s["q"], c);
  auto head = [&](const char* name, Tensor* weight) {  // [C, L, N] -> [C, L, 1 head, N]
    return reshape(ctx, project_tokens(s[name], weight, tokens, c), {c, l, 1, n});
  };
  Tensor* q = head("q", wq);
  Tensor* k = head("k", token_projection(s["k"], c));
  Tensor* v = head("v", token_projection(s["v"], c));
  Tensor* o = attention(ctx, q, k, v, nullptr, 1.0f / std::sqrt(static_cast<float>(c)),
                        s.attention_precision(wq));  // [C, 1, L, N]
  o = project_tokens(s["proj_out"], token_projection(s["proj_out"], c), reshape(ctx, o, {c, l, n}),
                     c);
  o = reshape(ctx, cont(ctx, permute(ctx, o, {1, 0, 2, 3})), {w, h, c, n});  // [W, H, C, N]
  return named(s, add(ctx, o, x));
}

// Downsample with conv: pad one zero column and row at the end (right, bottom), then a 3x3
// stride-2 conv without padding, as LDM's asymmetric padding.
Tensor* downsample(const nn::Scope& s, Tensor* x, int64_t c) {
  Tensor* padded = pad(s.ctx(), x, {0, 1, 0, 1, 0, 0, 0, 0});
  return named(s, nn::conv2d(s["conv"], padded, c, c, 3, 2, 0));
}

// Upsample with conv: nearest 2x, then a 3x3 conv.
Tensor* upsample(const nn::Scope& s, Tensor* x, int64_t c) {
  return named(s, nn::conv2d(s["conv"], upscale_nearest(s.ctx(), x, 2), c, c, 3, 1, 1));
}

// The middle of both halves: ResnetBlock, AttnBlock, ResnetBlock at the deepest level.
Tensor* mid_block(const nn::Scope& mid, Tensor* h, int64_t c) {
  h = resnet_block(mid["block_1"], h, c, c);
  h = attn_block(mid["attn_1"], h, c);
  return resnet_block(mid["block_2"], h, c, c);
}

// ldm Encoder: image [W, H, 3, N] -> [W / f, H / f, 2 z_channels, N] (double_z).
Tensor* encoder(const nn::Scope& s, const VaeConfig& cfg, Tensor* x) {
  const int levels = static_cast<int>(cfg.ch_mult.size());
  // 1. input conv
  int64_t block_in = cfg.ch;
  Tensor* h = nn::conv2d(s["conv_in"], x, 3, block_in, 3, 1, 1);  // [W, H, ch, N]
  // 2. down: num_res_blocks ResnetBlocks per level, halving the size between levels
  for (int i = 0; i < levels; ++i) {
    const nn::Scope down = s["down"][i];
    const int64_t block_out = cfg.ch * cfg.ch_mult[i];
    for (int j = 0; j < cfg.num_res_blocks; ++j) {
      h = resnet_block(down["block"][j], h, block_in, block_out);
      block_in = block_out;
    }
    if (i != levels - 1) h = downsample(down["downsample"], h, block_in);  // [W/2, H/2, C, N]
  }
  // 3. middle
  h = mid_block(s["mid"], h, block_in);
  // 4. output
  h = norm_silu(s["norm_out"], h, block_in);
  return nn::conv2d(s["conv_out"], h, block_in, 2 * cfg.z_channels, 3, 1, 1);
}

// ldm Decoder: z [w, h, z_channels, N] -> image [w f, h f, 3, N].
Tensor* decoder(const nn::Scope& s, const VaeConfig& cfg, Tensor* z) {
  const int levels = static_cast<int>(cfg.ch_mult.size());
  // 1. input conv to the deepest width
  int64_t block_in = cfg.ch * cfg.ch_mult.back();
  Tensor* h = nn::conv2d(s["conv_in"], z, cfg.z_channels, block_in, 3, 1, 1);
  // 2. middle
  h = mid_block(s["mid"], h, block_in);
  // 3. up: num_res_blocks + 1 ResnetBlocks per level, deepest first, doubling the size
  //    between levels
  for (int i = levels - 1; i >= 0; --i) {
    const nn::Scope up = s["up"][i];
    const int64_t block_out = cfg.ch * cfg.ch_mult[i];
    for (int j = 0; j < cfg.num_res_blocks + 1; ++j) {
      h = resnet_block(up["block"][j], h, block_in, block_out);
      block_in = block_out;
    }
    if (i != 0) h = upsample(up["upsample"], h, block_in);  // [2w, 2h, C, N]
  }
  // 4. output
  h = norm_silu(s["norm_out"], h, block_in);
  return nn::conv2d(s["conv_out"], h, block_in, 3, 3, 1, 1);  // [W, H, 3, N]
}

void check_config(const VaeConfig& cfg) {
  SD_CHECK(!cfg.ch_mult.empty() && cfg.ch_mult.size() <= 8,
           "[vae] ch_mult needs 1 to 8 levels, got %zu", cfg.ch_mult.size());
  SD_CHECK(cfg.ch > 0 && cfg.num_res_blocks > 0 && cfg.z_channels > 0 && cfg.embed_dim > 0,
           "[vae] channel counts and num_res_blocks must be positive");
  for (int m : cfg.ch_mult)
    SD_CHECK(m > 0 && (cfg.ch * m) % kGroups == 0,
             "[vae] level width %lld is not a positive multiple of %d (GroupNorm groups)",
             static_cast<long long>(cfg.ch * m), kGroups);
  SD_CHECK(cfg.scale_factor != 0.0f, "[vae] scale_factor must not be 0");
  SD_CHECK(cfg.latent_patch == 1 || cfg.latent_patch == 2, "[vae] latent patches of %d pixels",
           cfg.latent_patch);
}

// The batch norm's statistics as [1, 1, C, 1] to broadcast over a latent: the mean and
// sqrt(running_var + 1e-4), as FLUX.2's BatchNorm2d(eps=1e-4, affine=False) normalizes.
struct LatentStats {
  Tensor* mean;
  Tensor* std;
};
LatentStats latent_stats(const nn::Scope& bn, int64_t channels) {
  Context& ctx = bn.ctx();
  auto stat = [&](const char* name) {
    Tensor* t = bn.param(name, {channels});
    if (t->type != DType::F32) t = cast(ctx, t, DType::F32);
    return reshape(ctx, t, {1, 1, channels, 1});
  };
  return {stat("running_mean"),
          unary(ctx, scale(ctx, stat("running_var"), 1.0f, 1e-4f), UnaryOp::Sqrt)};
}

// The sampler's latent [w, h, 4 C, N] (channel c * 4 + dy * 2 + dx) -> the VAE's
// [2 w, 2 h, C, N], in two 4-d permutations (the direct one needs five dims).
Tensor* unpatch_latent(Context& ctx, Tensor* z) {
  const int64_t w = z->ne[0], h = z->ne[1], rest = z->ne[2] * z->ne[3] / 4;
  Tensor* t = reshape(ctx, z, {w, h, 2, 2 * rest});  // x, y, dx, (dy, c, n)
  t = cont(ctx, permute(ctx, t, {2, 0, 1, 3}));      // dx, x, y, (dy, c, n)
  t = reshape(ctx, t, {2 * w, h, 2, rest});          // X, y, dy, (c, n)
  t = cont(ctx, permute(ctx, t, {0, 2, 1, 3}));      // X, dy, y, (c, n)
  return reshape(ctx, t, {2 * w, 2 * h, z->ne[2] / 4, z->ne[3]});
}

// The inverse: the VAE's latent [W, H, C, N] -> patches [W / 2, H / 2, 4 C, N].
Tensor* patch_latent(Context& ctx, Tensor* z) {
  const int64_t w = z->ne[0] / 2, h = z->ne[1] / 2, rest = z->ne[2] * z->ne[3];
  Tensor* t = reshape(ctx, z, {2 * w, 2, h, rest});  // X, dy, y, (c, n)
  t = cont(ctx, permute(ctx, t, {0, 2, 1, 3}));      // X, y, dy, (c, n)
  t = reshape(ctx, t, {2, w, h, 2 * rest});          // dx, x, y, (dy, c, n)
  t = cont(ctx, permute(ctx, t, {1, 2, 0, 3}));      // x, y, dx, (dy, c, n)
  return reshape(ctx, t, {w, h, 4 * z->ne[2], z->ne[3]});
}

}  // namespace

Tensor* vae_decode(const nn::Scope& vae, const VaeConfig& cfg, Tensor* z) {
  if (cfg.causal_3d()) return wan_vae_decode(vae, cfg, z);
  check_config(cfg);
  SD_CHECK(z->ne[2] == cfg.latent_channels(),
           "[vae] decode needs a latent with %lld channels, got %s",
           static_cast<long long>(cfg.latent_channels()), z->shape_string().c_str());
  Context& ctx = vae.ctx();
  if (cfg.batch_norm_latent) {
    const LatentStats bn = latent_stats(vae["bn"], cfg.latent_channels());
    z = add(ctx, mul(ctx, z, bn.std), bn.mean);
  } else {
    // sd.cpp's diffusion_to_vae_latents: z / scale_factor + shift_factor.
    z = scale(ctx, z, 1.0f / cfg.scale_factor, cfg.shift_factor);
  }
  if (cfg.latent_patch == 2) z = unpatch_latent(ctx, z);
  if (cfg.use_quant_conv)
    z = nn::conv2d(vae["post_quant_conv"], z, cfg.embed_dim, cfg.z_channels, 1);
  return set_name(decoder(vae["decoder"], cfg, z), "vae_image");
}

Tensor* vae_encode(const nn::Scope& vae, const VaeConfig& cfg, Tensor* image) {
  if (cfg.causal_3d()) return wan_vae_encode(vae, cfg, image);
  check_config(cfg);
  const int64_t f = cfg.downscale();
  SD_CHECK(image->ne[2] == 3 && image->ne[0] % f == 0 && image->ne[1] % f == 0,
           "[vae] encode needs an RGB image [W, H, 3, N] with W and H multiples of %lld, got %s",
           static_cast<long long>(f), image->shape_string().c_str());
  Tensor* moments = encoder(vae["encoder"], cfg, image);
  if (cfg.use_quant_conv)
    moments = nn::conv2d(vae["quant_conv"], moments, 2 * cfg.z_channels, 2 * cfg.embed_dim, 1);
  if (!cfg.batch_norm_latent) return set_name(moments, "vae_moments");
  Context& ctx = vae.ctx();
  Tensor* z = cont(ctx, slice(ctx, moments, 2, 0, cfg.embed_dim));  // the mean
  if (cfg.latent_patch == 2) z = patch_latent(ctx, z);
  const LatentStats bn = latent_stats(vae["bn"], cfg.latent_channels());
  return set_name(div(ctx, sub(ctx, z, bn.mean), bn.std), "vae_latent");
}

std::vector<float> vae_moments_to_latent(const std::vector<float>& moments,
                                         const std::vector<float>& noise, int64_t w, int64_t h,
                                         int64_t channels, int64_t batch, const VaeConfig& cfg) {
  const size_t plane = static_cast<size_t>(w * h * channels);  // one sample's mean (or logvar)
  SD_CHECK(w > 0 && h > 0 && channels > 0 && batch > 0 && moments.size() == 2 * plane * batch &&
               noise.size() == plane * batch,
           "[vae] moments of %zu and noise of %zu values do not fit a [%lld, %lld, %lld, %lld] "
           "latent",
           moments.size(), noise.size(), static_cast<long long>(w), static_cast<long long>(h),
           static_cast<long long>(channels), static_cast<long long>(batch));
  std::vector<float> latent(plane * batch);
  for (size_t b = 0; b < static_cast<size_t>(batch); ++b) {
    const float* mean = moments.data() + 2 * plane * b;
    const float* logvar = mean + plane;
    for (size_t i = 0; i < plane; ++i) {
      const float stddev = std::exp(0.5f * std::clamp(logvar[i], -30.0f, 20.0f));
      const float sample = mean[i] + stddev * noise[plane * b + i];
      latent[plane * b + i] = (sample - cfg.shift_factor) * cfg.scale_factor;
    }
  }
  return latent;
}

}  // namespace sd::models
