#include "models/wan_vae.h"

#include <algorithm>
#include <cmath>

#include "models/wan22_shortcuts.h"
#include "nn/layers.h"
#include "tensor/error.h"
#include "tensor/ops/attention.h"
#include "tensor/ops/cast.h"
#include "tensor/ops/concat.h"
#include "tensor/ops/conv2d.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/norm.h"
#include "tensor/ops/pad.h"
#include "tensor/ops/unary.h"
#include "tensor/ops/upscale.h"
#include "tensor/ops/view.h"

namespace sd::models {

namespace {

// The reference runs every convolution of this VAE with f16 weights: so do we.
Tensor* as_f16(Context& ctx, Tensor* w) {
  return w->type == DType::F16 ? w : cast(ctx, w, DType::F16);
}

// The temporal tap `t` of a causal convolution's weight [k, k, 3, in * out] as a 2-d
// kernel [k, k, in, out] in f16.
Tensor* temporal_tap(Context& ctx, Tensor* w, int kernel, int64_t in, int64_t out, int t) {
  w = view(ctx, w, {kernel, kernel, in * out, 1}, {w->nb[0], w->nb[1], w->nb[3], w->nb[3]},
           static_cast<size_t>(t) * w->nb[2]);
  return reshape(ctx, as_f16(ctx, cont(ctx, w)), {kernel, kernel, in, out});
}

// The causal convolution below where it writes fewer channels than it reads (the decoder's
// head: 96 -> 3 at full resolution): instead of its last two input frames the layer
// remembers what those frames give its next two output frames (the newest frame's tap 1
// plus the frame before's tap 0, and the newest frame's tap 0), two frames of `out`
// channels in place of two of `in`. The same sums, added in another order.
Tensor* causal_conv_carried(const nn::Scope& s, Tensor* x, int64_t in, int64_t out, int spatial,
                            WanClipCache& clip) {
  const std::string& slot = s.prefix();
  Context& ctx = s.ctx();
  Tensor* w = s.param("weight", {spatial, spatial, 3, in * out});
  Tensor* bias = s.param("bias", {out});
  const int pad = spatial / 2;
  const std::vector<Tensor*> carried = clip.remembered(slot);  // f16, none at first
  SD_CHECK(carried.empty() || carried.size() == 2,
           "[wan vae] layer %s carries %zu frames of partial sums, not 2", slot.c_str(),
           carried.size());
  Tensor* next = carried.empty() ? nullptr : cast(ctx, carried[0], DType::F32);
  Tensor* after_next = carried.empty() ? nullptr : cast(ctx, carried[1], DType::F32);
  Tensor* taps[3] = {};
  auto tap = [&](Tensor* frame, int t, Tensor* b) {
    if (!taps[t]) taps[t] = temporal_tap(ctx, w, spatial, in, out, t);
    return conv2d(ctx, frame, taps[t], b, 1, 1, pad, pad, 1, 1);
  };
  Tensor* result = nullptr;
  for (int64_t j = 0; j < x->ne[3]; ++j) {
    Tensor* frame = x->ne[3] == 1 ? x : cont(ctx, slice(ctx, x, 3, j, j + 1));
    Tensor* y = tap(frame, 2, bias);  // the frame itself, with the bias
    if (next) y = add(ctx, y, next);
    Tensor* part = tap(frame, 1, nullptr);
    next = after_next ? add(ctx, part, after_next) : part;
    after_next = tap(frame, 0, nullptr);
    result = result ? concat(ctx, result, y, 3) : y;
  }
  clip.save(slot, concat(ctx, next, after_next, 3));
  return result;
}

// A causal convolution with 3 temporal taps over frames x [W, H, in, t] of a clip: frame j
// of the result reads frames j - 2, j - 1 and j of the clip's sequence, where the frames the
// layer remembers precede x and zeros precede those. Each tap that meets a frame is a 2-d
// convolution of that frame, summed: a graph then holds one frame per tap (a remembered one
// made f32 only for its own tap) where stacking the three along the channels held them all
// twice. A clip's first frame meets only the last tap, as an image does. Spatial kernel 3
// (pad 1) or 1. The layer then remembers the last two frames (or, writing fewer channels
// than it reads, what they add to the next two outputs: causal_conv_carried).
Tensor* causal_conv_clip(const nn::Scope& s, Tensor* x, int64_t in, int64_t out, int spatial,
                         WanClipCache& clip) {
  if (out < in) return causal_conv_carried(s, x, in, out, spatial, clip);
  const std::string& slot = s.prefix();
  Context& ctx = s.ctx();
  Tensor* w = s.param("weight", {spatial, spatial, 3, in * out});
  Tensor* bias = s.param("bias", {out});
  const int pad = spatial / 2;
  const std::vector<Tensor*> previous = clip.remembered(slot);  // f16
  const auto remembered = static_cast<int64_t>(previous.size());
  const int64_t frames = x->ne[3];
  // Frame i of the real sequence (remembered, then x), in f32.
  auto frame = [&](int64_t i) {
    if (i < remembered) return cast(ctx, previous[static_cast<size_t>(i)], DType::F32);
    return frames == 1 ? x : cont(ctx, slice(ctx, x, 3, i - remembered, i - remembered + 1));
  };
  Tensor* taps[3] = {};
  Tensor* result = nullptr;
  for (int64_t j = 0; j < frames; ++j) {
    const int64_t current = remembered + j;
    const int first_tap = current >= 2 ? 0 : static_cast<int>(2 - current);
    Tensor* y = nullptr;
    for (int t = 2; t >= first_tap; --t) {  // the frame itself first, with the bias
      if (!taps[t]) taps[t] = temporal_tap(ctx, w, spatial, in, out, t);
      Tensor* part =
          conv2d(ctx, frame(current - (2 - t)), taps[t], y ? nullptr : bias, 1, 1, pad, pad, 1, 1);
      y = y ? add(ctx, y, part) : part;
    }
    result = result ? concat(ctx, result, y, 3) : y;
  }
  clip.save(slot, x);  // the cache keeps the last two frames it has seen
  return result;
}

// A causal 3-d convolution, kernel 3 (pad 1) or 1. On an image (no clip) zeros stand before
// the frame in time, so only the kernel's last temporal tap meets it.
Tensor* causal_conv(const nn::Scope& s, Tensor* x, int64_t in, int64_t out, int kernel,
                    WanClipCache* clip = nullptr) {
  Context& ctx = s.ctx();
  if (kernel > 1 && clip) return causal_conv_clip(s, x, in, out, kernel, *clip);
  Tensor* w = s.param("weight", {kernel, kernel, kernel, in * out});
  w = kernel > 1 ? temporal_tap(ctx, w, kernel, in, out, kernel - 1)
                 : reshape(ctx, as_f16(ctx, w), {kernel, kernel, in, out});
  return conv2d(ctx, x, w, s.param("bias", {out}), 1, 1, kernel / 2, kernel / 2, 1, 1);
}

// The temporal upsampler of a clip's frames x [W, H, dim, t]: a 3x1x1 causal convolution to
// 2 dim channels over the frames after the clip's first, whose halves become frames 2j and
// 2j + 1.
// The clip's first frame at this layer passes through.
Tensor* temporal_upsample(const nn::Scope& s, Tensor* x, int64_t dim, WanClipCache& clip) {
  Context& ctx = s.ctx();
  if (!clip.seen(s.prefix())) {
    clip.save(s.prefix(), nullptr);  // met, nothing to remember
    return x;
  }
  Tensor* y = causal_conv_clip(s, x, dim, 2 * dim, 1, clip);
  Tensor* frames = nullptr;
  for (int64_t j = 0; j < y->ne[3]; ++j) {
    Tensor* f = slice(ctx, y, 3, j, j + 1);
    for (int half = 0; half < 2; ++half) {
      Tensor* part = cont(ctx, slice(ctx, f, 2, half * dim, (half + 1) * dim));
      frames = frames ? concat(ctx, frames, part, 3) : part;
    }
  }
  return frames;
}

// The temporal downsampler of a clip's frames x [W, H, dim, t]: a 3x1x1 convolution with
// stride 2 over the last frame the layer saw before x and x's frames (t = 2 or 4 gives 1 or
// 2 frames). The clip's first frame at this layer passes through.
Tensor* temporal_downsample(const nn::Scope& s, Tensor* x, int64_t dim, WanClipCache& clip) {
  Context& ctx = s.ctx();
  const std::string& slot = s.prefix();
  const int64_t frames = x->ne[3];
  if (!clip.seen(slot)) {
    clip.save(slot, x);
    return x;
  }
  const std::vector<Tensor*> previous = clip.remembered(slot);
  SD_CHECK(!previous.empty(), "[wan vae] the temporal downsampler %s lost its frame", slot.c_str());
  Tensor* before = cast(ctx, previous.back(), DType::F32);
  auto frame = [&](int64_t i) {  // of [before, x...]
    return i == 0 ? before : cont(ctx, slice(ctx, x, 3, i - 1, i));
  };
  Tensor* w = s.param("weight", {1, 1, 3, dim * dim});
  Tensor* kernel = nullptr;
  for (int t = 0; t < 3; ++t) {
    Tensor* tap = temporal_tap(ctx, w, 1, dim, dim, t);
    kernel = kernel ? concat(ctx, kernel, tap, 2) : tap;
  }
  Tensor* result = nullptr;
  for (int64_t j = 0; 2 * j + 2 <= frames; ++j) {
    Tensor* input =
        concat(ctx, concat(ctx, frame(2 * j), frame(2 * j + 1), 2), frame(2 * j + 2), 2);
    Tensor* y = conv2d(ctx, input, kernel, s.param("bias", {dim}), 1, 1, 0, 0, 1, 1);
    result = result ? concat(ctx, result, y, 3) : y;
  }
  SD_CHECK(result, "[wan vae] the temporal downsampler %s needs 2 or more frames after the first",
           slot.c_str());
  clip.save(slot, x);
  return result;
}

// A plain 2-d convolution (the resamplers').
Tensor* conv(const nn::Scope& s, Tensor* x, int64_t in, int64_t out, int stride, int padding) {
  Context& ctx = s.ctx();
  Tensor* w = as_f16(ctx, s.param("weight", {3, 3, in, out}));
  return conv2d(ctx, x, w, s.param("bias", {out}), stride, stride, padding, padding, 1, 1);
}

// [W, H, C, N] <-> tokens [C, W * H, N].
Tensor* to_tokens(Context& ctx, Tensor* x) {
  const int64_t w = x->ne[0], h = x->ne[1], c = x->ne[2], n = x->ne[3];
  return cont(ctx, permute(ctx, reshape(ctx, x, {w * h, c, n}), {1, 0, 2, 3}));
}
Tensor* from_tokens(Context& ctx, Tensor* t, int64_t w, int64_t h) {
  const int64_t c = t->ne[0], n = t->ne[2];
  return reshape(ctx, cont(ctx, permute(ctx, t, {1, 0, 2, 3})), {w, h, c, n});
}

// An RMS norm's gamma as f32 [C] (stored [C, 1, 1, 1], or [C, 1, 1] in the attention
// blocks).
Tensor* gamma_f32(const nn::Scope& s, int64_t c, bool attention) {
  Tensor* gamma = attention ? s.param("gamma", {1, 1, c}) : s.param("gamma", {1, 1, 1, c});
  if (gamma->type != DType::F32) gamma = cast(s.ctx(), gamma, DType::F32);
  return reshape(s.ctx(), gamma, {c});
}

// RMS norm over the channels of each pixel, times gamma: the attention block's tokens
// [C, L, N].
Tensor* rms_tokens(const nn::Scope& s, Tensor* tokens, int64_t c) {
  return rms_norm(s.ctx(), tokens, 1e-12f, gamma_f32(s, c, true));
}
// The same on a feature map [W, H, C, N], then SiLU, in one pass.
Tensor* rms_silu(const nn::Scope& s, Tensor* x, int64_t c) {
  return rms_norm_channels(s.ctx(), x, 1e-12f, gamma_f32(s, c, false), NormActivation::Silu);
}

// x + residual: two (norm, SiLU, 3x3x3 conv) steps; a 1x1x1 shortcut when widths differ.
Tensor* residual_block(const nn::Scope& s, Tensor* x, int64_t in, int64_t out,
                       WanClipCache* clip = nullptr) {
  Tensor* shortcut = in != out ? causal_conv(s["shortcut"], x, in, out, 1) : x;
  const nn::Scope r = s["residual"];
  Tensor* h = causal_conv(r["2"], rms_silu(r["0"], x, in), in, out, 3, clip);
  h = causal_conv(r["6"], rms_silu(r["3"], h, out), out, out, 3, clip);
  return set_name(add(s.ctx(), shortcut, h), s.prefix() + "out");
}

// A 1x1 conv's weight [C_out, C_in, 1, 1] as the matrix it is.
Tensor* matrix(const nn::Scope& s, int64_t in, int64_t out) {
  return reshape(s.ctx(), s.param("weight", {1, 1, in, out}), {in, out});
}

// Single-head self-attention over all pixels of the frame, residual.
Tensor* attention_block(const nn::Scope& s, Tensor* x, int64_t c) {
  Context& ctx = s.ctx();
  const int64_t w = x->ne[0], h = x->ne[1], n = x->ne[3], l = w * h;
  Tensor* t = rms_tokens(s["norm"], to_tokens(ctx, x), c);  // [C, L, N]
  Tensor* wqkv = matrix(s["to_qkv"], c, 3 * c);
  Tensor* qkv = add(ctx, matmul(ctx, wqkv, t), s["to_qkv"].param("bias", {3 * c}));
  auto part = [&](int i) {
    return reshape(ctx, cont(ctx, slice(ctx, qkv, 0, i * c, (i + 1) * c)), {c, l, 1, n});
  };
  Tensor* o = attention(ctx, part(0), part(1), part(2), nullptr,
                        1.0f / std::sqrt(static_cast<float>(c)), s.attention_precision(wqkv));
  o = add(ctx, matmul(ctx, matrix(s["proj"], c, c), reshape(ctx, o, {c, l, n})),
          s["proj"].param("bias", {c}));
  return set_name(add(ctx, from_tokens(ctx, o, w, h), x), s.prefix() + "out");
}

Tensor* middle(const nn::Scope& s, Tensor* x, int64_t c, WanClipCache* clip = nullptr) {
  x = residual_block(s["0"], x, c, c, clip);
  x = attention_block(s["1"], x, c);  // each frame on its own
  return residual_block(s["2"], x, c, c, clip);
}

void check(const VaeConfig& c) {
  SD_CHECK(c.ch > 0 && c.z_channels > 0 && c.num_res_blocks > 0 && !c.ch_mult.empty() &&
               c.ch_mult.size() <= 8,
           "[wan vae] width %lld, %lld latent channels, %d res blocks and %zu levels",
           static_cast<long long>(c.ch), static_cast<long long>(c.z_channels), c.num_res_blocks,
           c.ch_mult.size());
}

}  // namespace

void WanClipCache::begin(nn::GraphCall& call) {
  call_ = &call;
  met_.clear();
}

std::vector<Tensor*> WanClipCache::remembered(const std::string& key) {
  std::vector<Tensor*> frames;
  auto it = slots_.find(key);
  if (it == slots_.end()) return frames;
  SD_CHECK(call_, "[wan vae] a clip's graph is built without begin()");
  const Slot& s = it->second;
  for (size_t i = 0; i < s.frames.size(); ++i)
    frames.push_back(call_->input("clip_cache." + key + std::to_string(i), DType::F16,
                                  make_shape({s.ne[0], s.ne[1], s.ne[2], 1}), s.frames[i].data()));
  return frames;
}

void WanClipCache::save(const std::string& key, Tensor* frames) {
  if (!frames) {
    slots_[key];  // the layer has met the clip: an empty slot
    return;
  }
  SD_CHECK(call_, "[wan vae] a clip's graph is built without begin()");
  Context& ctx = call_->ctx();
  const int64_t met = frames->ne[3];
  Met m{key, {}};
  for (int64_t i = std::max<int64_t>(0, met - 2); i < met; ++i)
    m.frames.push_back(cast(ctx, slice(ctx, frames, 3, i, i + 1), DType::F16));
  met_.push_back(std::move(m));
}

std::vector<std::pair<Tensor*, void*>> WanClipCache::take_met_frames() {
  std::vector<std::pair<Tensor*, void*>> outputs;
  for (Met& m : met_) {
    Slot& s = slots_[m.key];
    const Tensor* first = m.frames.front();
    const std::array<int64_t, 3> ne = {first->ne[0], first->ne[1], first->ne[2]};
    SD_CHECK(s.frames.empty() || s.ne == ne, "[wan vae] layer %s met frames of another size",
             m.key.c_str());
    // The frames that fall out lend their buffers to the new ones: the graph read them as
    // inputs, uploaded before it computes, and writes its outputs after.
    const size_t total = s.frames.size() + m.frames.size();
    const size_t dropped = total > 2 ? std::min(total - 2, s.frames.size()) : 0;
    std::vector<HostVector<uint16_t>> spare, kept;
    for (size_t i = 0; i < s.frames.size(); ++i)
      (i < dropped ? spare : kept).push_back(std::move(s.frames[i]));
    const size_t frame = static_cast<size_t>(ne[0] * ne[1] * ne[2]);
    for (Tensor* f : m.frames) {
      HostVector<uint16_t> buffer;
      if (!spare.empty()) {
        buffer = std::move(spare.back());
        spare.pop_back();
      }
      buffer.resize(frame);
      outputs.emplace_back(f, buffer.data());
      kept.push_back(std::move(buffer));
    }
    s.frames = std::move(kept);
    s.ne = ne;
  }
  met_.clear();
  return outputs;
}

HostVector<float> WanClipCache::run(nn::GraphRunner& runner, nn::GraphCall& call, Tensor* out,
                                    HostVector<float> into) {
  SD_CHECK(call_ == &call, "[wan vae] a clip's graph runs without its begin()");
  out = nn::GraphRunner::f32_output(call.ctx(), out);
  // `into` when the result fills it at least half (a video frame of 3 channels kept in a
  // 96-channel frame's memory would hold 30x its size until the clip is written).
  const auto size = static_cast<size_t>(out->nelements());
  HostVector<float> values = into.size() >= size && into.capacity() <= 2 * size
                                 ? std::move(into)
                                 : HostVector<float>(size);
  std::vector<std::pair<Tensor*, void*>> outputs = take_met_frames();
  outputs.emplace_back(out, values.data());
  call_ = nullptr;
  runner.run_into(call, outputs);
  values.resize(size);
  return values;
}

void WanClipCache::keep_zeros() {
  for (auto& [tensor, buffer] : take_met_frames())
    std::fill_n(static_cast<uint16_t*>(buffer), tensor->nelements(), uint16_t{0});
  call_ = nullptr;
}

namespace {

// The decoder, whole (stage < 0: an image, no clip) or one stage of a clip's frame. A clip
// is cut wherever a single frame is all that one part hands the next: after the middle,
// after every residual block and resampler (Wan 2.1), after every level (Wan 2.2, whose
// levels add their input back at their end); the head joins the last part. So a graph holds
// one layer's activations of one frame (at 832x480, 153 MB per 96-channel frame), not a
// whole level's, and only the frames that layer remembers.
Tensor* decoder(const nn::Scope& vae, const VaeConfig& c, Tensor* x, int stage,
                WanClipCache* clip) {
  check(c);
  Context& ctx = vae.ctx();
  const int levels = static_cast<int>(c.ch_mult.size());
  int current = 0;  // the stage the steps below belong to
  auto active = [&] { return stage < 0 || stage == current; };
  auto cut = [&] {
    if (clip) ++current;
  };
  const nn::Scope d = vae["decoder"];
  const bool wan22 = c.arch == VaeConfig::Arch::Wan22;
  int64_t width = c.decoder_width() * c.ch_mult.back();
  if (active()) {
    SD_CHECK(x->ne[2] == c.z_channels, "[wan vae] decode needs %lld latent channels, got %s",
             static_cast<long long>(c.z_channels), x->shape_string().c_str());
    x = causal_conv(vae["conv2"], x, c.z_channels, c.z_channels, 1);
    x = causal_conv(d["conv1"], x, c.z_channels, width, 3, clip);
    x = middle(d["middle"], x, width, clip);
  }
  cut();
  // Deepest level first; each upsampler doubles the size and halves the width, and all but
  // the last (Wan 2.1: upsamples.3 and .7) double a clip's frames too.
  int index = 0;
  for (int level = levels - 1; level >= 0; --level) {
    const int64_t out = c.decoder_width() * c.ch_mult[static_cast<size_t>(level)];
    if (wan22) {
      // Wan 2.2: a residual block of its own (upsamples.N) whose upsampler keeps the width,
      // around a shortcut that spreads the input's channels over the new pixels and frames.
      const nn::Scope block = d["upsamples"][levels - 1 - level];
      const bool temporal = level > 1;
      if (active()) {
        Tensor* input = x;
        for (int j = 0; j <= c.num_res_blocks; ++j) {
          x = residual_block(block["upsamples"][j], x, width, out, clip);
          width = out;
        }
        if (level > 0) {
          const nn::Scope up = block["upsamples"][c.num_res_blocks + 1];
          const bool first = !clip || !clip->seen(up["time_conv"].prefix());
          if (clip && temporal) x = temporal_upsample(up["time_conv"], x, out, *clip);
          x = conv(up["resample"]["1"], upscale_nearest(ctx, x, 2), out, out, 1, 1);
          x = add(ctx, x, duplicate_up(ctx, input, out, temporal ? 2 : 1, 2, first));
        }
      }
      width = out;
      if (level > 0) cut();
      continue;
    }
    for (int j = 0; j <= c.num_res_blocks; ++j, ++index) {
      if (active()) x = residual_block(d["upsamples"][index], x, width, out, clip);
      width = out;
      if (level > 0 || j < c.num_res_blocks) cut();
    }
    if (level > 0) {
      const nn::Scope up = d["upsamples"][index++];
      if (clip && level > 1) {
        if (active()) x = temporal_upsample(up["time_conv"], x, width, *clip);
        cut();
      }
      if (active())
        x = conv(up["resample"]["1"], upscale_nearest(ctx, x, 2), width, width / 2, 1, 1);
      width /= 2;
      cut();
    }
  }
  if (active()) {
    const nn::Scope head = d["head"];
    const int64_t patch = c.image_patch;
    x = causal_conv(head["2"], rms_silu(head["0"], x, width), width, 3 * patch * patch, 3, clip);
    if (patch > 1) x = depth_to_space(ctx, x, patch, false);
  }
  SD_CHECK(!clip || current + 1 == wan_vae_decode_stages(c),
           "[wan vae] decoding walked %d stages where %d were counted", current + 1,
           wan_vae_decode_stages(c));
  return set_name(x, "vae_image");
}

}  // namespace

std::string wan_vae_first_time_conv(const VaeConfig& c, bool decoder) {
  const std::string n = std::to_string(c.num_res_blocks), n1 = std::to_string(c.num_res_blocks + 1);
  if (c.arch == VaeConfig::Arch::Wan22)
    return decoder ? "decoder.upsamples.0.upsamples." + n1 + ".time_conv.weight"
                   : "encoder.downsamples.1.downsamples." + n + ".time_conv.weight";
  return decoder ? "decoder.upsamples." + n1 + ".time_conv.weight"
                 : "encoder.downsamples." + std::to_string(2 * c.num_res_blocks + 1) +
                       ".time_conv.weight";
}

Tensor* wan_vae_decode(const nn::Scope& vae, const VaeConfig& c, Tensor* z) {
  return decoder(vae, c, z, -1, nullptr);
}

int wan_vae_decode_stages(const VaeConfig& c) {
  // The parts decoder() cuts a clip into: the middle, then per level (Wan 2.2) or per
  // residual block, temporal and spatial resampler (Wan 2.1).
  const int levels = static_cast<int>(c.ch_mult.size());
  if (c.arch == VaeConfig::Arch::Wan22) return levels + 1;
  return levels * (c.num_res_blocks + 2) + std::max(0, levels - 2);
}

Tensor* wan_vae_decode_stage(const nn::Scope& vae, const VaeConfig& c, int stage, Tensor* x,
                             WanClipCache& clip) {
  SD_CHECK(x->ne[3] == 1, "[wan vae] a clip is decoded one frame at a time, got %s",
           x->shape_string().c_str());
  SD_CHECK(stage >= 0 && stage < wan_vae_decode_stages(c), "[wan vae] no decoding stage %d", stage);
  return decoder(vae, c, x, stage, &clip);
}

namespace {

// Which part of the encoder to build: all of it, its first level (the input convolution and
// the full-resolution blocks, on features of one frame), or the rest (from the first level's
// features).
enum class EncoderPart { Whole, FirstLevel, Rest };

// The encoder, on an image (no clip) or on one chunk of a clip's frames.
Tensor* encoder(const nn::Scope& vae, const VaeConfig& c, Tensor* input, WanClipCache* clip,
                EncoderPart part = EncoderPart::Whole) {
  check(c);
  const int levels = static_cast<int>(c.ch_mult.size());
  Context& ctx = vae.ctx();
  const nn::Scope e = vae["encoder"];
  const bool wan22 = c.arch == VaeConfig::Arch::Wan22;
  int64_t width = c.ch;
  Tensor* x = input;
  if (part != EncoderPart::Rest) {
    const int64_t f = c.downscale();
    SD_CHECK(input->ne[2] == 3 && input->ne[0] % f == 0 && input->ne[1] % f == 0,
             "[wan vae] encode needs an RGB image with sides multiples of %lld, got %s",
             static_cast<long long>(f), input->shape_string().c_str());
    const int64_t patch = c.image_patch;
    if (patch > 1) x = space_to_depth(ctx, x, patch, false);
    x = causal_conv(e["conv1"], x, 3 * patch * patch, width, 3, clip);
  } else {
    width = c.ch * c.ch_mult[0];
    SD_CHECK(input->ne[2] == width,
             "[wan vae] the encoder's later levels take %lld channels, got %s",
             static_cast<long long>(width), input->shape_string().c_str());
  }
  int index = 0;
  for (int level = 0; level < levels; ++level) {
    if (part == EncoderPart::FirstLevel && level > 0) break;
    const int64_t out = c.ch * c.ch_mult[static_cast<size_t>(level)];
    if (part == EncoderPart::Rest && level == 0) {  // built by the first part
      if (!wan22) index += c.num_res_blocks + (levels > 1 ? 1 : 0);
      width = out;
      continue;
    }
    if (wan22) {
      // Wan 2.2: each level a residual block of its own (downsamples.N) around a shortcut
      // that averages the input's pixels and frames into the new channels.
      const nn::Scope block = e["downsamples"][level];
      const bool down = level + 1 < levels, temporal = down && level > 0;
      Tensor* input = x;
      for (int j = 0; j < c.num_res_blocks; ++j) {
        x = residual_block(block["downsamples"][j], x, width, out, clip);
        width = out;
      }
      if (down) {
        const nn::Scope r = block["downsamples"][c.num_res_blocks];
        x = conv(r["resample"]["1"], pad(ctx, x, {0, 1, 0, 1, 0, 0, 0, 0}), width, width, 2, 0);
        if (clip && temporal) x = temporal_downsample(r["time_conv"], x, width, *clip);
      }
      x = add(ctx, x, average_down(ctx, input, out, temporal ? 2 : 1, down ? 2 : 1));
      continue;
    }
    for (int j = 0; j < c.num_res_blocks; ++j, ++index) {
      x = residual_block(e["downsamples"][index], x, width, out, clip);
      width = out;
    }
    if (level + 1 < levels) {
      // Zero padding right and bottom, then a stride-2 conv (Wan's ZeroPad2d((0, 1, 0, 1)));
      // all but the first (Wan 2.1: downsamples.5 and .8) halve a clip's frames too.
      const nn::Scope down = e["downsamples"][index++];
      x = conv(down["resample"]["1"], pad(ctx, x, {0, 1, 0, 1, 0, 0, 0, 0}), width, width, 2, 0);
      if (clip && level > 0) x = temporal_downsample(down["time_conv"], x, width, *clip);
    }
  }
  if (part == EncoderPart::FirstLevel) return set_name(x, "vae_first_level");
  x = middle(e["middle"], x, width, clip);
  const nn::Scope head = e["head"];
  x = causal_conv(head["2"], rms_silu(head["0"], x, width), width, 2 * c.z_channels, 3, clip);
  x = causal_conv(vae["conv1"], x, 2 * c.z_channels, 2 * c.z_channels, 1);
  return set_name(cont(ctx, slice(ctx, x, 2, 0, c.z_channels)), "vae_latent");
}

}  // namespace

namespace {

// A clip is encoded as its first frame, then chunks of 4: `later` once the encoder has seen
// the first.
void check_chunk(const Tensor* frames, bool later) {
  const int64_t expected = later ? 4 : 1;
  SD_CHECK(frames->ne[3] == expected,
           "[wan vae] a clip is encoded as its first frame, then chunks of 4 frames: got %lld "
           "frames where %lld belong",
           static_cast<long long>(frames->ne[3]), static_cast<long long>(expected));
}

}  // namespace

Tensor* wan_vae_encode(const nn::Scope& vae, const VaeConfig& c, Tensor* image) {
  return encoder(vae, c, image, nullptr);
}

Tensor* wan_vae_encode_chunk(const nn::Scope& vae, const VaeConfig& c, Tensor* frames,
                             WanClipCache& clip) {
  check_chunk(frames, clip.seen(vae["encoder"]["conv1"].prefix()));
  return encoder(vae, c, frames, &clip);
}

Tensor* wan_vae_encode_first_level(const nn::Scope& vae, const VaeConfig& c, Tensor* frame,
                                   WanClipCache& clip) {
  SD_CHECK(frame->ne[3] == 1, "[wan vae] the first level encodes one frame at a time, got %s",
           frame->shape_string().c_str());
  return encoder(vae, c, frame, &clip, EncoderPart::FirstLevel);
}

Tensor* wan_vae_encode_rest(const nn::Scope& vae, const VaeConfig& c, Tensor* features,
                            WanClipCache& clip) {
  check_chunk(features, clip.seen(vae["encoder"]["middle"]["0"]["residual"]["2"].prefix()));
  return encoder(vae, c, features, &clip, EncoderPart::Rest);
}

}  // namespace sd::models
