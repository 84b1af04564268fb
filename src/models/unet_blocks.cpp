#include "models/unet_blocks.h"

#include "nn/layers.h"
#include "tensor/error.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/generate.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/unary.h"
#include "tensor/ops/upscale.h"
#include "tensor/ops/view.h"

namespace sd::models {

namespace {

// Names a block's output in the graph after the block's checkpoint prefix, so debug
// dumps and profiles point at the layer.
Tensor* name_output(const nn::Scope& s, Tensor* t) {
  return set_name(t, s.prefix() + "out");
}

// proj_in / proj_out on tokens [in, L, N] -> [out, L, N]. A 1x1 conv over an image is a
// Linear layer over its channels, so SD1.x's conv weight [1, 1, in, out] is used as the
// Linear weight [in, out] it already is in memory: the tokens then never go back to an
// image between the projections.
Tensor* project(const nn::Scope& s, Tensor* tokens, int64_t in, int64_t out, bool linear) {
  if (linear) return nn::linear(s, tokens, in, out);
  Context& ctx = s.ctx();
  Tensor* w = reshape(ctx, s.param("weight", {1, 1, in, out}), {in, out});
  return add(ctx, matmul(ctx, w, tokens), s.param("bias", {out}));
}

}  // namespace

Tensor* TimestepEmbedding::forward(const nn::Scope& s, Tensor* timesteps) const {
  Context& ctx = s.ctx();
  Tensor* t = timestep_embedding(ctx, timesteps, static_cast<int>(model_channels));  // [mc, N]
  Tensor* h = nn::linear(s["0"], t, model_channels, time_embed_dim);
  h = silu(ctx, h);
  return name_output(s, nn::linear(s["2"], h, time_embed_dim, time_embed_dim));  // [ted, N]
}

Tensor* ResBlock::forward(const nn::Scope& s, Tensor* x, Tensor* emb) const {
  Context& ctx = s.ctx();
  Tensor* h = nn::group_norm_silu(s["in_layers.0"], x, in_channels, kNormGroups, kGroupNormEps);
  h = nn::conv2d(s["in_layers.2"], h, in_channels, out_channels, 3, 1, 1);  // [W, H, out, N]

  // The timestep embedding shifts every channel of the feature map.
  Tensor* e = nn::linear(s["emb_layers.1"], silu(ctx, emb), emb_channels, out_channels);
  h = add(ctx, h, reshape(ctx, e, {1, 1, out_channels, e->ne[1]}));

  h = nn::group_norm_silu(s["out_layers.0"], h, out_channels, kNormGroups, kGroupNormEps);
  // out_layers.2 is dropout: nothing at inference.
  h = nn::conv2d(s["out_layers.3"], h, out_channels, out_channels, 3, 1, 1);

  Tensor* skip = in_channels == out_channels
                     ? x
                     : nn::conv2d(s["skip_connection"], x, in_channels, out_channels, 1);
  return name_output(s, add(ctx, h, skip));
}

Tensor* Downsample::forward(const nn::Scope& s, Tensor* x) const {
  return name_output(s, nn::conv2d(s["op"], x, channels, channels, 3, 2, 1));
}

Tensor* Upsample::forward(const nn::Scope& s, Tensor* x) const {
  Tensor* up = upscale_nearest(s.ctx(), x, 2);
  return name_output(s, nn::conv2d(s["conv"], up, channels, channels, 3, 1, 1));
}

Tensor* CrossAttention::forward(const nn::Scope& s, Tensor* x, Tensor* context) const {
  const int64_t inner = heads * head_dim;
  Tensor* wq = s["to_q"].param("weight", {query_dim, inner});
  Tensor* q = matmul(s.ctx(), wq, x);                                     // [inner, L, N]
  Tensor* k = nn::linear(s["to_k"], context, context_dim, inner, false);  // [inner, Lc, N]
  Tensor* v = nn::linear(s["to_v"], context, context_dim, inner, false);
  Tensor* o = nn::multi_head_attention(s.ctx(), q, k, v, heads, nullptr,
                                       s.attention_precision(wq));  // [inner, L, N]
  // to_out.1 is dropout.
  return nn::linear(s["to_out.0"], o, inner, query_dim);
}

Tensor* FeedForward::forward(const nn::Scope& s, Tensor* x) const {
  Context& ctx = s.ctx();
  const int64_t inner = dim * mult;
  Tensor* p = nn::linear(s["net.0.proj"], x, dim, 2 * inner);  // [2 inner, L, N]
  // GEGLU: value and gate are the two halves of each token's projection (strided views).
  Tensor* value = slice(ctx, p, 0, 0, inner);
  Tensor* gate = slice(ctx, p, 0, inner, 2 * inner);
  Tensor* h = mul(ctx, value, gelu(ctx, gate));  // [inner, L, N]
  // net.1 is dropout.
  return nn::linear(s["net.2"], h, inner, dim);
}

Tensor* BasicTransformerBlock::forward(const nn::Scope& s, Tensor* x, Tensor* context) const {
  Context& ctx = s.ctx();
  const CrossAttention self_attention{dim, dim, heads, head_dim};
  const CrossAttention cross_attention{dim, context_dim, heads, head_dim};
  const FeedForward feed_forward{dim};

  Tensor* h = nn::layer_norm(s["norm1"], x, dim);
  x = add(ctx, self_attention.forward(s["attn1"], h, h), x);
  h = nn::layer_norm(s["norm2"], x, dim);
  x = add(ctx, cross_attention.forward(s["attn2"], h, context), x);
  h = nn::layer_norm(s["norm3"], x, dim);
  x = add(ctx, feed_forward.forward(s["ff"], h), x);
  return name_output(s, x);
}

Tensor* SpatialTransformer::forward(const nn::Scope& s, Tensor* x, Tensor* context) const {
  Context& ctx = s.ctx();
  const int64_t w = x->ne[0], h = x->ne[1], n = x->ne[3], inner = heads * head_dim;
  SD_CHECK(x->ne[2] == channels, "[unet] %s: input has %lld channels, the block expects %lld",
           s.prefix().c_str(), static_cast<long long>(x->ne[2]), static_cast<long long>(channels));

  Tensor* t = nn::group_norm(s["norm"], x, channels, kNormGroups, kGroupNormEps);
  // [W, H, C, N] -> tokens [C, W H, N] as a transposed view: proj_in's matmul reads it in
  // place, so no copy of the image is made.
  t = transpose(ctx, reshape(ctx, t, {w * h, channels, n}));
  t = project(s["proj_in"], t, channels, inner, linear_proj);  // [inner, W H, N]

  const BasicTransformerBlock block{inner, heads, head_dim, context_dim};
  for (int d = 0; d < depth; ++d) t = block.forward(s["transformer_blocks"][d], t, context);

  t = project(s["proj_out"], t, inner, channels, linear_proj);  // [C, W H, N]
  // Back to an image: one transposing copy, then the residual.
  t = cont(ctx, permute(ctx, reshape(ctx, t, {channels, w, h, n}), {1, 2, 0, 3}));  // [W, H, C, N]
  return name_output(s, add(ctx, t, x));
}

}  // namespace sd::models
