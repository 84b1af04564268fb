#include "nn/dit_blocks.h"

#include <array>
#include <cmath>

#include "nn/layers.h"
#include "tensor/ops/concat.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/norm.h"
#include "tensor/ops/unary.h"
#include "tensor/ops/view.h"

namespace sd::nn {

void rope_row(const float* pos, const std::vector<int>& axes_dim, float theta, float* cos,
              float* sin) {
  int64_t j0 = 0;
  for (size_t axis = 0; axis < axes_dim.size(); ++axis) {
    const int dim = axes_dim[axis];
    for (int j = 0; j < dim / 2; ++j) {
      const float omega = 1.0f / std::pow(theta, (2.0f * j) / static_cast<float>(dim));
      const float angle = pos[axis] * omega;
      cos[j0 + j] = std::cos(angle);
      sin[j0 + j] = std::sin(angle);
    }
    j0 += dim / 2;
  }
}

std::vector<Tensor*> modulation_chunks(const Scope& lin, Tensor* vec, int64_t hidden, int count,
                                       bool bias) {
  Context& ctx = lin.ctx();
  Tensor* m = linear(lin, silu(ctx, vec), hidden, count * hidden, bias);  // [count * h, N]
  std::vector<Tensor*> chunks;
  for (int i = 0; i < count; ++i) {
    Tensor* c = cont(ctx, slice(ctx, m, 0, i * hidden, (i + 1) * hidden));
    chunks.push_back(reshape(ctx, c, {hidden, 1, vec->ne[1]}));
  }
  return chunks;
}

Tensor* modulate(Context& ctx, Tensor* x, Tensor* shift, Tensor* scale_) {
  Tensor* h = mul(ctx, x, scale(ctx, scale_, 1.0f, 1.0f));
  return add(ctx, h, shift);
}

Tensor* norm_and_modulate(Context& ctx, Tensor* x, Tensor* shift, Tensor* scale) {
  return modulate(ctx, layer_norm(ctx, x, 1e-6f), shift, scale);
}

Tensor* mlp_embedder(const Scope& first, const Scope& second, Tensor* x, int64_t in, int64_t hidden,
                     bool bias) {
  Tensor* h = silu(first.ctx(), linear(first, x, in, hidden, bias));
  return linear(second, h, hidden, hidden, bias);
}

Tensor* apply_rope(Context& ctx, Tensor* x, Tensor* cos_t, Tensor* sin_t) {
  const int64_t d = x->ne[0], heads = x->ne[1], tokens = x->ne[2] * x->ne[3];
  Tensor* xr = reshape(ctx, x, {2, d / 2, heads, tokens});
  Tensor* x0 = slice(ctx, xr, 0, 0, 1);
  Tensor* x1 = slice(ctx, xr, 0, 1, 2);
  Tensor* c = reshape(ctx, cos_t, {1, d / 2, 1, tokens});
  Tensor* s = reshape(ctx, sin_t, {1, d / 2, 1, tokens});
  Tensor* o0 = sub(ctx, mul(ctx, x0, c), mul(ctx, x1, s));
  Tensor* o1 = add(ctx, mul(ctx, x0, s), mul(ctx, x1, c));
  return reshape(ctx, concat(ctx, o0, o1, 0), {d, heads, x->ne[2], x->ne[3]});
}

Tensor* apply_rope_halves(Context& ctx, Tensor* x, Tensor* cos_t, Tensor* sin_t) {
  const int64_t d = x->ne[0], len = x->ne[2];
  Tensor* x0 = slice(ctx, x, 0, 0, d / 2);
  Tensor* x1 = slice(ctx, x, 0, d / 2, d);
  Tensor* c = reshape(ctx, cos_t, {d / 2, 1, len});
  Tensor* s = reshape(ctx, sin_t, {d / 2, 1, len});
  Tensor* o0 = sub(ctx, mul(ctx, x0, c), mul(ctx, x1, s));
  Tensor* o1 = add(ctx, mul(ctx, x0, s), mul(ctx, x1, c));
  return concat(ctx, o0, o1, 0);
}

Tensor* rope_attention(Context& ctx, Tensor* q, Tensor* k, Tensor* v, Tensor* cos_t, Tensor* sin_t,
                       Tensor* key_mask, AttentionPrecision precision) {
  const int64_t d = q->ne[0], heads = q->ne[1], len = q->ne[2], n = q->ne[3];
  q = apply_rope(ctx, q, cos_t, sin_t);
  k = apply_rope(ctx, k, cos_t, sin_t);
  Tensor* mask = nullptr;
  if (key_mask)
    mask = view(ctx, key_mask, {len, len, 1, 1}, {key_mask->nb[0], 0, 0, 0}, 0);  // [Lk, Lq]
  const std::array<int, kMaxDims> tokens_then_heads = {0, 2, 1, 3};
  Tensor* out = attention(ctx, permute(ctx, q, tokens_then_heads),
                          permute(ctx, k, tokens_then_heads), permute(ctx, v, tokens_then_heads),
                          mask, 1.0f / std::sqrt(static_cast<float>(d)), precision);
  return reshape(ctx, out, {d * heads, len, n});  // [D, H, L, N] -> [hidden, L, N]
}

}  // namespace sd::nn
