#include "models/z_image.h"

#include <cmath>

#include "nn/dit_blocks.h"
#include "nn/layers.h"
#include "tensor/error.h"
#include "tensor/ops/cast.h"
#include "tensor/ops/concat.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/generate.h"
#include "tensor/ops/norm.h"
#include "tensor/ops/unary.h"
#include "tensor/ops/view.h"

namespace sd::models {

ZImageConfig z_image_config_from_shapes(ZImageConfig c, std::string_view scope,
                                        const ZImageShapeOf& shape_of) {
  const std::string root(scope);
  auto need = [&](const std::string& name) {
    const std::optional<std::array<int64_t, 4>> ne = shape_of(root + name);
    SD_CHECK(ne.has_value(), "[z-image] the transformer has no tensor '%s%s'", root.c_str(),
             name.c_str());
    return *ne;
  };
  const int64_t patch_area = int64_t{c.patch_size} * c.patch_size;
  const std::array<int64_t, 4> x_embedder = need("x_embedder.weight");  // [p*p*C, hidden]
  c.in_channels = x_embedder[0] / patch_area;
  c.hidden = x_embedder[1];
  c.out_channels = need("final_layer.linear.weight")[1] / patch_area;
  c.caption_dim = need("cap_embedder.1.weight")[0];
  c.head_dim = need("layers.0.attention.q_norm.weight")[0];
  SD_CHECK(c.head_dim > 0 && c.hidden % c.head_dim == 0,
           "[z-image] heads of %lld channels do not divide the width %lld",
           static_cast<long long>(c.head_dim), static_cast<long long>(c.hidden));
  c.heads = c.hidden / c.head_dim;
  // One fused projection of as many key/value heads as query heads.
  SD_CHECK(need("layers.0.attention.qkv.weight")[1] == 3 * c.hidden,
           "[z-image] the attention projection is not q, k and v of %lld channels each "
           "(grouped key/value heads are not a released Z-Image layout)",
           static_cast<long long>(c.hidden));
  int sum = 0;
  for (int d : c.axes_dim) sum += d;
  SD_CHECK(sum == c.head_dim,
           "[z-image] heads of %lld channels, but Z-Image's rotary axes cover %d (the head width "
           "is fixed by the design)",
           static_cast<long long>(c.head_dim), sum);
  c.ffn_hidden = need("layers.0.feed_forward.w1.weight")[1];
  auto count = [&](const std::string& stem) {
    int n = 0;
    while (shape_of(root + stem + std::to_string(n) + ".attention.qkv.weight")) ++n;
    return n;
  };
  c.layers = count("layers.");
  c.refiner_layers = count("noise_refiner.");
  SD_CHECK(count("context_refiner.") == c.refiner_layers,
           "[z-image] %d image refiner blocks but %d caption refiner blocks", c.refiner_layers,
           count("context_refiner."));
  return c;
}

int64_t z_image_padded(const ZImageConfig& c, int64_t tokens) {
  const int64_t m = c.token_multiple;
  return (tokens + m - 1) / m * m;
}

ZImageRope z_image_rope(const ZImageConfig& c, int64_t caption_tokens, int64_t patches_h,
                        int64_t patches_w) {
  const int64_t half = c.head_dim / 2;
  const int64_t caption = z_image_padded(c, caption_tokens);
  const int64_t patches = patches_h * patches_w;
  const int64_t tokens = caption + z_image_padded(c, patches);
  ZImageRope r;
  r.cos.resize(static_cast<size_t>(half * tokens));
  r.sin.resize(r.cos.size());
  for (int64_t t = 0; t < tokens; ++t) {
    float pos[3] = {0.0f, 0.0f, 0.0f};  // image padding sits at the origin
    if (t < caption) {
      pos[0] = static_cast<float>(t + 1);
    } else if (t - caption < patches) {
      const int64_t patch = t - caption;
      pos[0] = static_cast<float>(caption + 1);
      pos[1] = static_cast<float>(patch / patches_w);
      pos[2] = static_cast<float>(patch % patches_w);
    }
    nn::rope_row(pos, c.axes_dim, c.theta, r.cos.data() + t * half, r.sin.data() + t * half);
  }
  return r;
}

namespace {

// x [hidden, L] followed by copies of the stream's pad token up to `padded` tokens.
Tensor* pad_tokens(const nn::Scope& dit, const char* pad_name, Tensor* x, int64_t hidden,
                   int64_t padded) {
  Context& ctx = dit.ctx();
  const int64_t len = x->ne[1];
  if (padded == len) return x;
  Tensor* token = dit.param(pad_name, {hidden});
  if (token->type != DType::F32) token = cast(ctx, token, DType::F32);  // stored as the file's
  Tensor* copies = view(ctx, token, {hidden, padded - len, 1, 1}, {token->nb[0], 0, 0, 0}, 0);
  return concat(ctx, x, cont(ctx, copies), 1);
}

// Self-attention with q/k RMS norms (eps 1e-6) and rotary positions: [hidden, L].
Tensor* attention_block(const nn::Scope& attn, const ZImageConfig& c, Tensor* x, Tensor* cos_t,
                        Tensor* sin_t) {
  Context& ctx = attn.ctx();
  const int64_t len = x->ne[1], hd = c.head_dim;
  Tensor* qkv = nn::linear(attn["qkv"], x, c.hidden, 3 * c.hidden, false);
  qkv = reshape(ctx, qkv, {hd, 3 * c.heads, len, 1});
  Tensor* q = slice(ctx, qkv, 1, 0, c.heads);
  Tensor* k = slice(ctx, qkv, 1, c.heads, 2 * c.heads);
  Tensor* v = slice(ctx, qkv, 1, 2 * c.heads, 3 * c.heads);
  q = nn::rms_norm(attn["q_norm"], cont(ctx, q), hd, 1e-6f);
  k = nn::rms_norm(attn["k_norm"], cont(ctx, k), hd, 1e-6f);
  Tensor* out = nn::rope_attention(
      ctx, q, k, v, cos_t, sin_t, nullptr,
      attn.attention_precision(attn["qkv"].param("weight", {c.hidden, 3 * c.hidden})));
  return nn::linear(attn["out"], reshape(ctx, out, {c.hidden, len}), c.hidden, c.hidden, false);
}

Tensor* feed_forward(const nn::Scope& ff, const ZImageConfig& c, Tensor* x) {
  Context& ctx = ff.ctx();
  Tensor* gate = silu(ctx, nn::linear(ff["w1"], x, c.hidden, c.ffn_hidden, false));
  Tensor* h = mul(ctx, gate, nn::linear(ff["w3"], x, c.hidden, c.ffn_hidden, false));
  return nn::linear(ff["w2"], h, c.ffn_hidden, c.hidden, false);
}

// One block on x [hidden, L]; t_emb [adaln_dim] or null (the caption refiner).
Tensor* block(const nn::Scope& b, const ZImageConfig& c, Tensor* x, Tensor* t_emb, Tensor* cos_t,
              Tensor* sin_t) {
  Context& ctx = b.ctx();
  Tensor* scale_msa = nullptr;
  Tensor* gate_msa = nullptr;
  Tensor* scale_mlp = nullptr;
  Tensor* gate_mlp = nullptr;
  if (t_emb) {
    Tensor* m = nn::linear(b["adaLN_modulation"]["0"], t_emb, c.adaln_dim(), 4 * c.hidden);
    auto chunk = [&](int i) { return slice(ctx, m, 0, i * c.hidden, (i + 1) * c.hidden); };
    scale_msa = scale(ctx, cont(ctx, chunk(0)), 1.0f, 1.0f);
    gate_msa = unary(ctx, cont(ctx, chunk(1)), UnaryOp::Tanh);
    scale_mlp = scale(ctx, cont(ctx, chunk(2)), 1.0f, 1.0f);
    gate_mlp = unary(ctx, cont(ctx, chunk(3)), UnaryOp::Tanh);
  }
  Tensor* h = nn::rms_norm(b["attention_norm1"], x, c.hidden, c.eps);
  if (scale_msa) h = mul(ctx, h, scale_msa);
  h = attention_block(b["attention"], c, h, cos_t, sin_t);
  h = nn::rms_norm(b["attention_norm2"], h, c.hidden, c.eps);
  if (gate_msa) h = mul(ctx, h, gate_msa);
  x = add(ctx, x, h);

  h = nn::rms_norm(b["ffn_norm1"], x, c.hidden, c.eps);
  if (scale_mlp) h = mul(ctx, h, scale_mlp);
  h = feed_forward(b["feed_forward"], c, h);
  h = nn::rms_norm(b["ffn_norm2"], h, c.hidden, c.eps);
  if (gate_mlp) h = mul(ctx, h, gate_mlp);
  return set_name(add(ctx, x, h), b.prefix() + "out");
}

}  // namespace

Tensor* z_image_forward(const nn::Scope& dit, const ZImageConfig& c, Tensor* img, Tensor* caption,
                        Tensor* timestep, Tensor* rope_cos, Tensor* rope_sin) {
  Context& ctx = dit.ctx();
  const int64_t patch_width = int64_t{c.patch_size} * c.patch_size;
  SD_CHECK(img->ne[0] == patch_width * c.in_channels,
           "[z-image] image tokens of %lld values, the transformer reads %lld",
           static_cast<long long>(img->ne[0]), static_cast<long long>(patch_width * c.in_channels));
  SD_CHECK(caption->ne[0] == c.caption_dim,
           "[z-image] caption tokens of %lld values, the transformer reads %lld",
           static_cast<long long>(caption->ne[0]), static_cast<long long>(c.caption_dim));
  const int64_t image_tokens = img->ne[1];
  const int64_t caption_len = z_image_padded(c, caption->ne[1]);
  const int64_t image_len = z_image_padded(c, image_tokens);
  const int64_t half = c.head_dim / 2;
  SD_CHECK(rope_cos->ne[1] == caption_len + image_len,
           "[z-image] rotary tables for %lld tokens, the sequence has %lld",
           static_cast<long long>(rope_cos->ne[1]),
           static_cast<long long>(caption_len + image_len));

  // 1. Embeddings: the timestep (sinusoids -> MLP), the caption (RMS norm -> linear), the
  //    patches; each stream padded with its learned token.
  const nn::Scope te = dit["t_embedder"]["mlp"];
  Tensor* t = timestep_embedding(ctx, timestep, 256);
  t = nn::linear(te["0"], t, 256, c.t_hidden());
  Tensor* t_emb = nn::linear(te["2"], silu(ctx, t), c.t_hidden(), c.adaln_dim());

  Tensor* txt = nn::rms_norm(dit["cap_embedder"]["0"], caption, c.caption_dim, c.eps);
  txt = nn::linear(dit["cap_embedder"]["1"], txt, c.caption_dim, c.hidden);
  txt = pad_tokens(dit, "cap_pad_token", txt, c.hidden, caption_len);
  Tensor* x = nn::linear(dit["x_embedder"], img, patch_width * c.in_channels, c.hidden);
  x = pad_tokens(dit, "x_pad_token", x, c.hidden, image_len);

  // 2. Each stream refined on its own, at its own positions.
  Tensor* txt_cos = slice(ctx, rope_cos, 1, 0, caption_len);
  Tensor* txt_sin = slice(ctx, rope_sin, 1, 0, caption_len);
  Tensor* img_cos = slice(ctx, rope_cos, 1, caption_len, caption_len + image_len);
  Tensor* img_sin = slice(ctx, rope_sin, 1, caption_len, caption_len + image_len);
  txt_cos = cont(ctx, txt_cos), txt_sin = cont(ctx, txt_sin);
  img_cos = cont(ctx, img_cos), img_sin = cont(ctx, img_sin);
  SD_CHECK(rope_cos->ne[0] == half, "[z-image] rotary tables of %lld frequencies, heads need %lld",
           static_cast<long long>(rope_cos->ne[0]), static_cast<long long>(half));
  for (int i = 0; i < c.refiner_layers; ++i)
    txt = block(dit["context_refiner"][i], c, txt, nullptr, txt_cos, txt_sin);
  for (int i = 0; i < c.refiner_layers; ++i)
    x = block(dit["noise_refiner"][i], c, x, t_emb, img_cos, img_sin);

  // 3. The joint blocks over caption then image.
  x = concat(ctx, txt, x, 1);
  for (int i = 0; i < c.layers; ++i) x = block(dit["layers"][i], c, x, t_emb, rope_cos, rope_sin);

  // 4. The head: LayerNorm without affine, scaled by the timestep, projected to patches; the
  //    released model predicts image minus noise, the negative of the flow the sampler uses.
  const nn::Scope head = dit["final_layer"];
  Tensor* s = nn::linear(head["adaLN_modulation"]["1"], silu(ctx, t_emb), c.adaln_dim(), c.hidden);
  x = mul(ctx, layer_norm(ctx, x, 1e-6f), scale(ctx, s, 1.0f, 1.0f));
  x = slice(ctx, x, 1, caption_len, caption_len + image_tokens);
  x = nn::linear(head["linear"], cont(ctx, x), c.hidden, patch_width * c.out_channels);
  return set_name(scale(ctx, x, -1.0f), dit.prefix() + "out");
}

}  // namespace sd::models
