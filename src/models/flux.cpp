#include "models/flux.h"

#include <cmath>
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

FluxConfig FluxConfig::dev() {
  return FluxConfig{};
}

FluxConfig FluxConfig::schnell() {
  FluxConfig c;
  c.guidance_embed = false;
  return c;
}

FluxConfig FluxConfig::chroma() {
  FluxConfig c = schnell();
  c.vec_dim = 0;
  c.approximator.depth = 5;
  return c;
}

FluxConfig FluxConfig::flux2_klein() {
  FluxConfig c;
  c.in_channels = c.out_channels = 128;
  c.patch_size = 1;
  c.hidden = 3072;
  c.heads = 24;
  c.mlp_hidden = 9216;
  c.context_dim = 7680;
  c.vec_dim = 0;
  c.depth = 5;
  c.depth_single = 20;
  c.guidance_embed = false;
  c.axes_dim = {32, 32, 32, 32};
  c.theta = 2000.0f;
  c.linear_bias = false;
  c.shared_modulation = true;
  c.gated_mlp = true;
  c.text_axis = 3;
  c.ref_index_step = 10;
  return c;
}

FluxRope flux_rope(const FluxConfig& c, int64_t text_tokens, int64_t patches_h, int64_t patches_w) {
  return flux_rope(c, text_tokens, patches_h, patches_w, {});
}

FluxRope flux_rope(const FluxConfig& c, int64_t text_tokens, int64_t patches_h, int64_t patches_w,
                   const std::vector<FluxPosition>& more) {
  SD_CHECK(c.axes_dim.size() <= 4, "[flux] %zu rotary axes; the positions have at most 4",
           c.axes_dim.size());
  const int64_t half = c.head_dim() / 2;
  const int64_t image_end = text_tokens + patches_h * patches_w;
  const int64_t tokens = image_end + static_cast<int64_t>(more.size());
  FluxRope r;
  r.cos.resize(static_cast<size_t>(half * tokens));
  r.sin.resize(r.cos.size());
  for (int64_t t = 0; t < tokens; ++t) {
    // Axis 0 is the image index (0 for the generated image), 1 the row, 2 the column;
    // text tokens sit at the origin, or are numbered along c.text_axis.
    float axes[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (t < text_tokens) {
      if (c.text_axis >= 0) axes[c.text_axis] = static_cast<float>(t);
    } else {
      FluxPosition pos;
      if (t < image_end) {
        const int64_t patch = t - text_tokens;
        pos = {0.0f, static_cast<float>(patch / patches_w), static_cast<float>(patch % patches_w)};
      } else {
        pos = more[static_cast<size_t>(t - image_end)];
      }
      axes[0] = pos.index, axes[1] = pos.row, axes[2] = pos.col;
    }
    nn::rope_row(axes, c.axes_dim, c.theta, r.cos.data() + t * half, r.sin.data() + t * half);
  }
  return r;
}

namespace {

// Shift, scale and gate of one adaLN modulation, each f32 [hidden, 1, N].
struct Modulation {
  Tensor* shift;
  Tensor* scale;
  Tensor* gate;
};

// Where a block's shift, scale and gate vectors come from: FLUX.1 computes them per block
// from the vector embedding (lin(silu(vec))); Chroma reads them from its approximator's
// table, each block at its offset (FluxConfig::modulation_count gives the order); FLUX.2
// computes one set per stream kind, once, and every block uses it.
struct Modulations {
  const FluxConfig* config = nullptr;
  Tensor* vec = nullptr;    // FLUX.1, FLUX.2: [hidden, N]
  Tensor* table = nullptr;  // Chroma: [hidden, modulation_count, N]
  std::vector<Tensor*> shared_img, shared_txt, shared_single;  // FLUX.2

  std::vector<Tensor*> chunks(const nn::Scope& lin, int64_t offset, int count) const {
    if (!table) return nn::modulation_chunks(lin, vec, config->hidden, count, config->linear_bias);
    std::vector<Tensor*> out;
    for (int i = 0; i < count; ++i)
      out.push_back(cont(lin.ctx(), slice(lin.ctx(), table, 1, offset + i, offset + i + 1)));
    return out;
  }
  // A double block's six vectors for its "img" or "txt" stream.
  std::vector<Tensor*> double_stream(const nn::Scope& block, int index, bool img) const {
    if (config->shared_modulation) return img ? shared_img : shared_txt;
    const int64_t img_at = 3 * config->depth_single + 6 * index;
    return img ? chunks(block["img_mod"]["lin"], img_at, 6)
               : chunks(block["txt_mod"]["lin"], img_at + 6 * config->depth, 6);
  }
  std::vector<Tensor*> single(const nn::Scope& block, int index) const {
    if (config->shared_modulation) return shared_single;
    return chunks(block["modulation"]["lin"], 3 * index, 3);
  }
  std::vector<Tensor*> final_layer(const nn::Scope& dit) const {
    return chunks(dit["final_layer"]["adaLN_modulation"]["1"],
                  3 * config->depth_single + 12 * config->depth, 2);
  }
};

// x [C, 1, N] repeated along dim 1: [C, count, N] (a view with row stride 0, copied).
Tensor* repeat_rows(Context& ctx, Tensor* x, int64_t count) {
  return cont(ctx,
              view(ctx, x, {x->ne[0], count, x->ne[2], 1}, {x->nb[0], 0, x->nb[2], x->nb[3]}, 0));
}

// MLPEmbedder: out_layer(silu(in_layer(x))).
Tensor* mlp_embedder(const nn::Scope& s, Tensor* x, int64_t in, int64_t hidden, bool bias = true) {
  return nn::mlp_embedder(s["in_layer"], s["out_layer"], x, in, hidden, bias);
}

// The MLP's nonlinearity on its first linear's output: GELU (FLUX.1), or SwiGLU's
// silu(gate) * value with the gate the first half (FLUX.2).
Tensor* mlp_activation(Context& ctx, const FluxConfig& c, Tensor* u) {
  if (!c.gated_mlp) return gelu(ctx, u);
  Tensor* gate = cont(ctx, slice(ctx, u, 0, 0, c.mlp_hidden));
  Tensor* value = cont(ctx, slice(ctx, u, 0, c.mlp_hidden, 2 * c.mlp_hidden));
  return mul(ctx, silu(ctx, gate), value);
}

// One of q, k, v from a fused projection [3 * hidden (+ more), L, N]: [D, H, L, N].
Tensor* qkv_part(Context& ctx, Tensor* qkv, int part, const FluxConfig& c) {
  const int64_t h = c.hidden;
  Tensor* t = cont(ctx, slice(ctx, qkv, 0, part * h, (part + 1) * h));
  return reshape(ctx, t, {c.head_dim(), c.heads, qkv->ne[1], qkv->ne[2]});
}

// QKNorm: RMS norm over each head's channels with a learned scale.
Tensor* qk_norm(const nn::Scope& norm, const char* which, Tensor* x, int64_t d) {
  return rms_norm(norm.ctx(), x, 1e-6f, norm[which].param("scale", {d}));
}

// The image or text stream's half of a double block before attention.
struct StreamQkv {
  Tensor *q, *k, *v;
};
StreamQkv stream_qkv(const nn::Scope& attn, const FluxConfig& c, Tensor* x) {
  Context& ctx = attn.ctx();
  Tensor* qkv = nn::linear(attn["qkv"], x, c.hidden, 3 * c.hidden, c.linear_bias);
  const nn::Scope norm = attn["norm"];
  return {qk_norm(norm, "query_norm", qkv_part(ctx, qkv, 0, c), c.head_dim()),
          qk_norm(norm, "key_norm", qkv_part(ctx, qkv, 1, c), c.head_dim()),
          qkv_part(ctx, qkv, 2, c)};
}

// x + gate1 * proj(attn), then x + gate2 * mlp(modulate(x)), for one stream.
Tensor* stream_after_attention(const nn::Scope& block, const std::string& side, const FluxConfig& c,
                               Tensor* x, Tensor* attn_out, const std::vector<Tensor*>& mod) {
  Context& ctx = block.ctx();
  const bool b = c.linear_bias;
  Tensor* h = nn::linear(block[side + "_attn"]["proj"], attn_out, c.hidden, c.hidden, b);
  x = add(ctx, x, mul(ctx, h, mod[2]));
  h = nn::norm_and_modulate(ctx, x, mod[3], mod[4]);
  h = nn::linear(block[side + "_mlp"]["0"], h, c.hidden, c.mlp_in(), b);
  h = nn::linear(block[side + "_mlp"]["2"], mlp_activation(ctx, c, h), c.mlp_hidden, c.hidden, b);
  return add(ctx, x, mul(ctx, h, mod[5]));
}

// Double-stream block: image and text keep their own weights and attend jointly.
void double_block(const nn::Scope& block, int index, const FluxConfig& c, Tensor*& img,
                  Tensor*& txt, const Modulations& mods, Tensor* cos_t, Tensor* sin_t,
                  Tensor* key_mask) {
  Context& ctx = block.ctx();
  const std::vector<Tensor*> img_mod = mods.double_stream(block, index, true);
  const std::vector<Tensor*> txt_mod = mods.double_stream(block, index, false);
  const StreamQkv iq =
      stream_qkv(block["img_attn"], c, nn::norm_and_modulate(ctx, img, img_mod[0], img_mod[1]));
  const StreamQkv tq =
      stream_qkv(block["txt_attn"], c, nn::norm_and_modulate(ctx, txt, txt_mod[0], txt_mod[1]));
  // Joint sequence: text tokens first, as the positions were made.
  Tensor* q = concat(ctx, tq.q, iq.q, 2);
  Tensor* k = concat(ctx, tq.k, iq.k, 2);
  Tensor* v = concat(ctx, tq.v, iq.v, 2);
  Tensor* attn = nn::rope_attention(ctx, q, k, v, cos_t, sin_t, key_mask,
                                    block.attention_precision(block["img_attn"]["qkv"].param(
                                        "weight", {c.hidden, 3 * c.hidden})));
  const int64_t lt = txt->ne[1], li = img->ne[1];
  Tensor* txt_attn = cont(ctx, slice(ctx, attn, 1, 0, lt));
  Tensor* img_attn = cont(ctx, slice(ctx, attn, 1, lt, lt + li));
  img = stream_after_attention(block, "img", c, img, img_attn, img_mod);
  txt = stream_after_attention(block, "txt", c, txt, txt_attn, txt_mod);
  img = set_name(img, block.prefix() + "img_out");
  txt = set_name(txt, block.prefix() + "txt_out");
}

// Single-stream block: one fused linear gives q, k, v and the MLP input; attention and MLP
// run in parallel and one linear maps both back.
Tensor* single_block(const nn::Scope& block, int index, const FluxConfig& c, Tensor* x,
                     const Modulations& mods, Tensor* cos_t, Tensor* sin_t, Tensor* key_mask) {
  Context& ctx = block.ctx();
  const std::vector<Tensor*> mod = mods.single(block, index);
  Tensor* h = nn::norm_and_modulate(ctx, x, mod[0], mod[1]);
  Tensor* fused =
      nn::linear(block["linear1"], h, c.hidden, 3 * c.hidden + c.mlp_in(), c.linear_bias);
  const nn::Scope norm = block["norm"];
  Tensor* q = qk_norm(norm, "query_norm", qkv_part(ctx, fused, 0, c), c.head_dim());
  Tensor* k = qk_norm(norm, "key_norm", qkv_part(ctx, fused, 1, c), c.head_dim());
  Tensor* v = qkv_part(ctx, fused, 2, c);
  Tensor* attn = nn::rope_attention(ctx, q, k, v, cos_t, sin_t, key_mask,
                                    block.attention_precision(block["linear1"].param(
                                        "weight", {c.hidden, 3 * c.hidden + c.mlp_in()})));
  Tensor* mlp = mlp_activation(
      ctx, c, cont(ctx, slice(ctx, fused, 0, 3 * c.hidden, 3 * c.hidden + c.mlp_in())));
  Tensor* out = nn::linear(block["linear2"], concat(ctx, attn, mlp, 0), c.hidden + c.mlp_hidden,
                           c.hidden, c.linear_bias);
  return set_name(add(ctx, x, mul(ctx, out, mod[2])), block.prefix() + "out");
}

// Chroma's approximator: sinusoids of the timestep, the guidance and each modulation's index
// (all times 1000, as sd.cpp and the released code embed them) side by side, through
// in_proj, residual RMSNorm + MLP layers and out_proj: [hidden, modulation_count, N].
Tensor* approximator(const nn::Scope& s, const FluxConfig& c, Tensor* timesteps, Tensor* guidance) {
  Context& ctx = s.ctx();
  const FluxConfig::Approximator& a = c.approximator;
  const int64_t count = c.modulation_count(), n = timesteps->ne[0];
  const int quarter = static_cast<int>(a.in / 4);
  Tensor* t = timestep_embedding(ctx, scale(ctx, timesteps, 1000.0f), quarter);  // [in/4, N]
  Tensor* g = timestep_embedding(ctx, scale(ctx, guidance, 1000.0f), quarter);
  Tensor* tg = reshape(ctx, concat(ctx, t, g, 0), {2 * quarter, 1, n});
  Tensor* index = timestep_embedding(
      ctx, scale(ctx, arange(ctx, 0.0f, static_cast<float>(count), 1.0f), 1000.0f),
      static_cast<int>(a.in - 2 * quarter));  // [in/2, count]
  index = reshape(ctx, index, {index->ne[0], count, 1});
  Tensor* x = repeat_rows(ctx, tg, count);  // [in/2, count, N]
  for (Tensor* one = index; index->ne[2] < n;) index = concat(ctx, index, one, 2);
  x = concat(ctx, x, index, 0);  // [in, count, N]
  x = nn::linear(s["in_proj"], x, a.in, a.hidden);
  for (int i = 0; i < a.depth; ++i) {
    Tensor* h = rms_norm(ctx, x, 1e-6f, s["norms"][i].param("scale", {a.hidden}));
    x = add(ctx, x, mlp_embedder(s["layers"][i], h, a.hidden, a.hidden));
  }
  return set_name(nn::linear(s["out_proj"], x, a.hidden, c.hidden), s.prefix() + "out");
}

// FLUX.1's vector: embeddings of the timestep, the guidance (dev) and the pooled text, summed
// (FLUX.2 has no pooled text).
Tensor* vector_embedding(const nn::Scope& dit, const FluxConfig& c, Tensor* timesteps,
                         Tensor* guidance, Tensor* y) {
  Context& ctx = dit.ctx();
  const bool b = c.linear_bias;
  Tensor* vec =
      mlp_embedder(dit["time_in"], timestep_embedding(ctx, scale(ctx, timesteps, 1000.0f), 256),
                   256, c.hidden, b);  // [h, N]
  if (c.guidance_embed)
    vec = add(ctx, vec,
              mlp_embedder(dit["guidance_in"],
                           timestep_embedding(ctx, scale(ctx, guidance, 1000.0f), 256), 256,
                           c.hidden, b));
  if (c.vec_dim == 0) return vec;
  return add(ctx, vec, mlp_embedder(dit["vector_in"], y, c.vec_dim, c.hidden, b));
}

}  // namespace

Tensor* flux_forward(const nn::Scope& dit, const FluxConfig& c, Tensor* img, Tensor* txt,
                     Tensor* timesteps, Tensor* guidance, Tensor* y, Tensor* rope_cos,
                     Tensor* rope_sin, Tensor* key_mask) {
  Context& ctx = dit.ctx();
  SD_CHECK(c.heads > 0 && c.hidden % c.heads == 0 && c.head_dim() % 2 == 0,
           "[flux] %lld heads do not split a width of %lld into even head widths",
           static_cast<long long>(c.heads), static_cast<long long>(c.hidden));
  SD_CHECK(c.axes_dim.size() <= 4 && c.text_axis < static_cast<int>(c.axes_dim.size()),
           "[flux] %zu rotary axes (at most 4), text along axis %d", c.axes_dim.size(),
           c.text_axis);
  const int64_t y_dim = y ? y->ne[0] : 0;
  SD_CHECK(img->ne[0] == c.in_channels && txt->ne[0] == c.context_dim && y_dim == c.vec_dim,
           "[flux] inputs have %lld, %lld and %lld channels; the model takes %lld (image), %lld "
           "(text) and %lld (vector)",
           static_cast<long long>(img->ne[0]), static_cast<long long>(txt->ne[0]),
           static_cast<long long>(y_dim), static_cast<long long>(c.in_channels),
           static_cast<long long>(c.context_dim), static_cast<long long>(c.vec_dim));
  SD_CHECK(!(c.guidance_embed || c.is_chroma()) || guidance,
           "[flux] this model needs a guidance input");
  SD_CHECK(!key_mask || (key_mask->ne[0] == txt->ne[1] + img->ne[1] && img->ne[2] == 1),
           "[flux] the attention mask covers %lld tokens; the sequence has %lld",
           static_cast<long long>(key_mask ? key_mask->ne[0] : 0),
           static_cast<long long>(txt->ne[1] + img->ne[1]));

  // 1. Embeddings: image patches, text tokens, and the vector of timestep, guidance and
  // pooled text (sinusoids of t * 1000, as the model was trained); Chroma: every block's
  // modulation from the approximator instead.
  img = nn::linear(dit["img_in"], img, c.in_channels, c.hidden, c.linear_bias);  // [h, Li, N]
  Modulations mods;
  mods.config = &c;
  if (c.is_chroma())
    mods.table = approximator(dit["distilled_guidance_layer"], c, timesteps, guidance);
  else
    mods.vec = vector_embedding(dit, c, timesteps, guidance, y);
  if (c.shared_modulation) {
    mods.shared_img = mods.chunks(dit["double_stream_modulation_img"]["lin"], 0, 6);
    mods.shared_txt = mods.chunks(dit["double_stream_modulation_txt"]["lin"], 0, 6);
    mods.shared_single = mods.chunks(dit["single_stream_modulation"]["lin"], 0, 3);
  }
  txt = nn::linear(dit["txt_in"], txt, c.context_dim, c.hidden, c.linear_bias);  // [h, Lt, N]

  // 2. Double-stream blocks.
  const nn::Scope doubles = dit["double_blocks"];
  for (int i = 0; i < c.depth; ++i)
    double_block(doubles[i], i, c, img, txt, mods, rope_cos, rope_sin, key_mask);

  // 3. Single-stream blocks over the joint sequence.
  const int64_t lt = txt->ne[1], li = img->ne[1];
  Tensor* x = concat(ctx, txt, img, 1);  // [h, Lt + Li, N]
  const nn::Scope singles = dit["single_blocks"];
  for (int i = 0; i < c.depth_single; ++i)
    x = single_block(singles[i], i, c, x, mods, rope_cos, rope_sin, key_mask);
  img = cont(ctx, slice(ctx, x, 1, lt, lt + li));

  // 4. Final layer: adaLN (shift first) and the projection to patches.
  const std::vector<Tensor*> mod = mods.final_layer(dit);
  img = nn::norm_and_modulate(ctx, img, mod[0], mod[1]);
  img = nn::linear(dit["final_layer"]["linear"], img, c.hidden, c.out_channels, c.linear_bias);
  return set_name(img, dit.prefix() + "out");
}

}  // namespace sd::models
