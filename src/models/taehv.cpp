#include "models/taehv.h"

#include <string>

#include "models/wan22_shortcuts.h"
#include "nn/layers.h"
#include "tensor/error.h"
#include "tensor/ops/cast.h"
#include "tensor/ops/concat.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/unary.h"
#include "tensor/ops/upscale.h"
#include "tensor/ops/view.h"

namespace sd::models {
namespace {

Tensor* tae_conv3x3(const nn::Scope& s, Tensor* x, int64_t in, int64_t out, int stride = 1,
                    bool bias = true) {
  return nn::conv2d(s, x, in, out, 3, stride, 1, bias);
}

// MemBlock(x, past): relu(conv(relu(conv(relu(conv([x, past]))))) + skip(x)), where past
// is the frame before each of x's frames [W, H, C, m] at this block: the last frame it
// read in the graph before (zeros before the clip's first), then x's own.
Tensor* mem_block(const nn::Scope& s, Tensor* x, int64_t width, WanClipCache& clip) {
  Context& ctx = s.ctx();
  const int64_t in = x->ne[2], frames = x->ne[3];
  const std::vector<Tensor*> remembered = clip.remembered(s.prefix());
  Tensor* before = remembered.empty() ? scale(ctx, cont(ctx, slice(ctx, x, 3, 0, 1)), 0.0f)
                                      : cast(ctx, remembered.back(), DType::F32);
  Tensor* past = frames == 1 ? before : concat(ctx, before, slice(ctx, x, 3, 0, frames - 1), 3);
  clip.save(s.prefix(), x);
  const nn::Scope conv = s["conv"];
  Tensor* h = relu(ctx, tae_conv3x3(conv["0"], concat(ctx, x, past, 2), 2 * in, width));
  h = relu(ctx, tae_conv3x3(conv["2"], h, width, width));
  h = tae_conv3x3(conv["4"], h, width, width);
  Tensor* skip = in == width ? x : nn::conv2d(s["skip"], x, in, width, 1, 1, 0, false);
  return relu(ctx, add(ctx, h, skip));
}

Tensor* mem_blocks(const nn::Scope& seq, int& index, Tensor* x, int64_t width, WanClipCache& clip) {
  for (int b = 0; b < TaehvConfig::kBlocksPerLevel; ++b)
    x = mem_block(seq[index++], x, width, clip);
  return x;
}

}  // namespace

Tensor* taehv_decode_stage(const nn::Scope& tae, const TaehvConfig& c, int stage, Tensor* x,
                           WanClipCache& clip) {
  Context& ctx = tae.ctx();
  SD_CHECK(stage >= 0 && stage < TaehvConfig::kLevels, "[taehv] no decoder stage %d", stage);
  const auto level = static_cast<size_t>(stage);
  const int64_t width = c.decoder_widths[level];
  SD_CHECK(x->ne[2] == (stage == 0 ? c.latent_channels : width),
           "[taehv] decoder stage %d reads frames of %lld channels, got %s", stage,
           static_cast<long long>(stage == 0 ? c.latent_channels : width),
           x->shape_string().c_str());
  const nn::Scope seq = tae["decoder"];
  // Sequential indices: 0 Clamp, 1 conv, 2 ReLU, then 6 per level (3 MemBlocks, Upsample,
  // TGrow, conv), then ReLU and the output conv.
  int index = 3 + 6 * stage;
  if (stage == 0) {
    // Clamp: tanh(z / 3) * 3 keeps out-of-range latents from blowing up.
    x = scale(ctx, unary(ctx, scale(ctx, x, 1.0f / 3.0f), UnaryOp::Tanh), 3.0f);
    x = relu(ctx, tae_conv3x3(seq[1], x, c.latent_channels, width));
  }
  x = mem_blocks(seq, index, x, width, clip);
  x = upscale_nearest(ctx, x, 2);
  ++index;
  // TGrow: a 1x1 conv to `stride` times the width, whose slices are the frames in order.
  const int64_t stride = c.time_upscale[level];
  x = nn::conv2d(seq[index++]["conv"], x, width, width * stride, 1, 1, 0, false);
  if (stride > 1) x = reshape(ctx, x, {x->ne[0], x->ne[1], width, stride * x->ne[3]});
  const int64_t next = c.decoder_widths[level + 1];
  x = tae_conv3x3(seq[index++], x, width, next, 1, false);
  if (stage + 1 < TaehvConfig::kLevels) return x;
  x = tae_conv3x3(seq[index + 1], relu(ctx, x), next, 3 * c.patch * c.patch);
  if (c.patch > 1) x = depth_to_space(ctx, x, c.patch, true);
  return set_name(x, "taehv_frames");
}

Tensor* taehv_encode_chunk(const nn::Scope& tae, const TaehvConfig& c, Tensor* frames,
                           WanClipCache& clip) {
  Context& ctx = tae.ctx();
  const int64_t f = c.downscale(),
                chunk = c.time_downscale[0] * c.time_downscale[1] * c.time_downscale[2];
  SD_CHECK(c.has_encoder, "[taehv] this file has no encoder");
  SD_CHECK(frames->ne[2] == 3 && frames->ne[3] % chunk == 0 && frames->ne[0] % f == 0 &&
               frames->ne[1] % f == 0,
           "[taehv] encode needs RGB frames in chunks of %lld, sides multiples of %lld, got %s",
           static_cast<long long>(chunk), static_cast<long long>(f),
           frames->shape_string().c_str());
  const nn::Scope seq = tae["encoder"];
  const int64_t width = c.encoder_width;
  Tensor* x = frames;
  if (c.patch > 1) x = space_to_depth(ctx, x, c.patch, true);
  x = relu(ctx, tae_conv3x3(seq[0], x, 3 * c.patch * c.patch, width));
  // Sequential indices: 0 conv, 1 ReLU, then 5 per level (TPool, stride-2 conv, 3
  // MemBlocks), then the output conv.
  int index = 2;
  for (size_t level = 0; level < TaehvConfig::kLevels; ++level) {
    // TPool: `stride` consecutive frames side by side in the channels, then a 1x1 conv.
    const int64_t stride = c.time_downscale[level];
    if (stride > 1) x = reshape(ctx, x, {x->ne[0], x->ne[1], width * stride, x->ne[3] / stride});
    x = nn::conv2d(seq[index++]["conv"], x, width * stride, width, 1, 1, 0, false);
    x = tae_conv3x3(seq[index++], x, width, width, 2, false);
    x = mem_blocks(seq, index, x, width, clip);
  }
  return set_name(tae_conv3x3(seq[index], x, width, c.latent_channels), "taehv_latent");
}

void taehv_record_parameters(nn::Weights& weights, const std::string& prefix,
                             const TaehvConfig& c) {
  WanClipCache clip;
  nn::GraphCall call;
  clip.begin(call);
  const nn::Scope s(call.ctx(), weights, prefix);
  Tensor* x = call.ctx().new_tensor(DType::F32, {2, 2, c.latent_channels, 1});
  // A frame after the first reads no other weights.
  for (int stage = 0; stage < TaehvConfig::kLevels; ++stage)
    x = taehv_decode_stage(s, c, stage, x, clip);
  if (c.has_encoder) {
    const int64_t side = 2 * c.downscale();
    taehv_encode_chunk(s, c, call.ctx().new_tensor(DType::F32, {side, side, 3, 4}), clip);
  }
}

}  // namespace sd::models
