#include "models/qwen_image.h"

#include <algorithm>
#include <cmath>

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

QwenImageConfig qwen_image_config_from_shapes(QwenImageConfig c, std::string_view scope,
                                              const QwenImageShapeOf& shape_of) {
  const std::string root(scope);
  auto need = [&](const std::string& name) {
    const std::optional<std::array<int64_t, 4>> ne = shape_of(root + name);
    SD_CHECK(ne.has_value(), "[qwen-image] the transformer has no tensor '%s%s'", root.c_str(),
             name.c_str());
    return *ne;
  };
  const std::array<int64_t, 4> img_in = need("img_in.weight");  // [in, hidden]
  c.in_channels = img_in[0];
  c.hidden = img_in[1];
  c.out_channels = need("proj_out.weight")[1];
  c.text_dim = need("txt_in.weight")[0];
  c.head_dim = need("transformer_blocks.0.attn.norm_q.weight")[0];
  SD_CHECK(c.head_dim > 0 && c.hidden % c.head_dim == 0,
           "[qwen-image] heads of %lld channels do not divide the width %lld",
           static_cast<long long>(c.head_dim), static_cast<long long>(c.hidden));
  c.heads = c.hidden / c.head_dim;
  int axes = 0;
  for (int d : c.axes_dim) axes += d;
  SD_CHECK(
      axes == c.head_dim,
      "[qwen-image] heads of %lld channels, but the rotary axes cover %d (fixed by the design)",
      static_cast<long long>(c.head_dim), axes);
  c.mlp_hidden = need("transformer_blocks.0.img_mlp.net.0.proj.weight")[1];
  const int64_t patch_area = int64_t{c.patch_size} * c.patch_size;
  SD_CHECK(c.in_channels % patch_area == 0 && c.in_channels == c.out_channels,
           "[qwen-image] %lld input and %lld output channels are not one latent in %dx%d patches",
           static_cast<long long>(c.in_channels), static_cast<long long>(c.out_channels),
           c.patch_size, c.patch_size);
  c.layers = 0;
  while (shape_of(root + "transformer_blocks." + std::to_string(c.layers) + ".img_mod.1.weight"))
    ++c.layers;
  return c;
}

QwenImageRope qwen_image_rope(const QwenImageConfig& c, int64_t text_tokens, int64_t patches_h,
                              int64_t patches_w, const std::vector<FluxPosition>& refs) {
  const int64_t half = c.head_dim / 2;
  const int64_t image_end = text_tokens + patches_h * patches_w;
  const int64_t tokens = image_end + static_cast<int64_t>(refs.size());
  const int64_t start = std::max(patches_h, patches_w) / 2;
  QwenImageRope r;
  r.cos.resize(static_cast<size_t>(half * tokens));
  r.sin.resize(r.cos.size());
  for (int64_t t = 0; t < tokens; ++t) {
    float pos[3];
    if (t < text_tokens) {
      pos[0] = pos[1] = pos[2] = static_cast<float>(start + t);
    } else if (t >= image_end) {
      const FluxPosition& ref = refs[static_cast<size_t>(t - image_end)];
      pos[0] = ref.index;
      pos[1] = ref.row;
      pos[2] = ref.col;
    } else {
      const int64_t patch = t - text_tokens;
      pos[0] = 0.0f;
      pos[1] = static_cast<float>(patch / patches_w - patches_h / 2);
      pos[2] = static_cast<float>(patch % patches_w - patches_w / 2);
    }
    nn::rope_row(pos, c.axes_dim, c.theta, r.cos.data() + t * half, r.sin.data() + t * half);
  }
  return r;
}

namespace {

// A projection of one stream to q, k or v heads [head_dim, heads, L], q and k RMS-normed.
Tensor* heads(const nn::Scope& proj, const nn::Scope* norm, const QwenImageConfig& c, Tensor* x) {
  Context& ctx = proj.ctx();
  Tensor* t = nn::linear(proj, x, c.hidden, c.hidden);
  t = reshape(ctx, t, {c.head_dim, c.heads, x->ne[1]});
  if (norm) t = rms_norm(ctx, t, 1e-6f, norm->param("weight", {c.head_dim}));
  return t;
}

// x + gate * y, the gate [hidden, 1] over every token.
Tensor* gated(Context& ctx, Tensor* x, Tensor* y, Tensor* gate) {
  return add(ctx, x, mul(ctx, y, gate));
}

// The image stream's modulation: the step's for the generated image's first `generated`
// tokens; the reference tokens after them get timestep 0's where zero_cond_t asks (else
// the step's too, and `ref` is empty).
struct ImageModulation {
  std::vector<Tensor*> gen, ref;
  int64_t generated = 0;

  // f(x, chunks) over the tokens, each part with its own chunks.
  template <typename F>
  Tensor* per_part(Context& ctx, Tensor* x, F f) const {
    if (ref.empty() || x->ne[1] == generated) return f(x, gen);
    Tensor* a = cont(ctx, slice(ctx, x, 1, 0, generated));
    Tensor* b = cont(ctx, slice(ctx, x, 1, generated, x->ne[1]));
    return concat(ctx, f(a, gen), f(b, ref), 1);
  }
  Tensor* modulated(Context& ctx, Tensor* x, int shift, int scale) const {
    return per_part(ctx, x, [&](Tensor* part, const std::vector<Tensor*>& m) {
      return nn::norm_and_modulate(ctx, part, m[static_cast<size_t>(shift)],
                                   m[static_cast<size_t>(scale)]);
    });
  }
  Tensor* gated(Context& ctx, Tensor* x, Tensor* y, int gate) const {
    return add(ctx, x, per_part(ctx, y, [&](Tensor* part, const std::vector<Tensor*>& m) {
                 return mul(ctx, part, m[static_cast<size_t>(gate)]);
               }));
  }
};

Tensor* feed_forward(const nn::Scope& mlp, const QwenImageConfig& c, Tensor* x) {
  Context& ctx = mlp.ctx();
  Tensor* h = nn::linear(mlp["net"]["0"]["proj"], x, c.hidden, c.mlp_hidden);
  return nn::linear(mlp["net"]["2"], gelu(ctx, h), c.mlp_hidden, c.hidden);
}

// One double-stream block; the last one's text stream is not updated (nothing reads it).
void block(const nn::Scope& b, const QwenImageConfig& c, Tensor*& img, int64_t generated,
           Tensor*& txt, Tensor* t_emb, Tensor* t_emb0, Tensor* cos_t, Tensor* sin_t, bool last) {
  Context& ctx = b.ctx();
  ImageModulation im;
  im.gen = nn::modulation_chunks(b["img_mod"]["1"], t_emb, c.hidden, 6);
  if (t_emb0) im.ref = nn::modulation_chunks(b["img_mod"]["1"], t_emb0, c.hidden, 6);
  im.generated = generated;
  const std::vector<Tensor*> tm = nn::modulation_chunks(b["txt_mod"]["1"], t_emb, c.hidden, 6);
  const nn::Scope attn = b["attn"];
  Tensor* a_img = im.modulated(ctx, img, 0, 1);
  Tensor* a_txt = nn::norm_and_modulate(ctx, txt, tm[0], tm[1]);
  const nn::Scope nq = attn["norm_q"], nk = attn["norm_k"];
  const nn::Scope naq = attn["norm_added_q"], nak = attn["norm_added_k"];
  // Joint sequence: text first, as the rotary tables are laid out.
  Tensor* q =
      concat(ctx, heads(attn["add_q_proj"], &naq, c, a_txt), heads(attn["to_q"], &nq, c, a_img), 2);
  Tensor* k =
      concat(ctx, heads(attn["add_k_proj"], &nak, c, a_txt), heads(attn["to_k"], &nk, c, a_img), 2);
  Tensor* v = concat(ctx, heads(attn["add_v_proj"], nullptr, c, a_txt),
                     heads(attn["to_v"], nullptr, c, a_img), 2);
  Tensor* o = nn::rope_attention(
      ctx, reshape(ctx, q, {c.head_dim, c.heads, q->ne[2], 1}),
      reshape(ctx, k, {c.head_dim, c.heads, k->ne[2], 1}),
      reshape(ctx, v, {c.head_dim, c.heads, v->ne[2], 1}), cos_t, sin_t, nullptr,
      attn.attention_precision(attn["to_q"].param("weight", {c.hidden, c.hidden})));
  const int64_t lt = txt->ne[1], li = img->ne[1];
  o = reshape(ctx, o, {c.hidden, lt + li});
  Tensor* img_attn = cont(ctx, slice(ctx, o, 1, lt, lt + li));
  img = im.gated(ctx, img, nn::linear(attn["to_out"]["0"], img_attn, c.hidden, c.hidden), 2);
  img = im.gated(ctx, img, feed_forward(b["img_mlp"], c, im.modulated(ctx, img, 3, 4)), 5);
  img = set_name(img, b.prefix() + "img_out");
  if (last) return;
  Tensor* txt_attn = cont(ctx, slice(ctx, o, 1, 0, lt));
  txt = gated(ctx, txt, nn::linear(attn["to_add_out"], txt_attn, c.hidden, c.hidden), tm[2]);
  txt = gated(ctx, txt,
              feed_forward(b["txt_mlp"], c, nn::norm_and_modulate(ctx, txt, tm[3], tm[4])), tm[5]);
  txt = set_name(txt, b.prefix() + "txt_out");
}

}  // namespace

Tensor* qwen_image_forward(const nn::Scope& dit, const QwenImageConfig& c, Tensor* img,
                           int64_t generated, Tensor* txt, Tensor* timestep, Tensor* rope_cos,
                           Tensor* rope_sin) {
  Context& ctx = dit.ctx();
  SD_CHECK(img->ne[0] == c.in_channels && txt->ne[0] == c.text_dim,
           "[qwen-image] image tokens of %lld and text tokens of %lld values; the transformer "
           "reads %lld and %lld",
           static_cast<long long>(img->ne[0]), static_cast<long long>(txt->ne[0]),
           static_cast<long long>(c.in_channels), static_cast<long long>(c.text_dim));
  SD_CHECK(c.layers > 0, "[qwen-image] the transformer has no blocks");
  SD_CHECK(generated > 0 && generated <= img->ne[1],
           "[qwen-image] %lld generated tokens of %lld image tokens",
           static_cast<long long>(generated), static_cast<long long>(img->ne[1]));
  SD_CHECK(rope_cos->ne[0] == c.head_dim / 2 && rope_cos->ne[1] == img->ne[1] + txt->ne[1],
           "[qwen-image] rotary tables of %s for %lld tokens", rope_cos->shape_string().c_str(),
           static_cast<long long>(img->ne[1] + txt->ne[1]));

  // 1. The timestep's sinusoids (of 1000 sigma) through an MLP; the patches and the normed
  //    text projected to the width.
  const nn::Scope te = dit["time_text_embed"]["timestep_embedder"];
  auto embed_time = [&](Tensor* t) {
    Tensor* e = nn::linear(te["linear_1"], timestep_embedding(ctx, t, 256), 256, c.hidden);
    return nn::linear(te["linear_2"], silu(ctx, e), c.hidden, c.hidden);
  };
  Tensor* t_emb = embed_time(timestep);
  const bool references = generated < img->ne[1];
  Tensor* t_emb0 = c.zero_cond_t && references ? embed_time(scale(ctx, timestep, 0.0f)) : nullptr;
  Tensor* x = nn::linear(dit["img_in"], img, c.in_channels, c.hidden);
  Tensor* context = rms_norm(ctx, txt, 1e-6f, dit["txt_norm"].param("weight", {c.text_dim}));
  context = nn::linear(dit["txt_in"], context, c.text_dim, c.hidden);

  // 2. The double-stream blocks.
  for (int i = 0; i < c.layers; ++i)
    block(dit["transformer_blocks"][i], c, x, generated, context, t_emb, t_emb0, rope_cos, rope_sin,
          i + 1 == c.layers);
  if (references) x = cont(ctx, slice(ctx, x, 1, 0, generated));  // the generated image's

  // 3. The head: AdaLayerNormContinuous (scale first, then shift) and the projection.
  Tensor* e = nn::linear(dit["norm_out"]["linear"], silu(ctx, t_emb), c.hidden, 2 * c.hidden);
  Tensor* scale_ = cont(ctx, slice(ctx, e, 0, 0, c.hidden));
  Tensor* shift = cont(ctx, slice(ctx, e, 0, c.hidden, 2 * c.hidden));
  x = nn::norm_and_modulate(ctx, x, shift, scale_);
  x = nn::linear(dit["proj_out"], x, c.hidden, c.out_channels);
  return set_name(x, dit.prefix() + "out");
}

}  // namespace sd::models
