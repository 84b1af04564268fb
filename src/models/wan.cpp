#include "models/wan.h"

#include <algorithm>
#include <cmath>

#include "nn/dit_blocks.h"
#include "nn/layers.h"
#include "tensor/error.h"
#include "tensor/ops/cast.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/generate.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/norm.h"
#include "tensor/ops/unary.h"
#include "tensor/ops/view.h"

namespace sd::models {

WanConfig wan_config_from_shapes(std::string_view scope, const WanShapeOf& shape_of) {
  const std::string root(scope);
  auto need = [&](const std::string& name) {
    const std::optional<std::array<int64_t, 4>> ne = shape_of(root + name);
    SD_CHECK(ne.has_value(), "[wan] the transformer has no tensor '%s%s'", root.c_str(),
             name.c_str());
    return *ne;
  };
  WanConfig c;
  // The 3-d patch embedding [dim, C, 1, 2, 2] is read as [2, 2, 1, C * dim].
  const std::array<int64_t, 4> patch = need("patch_embedding.weight");
  c.dim = need("patch_embedding.bias")[0];
  SD_CHECK(patch[0] == 2 && patch[1] == 2 && patch[2] == 1 && patch[3] % c.dim == 0,
           "[wan] the patch embedding is not a 1x2x2 convolution to %lld channels",
           static_cast<long long>(c.dim));
  c.in_channels = patch[3] / c.dim;
  SD_CHECK(c.dim % c.head_dim == 0,
           "[wan] the width %lld is not a whole number of %lld-wide heads (every released Wan "
           "has 128-wide heads)",
           static_cast<long long>(c.dim), static_cast<long long>(c.head_dim));
  c.text_dim = need("text_embedding.0.weight")[0];
  c.freq_dim = need("time_embedding.0.weight")[0];
  c.ffn_dim = need("blocks.0.ffn.0.weight")[1];
  const int64_t head_out = need("head.head.weight")[1];
  SD_CHECK(head_out % 4 == 0, "[wan] the head gives %lld values per patch, not 2x2 patches",
           static_cast<long long>(head_out));
  c.out_channels = head_out / 4;
  c.layers = 0;
  while (shape_of(root + "blocks." + std::to_string(c.layers) + ".self_attn.q.weight")) ++c.layers;
  if (const auto proj = shape_of(root + "img_emb.proj.1.weight")) {
    c.image_dim = (*proj)[0];
    if (const auto pos = shape_of(root + "img_emb.emb_pos")) c.image_pos_tokens = (*pos)[1];
  }
  if (const auto vace = shape_of(root + "vace_patch_embedding.weight")) {
    SD_CHECK((*vace)[0] == 2 && (*vace)[1] == 2 && (*vace)[2] == 1 && (*vace)[3] % c.dim == 0,
             "[wan] the VACE patch embedding is not a 1x2x2 convolution to %lld channels",
             static_cast<long long>(c.dim));
    c.vace_in_channels = (*vace)[3] / c.dim;
    while (shape_of(root + "vace_blocks." + std::to_string(c.vace_layers) + ".self_attn.q.weight"))
      ++c.vace_layers;
    SD_CHECK(c.vace_layers > 0 && c.vace_layers <= c.layers,
             "[wan] the VACE transformer has %d VACE blocks for %d blocks (1 to %d)", c.vace_layers,
             c.layers, c.layers);
  }
  int axes = 0;
  for (int d : c.axes_dim) axes += d;
  SD_CHECK(axes == c.head_dim, "[wan] rotary axes cover %d channels, heads have %lld", axes,
           static_cast<long long>(c.head_dim));
  return c;
}

int WanConfig::vace_block_after(int block) const {
  if (vace_layers == 0) return -1;
  // Every step-th block, as many as there are VACE blocks (Wan's vace_layers default).
  const int step = layers / vace_layers;
  const int n = block / step;
  return block % step == 0 && n < vace_layers ? n : -1;
}

WanRope wan_rope(const WanConfig& c, int64_t frames, int64_t rows, int64_t cols) {
  const int64_t half = c.head_dim / 2;
  const int64_t tokens = frames * rows * cols;
  WanRope r;
  r.cos.resize(static_cast<size_t>(half * tokens));
  r.sin.resize(r.cos.size());
  for (int64_t t = 0; t < tokens; ++t) {
    const float pos[3] = {static_cast<float>(t / (rows * cols)),
                          static_cast<float>(t / cols % rows), static_cast<float>(t % cols)};
    nn::rope_row(pos, c.axes_dim, c.theta, r.cos.data() + t * half, r.sin.data() + t * half);
  }
  return r;
}

std::vector<float> wan_patchify(const std::vector<float>& latent, int64_t w, int64_t h,
                                int64_t frames, int64_t channels) {
  const int64_t pw = w / 2, ph = h / 2, width = 4 * channels;
  std::vector<float> tokens(static_cast<size_t>(width * frames * ph * pw));
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t f = 0; f < frames; ++f)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x) {
          const int64_t token = (f * ph + y / 2) * pw + x / 2;
          const int64_t value = c * 4 + (y % 2) * 2 + x % 2;
          tokens[static_cast<size_t>(token * width + value)] =
              latent[static_cast<size_t>(((c * frames + f) * h + y) * w + x)];
        }
  return tokens;
}

std::vector<float> wan_unpatchify(const std::vector<float>& tokens, int64_t w, int64_t h,
                                  int64_t frames, int64_t channels) {
  const int64_t pw = w / 2, ph = h / 2, width = 4 * channels;
  std::vector<float> latent(static_cast<size_t>(w * h * frames * channels));
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t f = 0; f < frames; ++f)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x) {
          const int64_t token = (f * ph + y / 2) * pw + x / 2;
          const int64_t value = ((y % 2) * 2 + x % 2) * channels + c;
          latent[static_cast<size_t>(((c * frames + f) * h + y) * w + x)] =
              tokens[static_cast<size_t>(token * width + value)];
        }
  return latent;
}

namespace {

Tensor* f32(Context& ctx, Tensor* t) {
  return t->type == DType::F32 ? t : cast(ctx, t, DType::F32);
}

// A block's (or the head's) learned modulation [dim, n] plus the timestep's e ([dim, n, F]
// or, the same for all n, [dim, 1, F]; F: 1 or one per frame), as n vectors [dim, 1, F]
// that broadcast over each frame's tokens.
std::vector<Tensor*> modulation(const nn::Scope& s, Tensor* e, int64_t dim, int n) {
  Context& ctx = s.ctx();
  Tensor* table = f32(ctx, s.param("modulation", {dim, n}));
  std::vector<Tensor*> out;
  for (int i = 0; i < n; ++i) {
    Tensor* ei = e->ne[1] == 1 ? e : cont(ctx, slice(ctx, e, 1, i, i + 1));
    out.push_back(add(ctx, ei, cont(ctx, slice(ctx, table, 1, i, i + 1))));
  }
  return out;
}

// Tokens [dim, L] grouped by frame, [dim, L / F, F], to meet per-frame modulation; and back.
Tensor* by_frame(Context& ctx, Tensor* x, int64_t frames) {
  return reshape(ctx, x, {x->ne[0], x->ne[1] / frames, frames});
}
Tensor* as_tokens(Context& ctx, Tensor* x) {
  return reshape(ctx, x, {x->ne[0], x->ne[1] * x->ne[2]});
}

// Self-attention over the patches with rotary positions: [dim, L].
Tensor* self_attention(const nn::Scope& a, const WanConfig& c, Tensor* x, Tensor* cos_t,
                       Tensor* sin_t) {
  Context& ctx = a.ctx();
  const int64_t len = x->ne[1], hd = c.head_dim;
  auto heads = [&](Tensor* t) { return reshape(ctx, t, {hd, c.heads(), len, 1}); };
  Tensor* q = nn::rms_norm(a["norm_q"], nn::linear(a["q"], x, c.dim, c.dim), c.dim, c.eps);
  Tensor* k = nn::rms_norm(a["norm_k"], nn::linear(a["k"], x, c.dim, c.dim), c.dim, c.eps);
  Tensor* v = nn::linear(a["v"], x, c.dim, c.dim);
  Tensor* o = nn::rope_attention(ctx, heads(q), heads(k), heads(v), cos_t, sin_t, nullptr,
                                 a.attention_precision(a["q"].param("weight", {c.dim, c.dim})));
  return nn::linear(a["o"], reshape(ctx, o, {c.dim, len}), c.dim, c.dim);
}

// The patches attend to the text, and to the image tokens where the model has them
// (their own keys and values, the two results summed): [dim, L].
Tensor* cross_attention(const nn::Scope& a, const WanConfig& c, Tensor* x, Tensor* text,
                        Tensor* image) {
  Context& ctx = a.ctx();
  const AttentionPrecision precision =
      a.attention_precision(a["q"].param("weight", {c.dim, c.dim}));
  Tensor* q = nn::rms_norm(a["norm_q"], nn::linear(a["q"], x, c.dim, c.dim), c.dim, c.eps);
  Tensor* k = nn::rms_norm(a["norm_k"], nn::linear(a["k"], text, c.dim, c.dim), c.dim, c.eps);
  Tensor* v = nn::linear(a["v"], text, c.dim, c.dim);
  Tensor* o = nn::multi_head_attention(ctx, q, k, v, c.heads(), nullptr, precision);
  if (image) {
    Tensor* k_img =
        nn::rms_norm(a["norm_k_img"], nn::linear(a["k_img"], image, c.dim, c.dim), c.dim, c.eps);
    Tensor* v_img = nn::linear(a["v_img"], image, c.dim, c.dim);
    o = add(ctx, nn::multi_head_attention(ctx, q, k_img, v_img, c.heads(), nullptr, precision), o);
  }
  return nn::linear(a["o"], o, c.dim, c.dim);
}

// CLIP vision tokens [image_dim, n] -> image context [dim, n] (img_emb's MLP), FLF2V's
// position table added first.
Tensor* image_embedding(const nn::Scope& s, const WanConfig& c, Tensor* image) {
  Context& ctx = s.ctx();
  if (c.image_pos_tokens > 0) {
    const int64_t n = std::min(image->ne[1], c.image_pos_tokens);
    Tensor* pos = reshape(ctx, s.param("emb_pos", {c.image_dim, c.image_pos_tokens, 1}),
                          {c.image_dim, c.image_pos_tokens});
    image = add(ctx, cont(ctx, slice(ctx, image, 1, 0, n)),
                cont(ctx, slice(ctx, f32(ctx, pos), 1, 0, n)));
  }
  const nn::Scope p = s["proj"];
  Tensor* y = nn::layer_norm(p["0"], image, c.image_dim, 1e-5f);
  y = gelu(ctx, nn::linear(p["1"], y, c.image_dim, c.image_dim));
  y = nn::linear(p["3"], y, c.image_dim, c.dim);
  return nn::layer_norm(p["4"], y, c.dim, 1e-5f);
}

Tensor* block(const nn::Scope& b, const WanConfig& c, Tensor* x, Tensor* e0, Tensor* text,
              Tensor* image, Tensor* cos_t, Tensor* sin_t) {
  Context& ctx = b.ctx();
  // shift, scale, gate for attention, then for the feed-forward (per frame where the
  // frames' timesteps differ).
  const std::vector<Tensor*> m = modulation(b, e0, c.dim, 6);
  const int64_t frames = e0->ne[2];
  auto modulated = [&](Tensor* t, Tensor* shift, Tensor* scale) {
    return as_tokens(ctx, nn::modulate(ctx, by_frame(ctx, t, frames), shift, scale));
  };
  auto gated = [&](Tensor* t, Tensor* gate) {
    return as_tokens(ctx, mul(ctx, by_frame(ctx, t, frames), gate));
  };
  Tensor* y = modulated(layer_norm(ctx, x, c.eps), m[0], m[1]);
  x = add(ctx, x, gated(self_attention(b["self_attn"], c, y, cos_t, sin_t), m[2]));

  const nn::Scope n3 = b["norm3"];
  y = layer_norm(ctx, x, c.eps, n3.param("weight", {c.dim}), n3.param("bias", {c.dim}));
  x = add(ctx, x, cross_attention(b["cross_attn"], c, y, text, image));

  y = modulated(layer_norm(ctx, x, c.eps), m[3], m[4]);
  y = gelu(ctx, nn::linear(b["ffn"]["0"], y, c.dim, c.ffn_dim));
  y = nn::linear(b["ffn"]["2"], y, c.ffn_dim, c.dim);
  return set_name(add(ctx, x, gated(y, m[5])), b.prefix() + "out");
}

// A 1x2x2 patch embedding (the 3-d convolution as a matrix): patches [4 channels, L] ->
// [dim, L].
Tensor* patch_embedding(const nn::Scope& s, const WanConfig& c, Tensor* patches, int64_t channels) {
  Context& ctx = s.ctx();
  Tensor* w = s.param("weight", {2, 2, 1, channels * c.dim});
  w = reshape(ctx, w, {4 * channels, c.dim});
  return add(ctx, matmul(ctx, w, patches), f32(ctx, s.param("bias", {c.dim})));
}

}  // namespace

Tensor* wan_forward(const nn::Scope& dit, const WanConfig& c, Tensor* patches, Tensor* text,
                    Tensor* timestep, Tensor* rope_cos, Tensor* rope_sin, Tensor* image,
                    Tensor* vace, float vace_strength) {
  Context& ctx = dit.ctx();
  SD_CHECK((image != nullptr) == (c.image_dim > 0),
           c.image_dim > 0 ? "[wan] this image-to-video transformer needs the CLIP vision tokens "
                             "of the first frame"
                           : "[wan] this transformer takes no image tokens");
  SD_CHECK(!image || image->ne[0] == c.image_dim,
           "[wan] image tokens of %lld values, img_emb reads %lld",
           static_cast<long long>(image ? image->ne[0] : 0), static_cast<long long>(c.image_dim));
  SD_CHECK(patches->ne[0] == c.patch_in(),
           "[wan] patches of %lld values, the transformer reads %lld",
           static_cast<long long>(patches->ne[0]), static_cast<long long>(c.patch_in()));
  SD_CHECK(text->ne[0] == c.text_dim,
           "[wan] text tokens of %lld values, the transformer reads %lld",
           static_cast<long long>(text->ne[0]), static_cast<long long>(c.text_dim));
  SD_CHECK((vace != nullptr) == (c.vace_layers > 0),
           c.vace_layers > 0 ? "[wan] this VACE transformer needs its context (the control video)"
                             : "[wan] this transformer has no VACE blocks");
  SD_CHECK(!vace || (vace->ne[0] == c.vace_patch_in() && vace->ne[1] == patches->ne[1]),
           "[wan] VACE context patches %s, the transformer reads [%lld, %lld]",
           vace ? vace->shape_string().c_str() : "", static_cast<long long>(c.vace_patch_in()),
           static_cast<long long>(patches->ne[1]));
  SD_CHECK(rope_cos->ne[0] == c.head_dim / 2 && rope_cos->ne[1] == patches->ne[1],
           "[wan] rotary tables %s for %lld tokens", rope_cos->shape_string().c_str(),
           static_cast<long long>(patches->ne[1]));

  // 1. Embeddings: the patches (the 1x2x2 convolution as a matrix), the timestep (sinusoids,
  //    MLP, then six modulation vectors per block), the text (MLP with GELU).
  Tensor* x = patch_embedding(dit["patch_embedding"], c, patches, c.in_channels);

  const nn::Scope te = dit["time_embedding"];
  const int64_t frames = timestep->ne[0];  // 1, or one timestep per frame
  SD_CHECK(frames >= 1 && patches->ne[1] % frames == 0,
           "[wan] %lld timesteps for %lld tokens: one, or one per frame",
           static_cast<long long>(frames), static_cast<long long>(patches->ne[1]));
  Tensor* e = timestep_embedding(ctx, timestep, static_cast<int>(c.freq_dim));
  e = nn::linear(te["2"], silu(ctx, nn::linear(te["0"], e, c.freq_dim, c.dim)), c.dim, c.dim);
  Tensor* e0 = nn::linear(dit["time_projection"]["1"], silu(ctx, e), c.dim, 6 * c.dim);
  e0 = reshape(ctx, e0, {c.dim, 6, frames});

  const nn::Scope tx = dit["text_embedding"];
  Tensor* txt = gelu(ctx, nn::linear(tx["0"], text, c.text_dim, c.dim));
  txt = nn::linear(tx["2"], txt, c.dim, c.dim);
  Tensor* img = image ? image_embedding(dit["img_emb"], c, image) : nullptr;

  // 2. The blocks, and VACE's beside them: its stream starts from its context's patches
  //    plus the video's and hands each of its blocks' projected outputs to the main stream.
  Tensor* hint_stream = nullptr;
  if (vace) {
    const nn::Scope before = dit["vace_blocks"][0]["before_proj"];
    hint_stream = patch_embedding(dit["vace_patch_embedding"], c, vace, c.vace_in_channels);
    hint_stream = add(ctx, nn::linear(before, hint_stream, c.dim, c.dim), x);
  }
  for (int i = 0; i < c.layers; ++i) {
    x = block(dit["blocks"][i], c, x, e0, txt, img, rope_cos, rope_sin);
    if (const int n = c.vace_block_after(i); n >= 0 && vace) {
      const nn::Scope vb = dit["vace_blocks"][n];
      hint_stream = block(vb, c, hint_stream, e0, txt, img, rope_cos, rope_sin);
      Tensor* hint = nn::linear(vb["after_proj"], hint_stream, c.dim, c.dim);
      x = add(ctx, x, scale(ctx, hint, vace_strength));
    }
  }

  // 3. The head: LayerNorm modulated by the time embedding, projected to patches.
  const std::vector<Tensor*> m =
      modulation(dit["head"], reshape(ctx, e, {c.dim, 1, frames}), c.dim, 2);
  x = as_tokens(ctx,
                nn::modulate(ctx, by_frame(ctx, layer_norm(ctx, x, c.eps), frames), m[0], m[1]));
  x = nn::linear(dit["head"]["head"], x, c.dim, c.patch_out());
  return set_name(x, dit.prefix() + "out");
}

}  // namespace sd::models
