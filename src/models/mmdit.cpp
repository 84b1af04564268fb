#include "models/mmdit.h"

#include <algorithm>
#include <optional>
#include <string>

#include "nn/dit_blocks.h"
#include "nn/layers.h"
#include "tensor/error.h"
#include "tensor/ops/concat.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/generate.h"
#include "tensor/ops/norm.h"
#include "tensor/ops/unary.h"
#include "tensor/ops/view.h"

namespace sd::models {

MmditConfig MmditConfig::sd3_medium() {
  return MmditConfig{};
}

MmditConfig MmditConfig::sd3_5_medium() {
  MmditConfig c;
  c.qk_norm = QkNorm::Rms;
  c.x_self_attn_blocks = 13;
  c.pos_embed_max = 384;
  return c;
}

MmditConfig MmditConfig::sd3_5_large() {
  MmditConfig c;
  c.depth = 38;
  c.hidden = 64 * 38;
  c.qk_norm = QkNorm::Rms;
  return c;
}

namespace {

// An MLP embedder (timestep or pooled vector): mlp.2(silu(mlp.0(x))).
Tensor* embedder(const nn::Scope& s, Tensor* x, int64_t in, int64_t hidden) {
  return nn::mlp_embedder(s["mlp"]["0"], s["mlp"]["2"], x, in, hidden);
}

struct Qkv {
  Tensor *q, *k, *v;  // [hidden, L, N] each
};

// Per-head normalization of q or k [hidden, L, N] (SD3.5: RMS norm with a learned scale).
Tensor* head_norm(const nn::Scope& ln, const MmditConfig& c, Tensor* x) {
  Context& ctx = ln.ctx();
  const int64_t d = c.head_dim();
  Tensor* h = reshape(ctx, x, {d, c.heads(), x->ne[1], x->ne[2]});
  if (c.qk_norm == QkNorm::Rms)
    h = rms_norm(ctx, h, 1e-6f, ln.param("weight", {d}));
  else
    h = layer_norm(ctx, h, 1e-6f, ln.param("weight", {d}), ln.param("bias", {d}));
  return reshape(ctx, h, {c.hidden, x->ne[1], x->ne[2]});
}

// The fused qkv projection (with bias) cut into q, k, v, q and k normalized when the model
// has q/k norms.
Qkv attention_qkv(const nn::Scope& attn, const MmditConfig& c, Tensor* x) {
  Context& ctx = attn.ctx();
  Tensor* qkv = nn::linear(attn["qkv"], x, c.hidden, 3 * c.hidden);
  auto part = [&](int i) {
    return cont(ctx, slice(ctx, qkv, 0, i * c.hidden, (i + 1) * c.hidden));
  };
  Qkv r{part(0), part(1), part(2)};
  if (c.qk_norm != QkNorm::None) {
    r.q = head_norm(attn["ln_q"], c, r.q);
    r.k = head_norm(attn["ln_k"], c, r.k);
  }
  return r;
}

Tensor* attend(const nn::Scope& attn, const MmditConfig& c, const Qkv& qkv) {
  return nn::multi_head_attention(
      attn.ctx(), qkv.q, qkv.k, qkv.v, c.heads(), nullptr,
      attn.attention_precision(attn["qkv"].param("weight", {c.hidden, 3 * c.hidden})));
}

// One stream of a joint block ("DismantledBlock") before the joint attention: adaLN
// modulation chunks (shift, scale, gate for attention and MLP; shift and scale only when
// pre-only; three more for attn2), and the modulated input's q, k, v.
struct StreamPre {
  std::vector<Tensor*> mod;
  Qkv qkv;
  std::optional<Qkv> qkv2;  // MMDiT-X's image-only self-attention
};
StreamPre stream_pre(const nn::Scope& block, const MmditConfig& c, Tensor* x, Tensor* vec,
                     bool pre_only, bool self_attn) {
  Context& ctx = block.ctx();
  const int count = self_attn ? 9 : pre_only ? 2 : 6;
  StreamPre s;
  s.mod = nn::modulation_chunks(block["adaLN_modulation"]["1"], vec, c.hidden, count);
  Tensor* xn = layer_norm(ctx, x, 1e-6f);  // norm1, no affine parameters
  s.qkv = attention_qkv(block["attn"], c, nn::modulate(ctx, xn, s.mod[0], s.mod[1]));
  if (self_attn)
    s.qkv2 = attention_qkv(block["attn2"], c, nn::modulate(ctx, xn, s.mod[6], s.mod[7]));
  return s;
}

// x + gate * proj(attention) (and the same for attn2), then x + gate * mlp(modulate(x)).
Tensor* stream_post(const nn::Scope& block, const MmditConfig& c, const StreamPre& s, Tensor* x,
                    Tensor* attn_out) {
  Context& ctx = block.ctx();
  x = add(ctx, x,
          mul(ctx, nn::linear(block["attn"]["proj"], attn_out, c.hidden, c.hidden), s.mod[2]));
  if (s.qkv2) {
    Tensor* attn2 = attend(block["attn2"], c, *s.qkv2);
    x = add(ctx, x,
            mul(ctx, nn::linear(block["attn2"]["proj"], attn2, c.hidden, c.hidden), s.mod[8]));
  }
  const int64_t mlp = c.mlp_ratio * c.hidden;
  Tensor* h = nn::norm_and_modulate(ctx, x, s.mod[3], s.mod[4]);     // norm2
  h = gelu(ctx, nn::linear(block["mlp"]["fc1"], h, c.hidden, mlp));  // tanh GELU
  h = nn::linear(block["mlp"]["fc2"], h, mlp, c.hidden);
  return add(ctx, x, mul(ctx, h, s.mod[5]));
}

// A joint block: both streams' q, k, v joined (text first), one attention, split back.
// The last block's context stream is pre-only: its output is not used, so it is null.
void joint_block(const nn::Scope& block, const MmditConfig& c, int index, Tensor*& context,
                 Tensor*& x, Tensor* vec) {
  Context& ctx = block.ctx();
  const bool last = index == c.depth - 1;
  const nn::Scope cb = block["context_block"], xb = block["x_block"];
  const StreamPre cs = stream_pre(cb, c, context, vec, last, false);
  const StreamPre xs = stream_pre(xb, c, x, vec, false, index < c.x_self_attn_blocks);
  const Qkv joint{concat(ctx, cs.qkv.q, xs.qkv.q, 1), concat(ctx, cs.qkv.k, xs.qkv.k, 1),
                  concat(ctx, cs.qkv.v, xs.qkv.v, 1)};
  Tensor* attn = attend(xb["attn"], c, joint);  // [hidden, Lc + Lx, N]
  const int64_t lc = context->ne[1], lx = x->ne[1];
  Tensor* context_attn = cont(ctx, slice(ctx, attn, 1, 0, lc));
  Tensor* x_attn = cont(ctx, slice(ctx, attn, 1, lc, lc + lx));
  context = last ? nullptr
                 : set_name(stream_post(cb, c, cs, context, context_attn),
                            block.prefix() + "context_out");
  x = set_name(stream_post(xb, c, xs, x, x_attn), block.prefix() + "x_out");
}

// The centre h x w patches of the stored position table: [hidden, h * w, 1].
Tensor* cropped_pos_embed(const nn::Scope& dit, const MmditConfig& c, int64_t h, int64_t w) {
  Context& ctx = dit.ctx();
  const int64_t m = c.pos_embed_max;
  SD_CHECK(h <= m && w <= m,
           "[mmdit] a %lldx%lld-patch latent is larger than the position table (%lldx%lld "
           "patches, %lld pixels a side); use a smaller size",
           static_cast<long long>(w), static_cast<long long>(h), static_cast<long long>(m),
           static_cast<long long>(m), static_cast<long long>(m * c.patch_size * 8));
  Tensor* table = reshape(ctx, dit.param("pos_embed", {c.hidden, m * m, 1}), {c.hidden, m, m});
  const int64_t top = (m - h) / 2, left = (m - w) / 2;
  Tensor* crop = slice(ctx, slice(ctx, table, 2, top, top + h), 1, left, left + w);
  return reshape(ctx, cont(ctx, crop), {c.hidden, h * w, 1});
}

}  // namespace

Tensor* mmdit_forward(const nn::Scope& dit, const MmditConfig& c, Tensor* x, Tensor* timesteps,
                      Tensor* y, Tensor* context, const std::vector<int>& skip_layers) {
  Context& ctx = dit.ctx();
  SD_CHECK(c.depth > 0 && c.hidden % c.depth == 0, "[mmdit] %d heads do not split a width of %lld",
           c.depth, static_cast<long long>(c.hidden));
  SD_CHECK(x->ne[2] == c.in_channels && context->ne[0] == c.context_dim && y->ne[0] == c.adm_dim,
           "[mmdit] inputs have %lld, %lld and %lld channels; the model takes %lld (latent), %lld "
           "(text) and %lld (pooled vector)",
           static_cast<long long>(x->ne[2]), static_cast<long long>(context->ne[0]),
           static_cast<long long>(y->ne[0]), static_cast<long long>(c.in_channels),
           static_cast<long long>(c.context_dim), static_cast<long long>(c.adm_dim));
  const int p = c.patch_size;
  SD_CHECK(x->ne[0] % p == 0 && x->ne[1] % p == 0,
           "[mmdit] a %lldx%lld latent does not split into %dx%d patches",
           static_cast<long long>(x->ne[0]), static_cast<long long>(x->ne[1]), p, p);
  const int64_t pw = x->ne[0] / p, ph = x->ne[1] / p, n = x->ne[3];

  // 1. Patches (a p x p stride-p convolution) plus the cropped position table.
  Tensor* h = nn::conv2d(dit["x_embedder"]["proj"], x, c.in_channels, c.hidden, p, p);
  h = cont(ctx, transpose(ctx, reshape(ctx, h, {pw * ph, c.hidden, n})));  // [hidden, L, N]
  h = add(ctx, h, cropped_pos_embed(dit, c, ph, pw));

  // 2. The conditioning vector: timestep sinusoids and pooled text, each through an MLP.
  Tensor* vec = embedder(dit["t_embedder"], timestep_embedding(ctx, timesteps, 256), 256, c.hidden);
  vec = add(ctx, vec, embedder(dit["y_embedder"], y, c.adm_dim, c.hidden));  // [hidden, N]

  // 3. Text tokens into the model width, then the joint blocks.
  context = nn::linear(dit["context_embedder"], context, c.context_dim, c.hidden);
  const nn::Scope blocks = dit["joint_blocks"];
  for (int i = 0; i < c.depth; ++i) {
    if (std::find(skip_layers.begin(), skip_layers.end(), i) != skip_layers.end()) continue;
    joint_block(blocks[i], c, i, context, h, vec);
  }

  // 4. Final layer: adaLN (shift first) and the projection to patches.
  const std::vector<Tensor*> mod =
      nn::modulation_chunks(dit["final_layer"]["adaLN_modulation"]["1"], vec, c.hidden, 2);
  h = nn::norm_and_modulate(ctx, h, mod[0], mod[1]);
  h = nn::linear(dit["final_layer"]["linear"], h, c.hidden, c.patch_width());
  return set_name(h, dit.prefix() + "out");
}

}  // namespace sd::models
