#include "nn/layers.h"

#include <cmath>

#include "tensor/error.h"
#include "tensor/ops/attention.h"
#include "tensor/ops/conv2d.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/norm.h"
#include "tensor/ops/view.h"

namespace sd::nn {

Tensor* linear(const Scope& s, Tensor* x, int64_t in, int64_t out, bool bias) {
  Tensor* y = matmul(s.ctx(), s.param("weight", {in, out}), x);
  return bias ? add(s.ctx(), y, s.param("bias", {out})) : y;
}

Tensor* conv2d(const Scope& s, Tensor* x, int64_t in, int64_t out, int kernel, int stride,
               int padding, bool bias) {
  Tensor* w = s.conv_kernel("weight", {kernel, kernel, in, out}, stride);
  Tensor* b = bias ? s.param("bias", {out}) : nullptr;
  return sd::conv2d(s.ctx(), x, w, b, stride, stride, padding, padding, 1, 1, 1,
                    nn::conv_kernel_layout(w, kernel));
}

Tensor* group_norm(const Scope& s, Tensor* x, int64_t channels, int groups, float eps) {
  return sd::group_norm(s.ctx(), x, groups, eps, s.param("weight", {channels}),
                        s.param("bias", {channels}));
}

Tensor* group_norm_silu(const Scope& s, Tensor* x, int64_t channels, int groups, float eps) {
  return sd::group_norm(s.ctx(), x, groups, eps, s.param("weight", {channels}),
                        s.param("bias", {channels}), NormActivation::Silu);
}

Tensor* rms_norm(const Scope& s, Tensor* x, int64_t channels, float eps) {
  return sd::rms_norm(s.ctx(), x, eps, s.param("weight", {channels}));
}

Tensor* layer_norm(const Scope& s, Tensor* x, int64_t channels, float eps) {
  return sd::layer_norm(s.ctx(), x, eps, s.param("weight", {channels}),
                        s.param("bias", {channels}));
}

Tensor* multi_head_attention(Context& ctx, Tensor* q, Tensor* k, Tensor* v, int64_t heads,
                             Tensor* mask, AttentionPrecision precision) {
  const int64_t c = q->ne[0], cv = v->ne[0], lq = q->ne[1], lk = k->ne[1], n = q->ne[2];
  SD_CHECK(c % heads == 0 && cv % heads == 0,
           "[attention] %lld/%lld channels do not split into %lld heads", static_cast<long long>(c),
           static_cast<long long>(cv), static_cast<long long>(heads));
  const int64_t d = c / heads, dv = cv / heads;
  // [C, L, N] -> [D, H, L, N] -> [D, L, H, N] (a strided view, no copy).
  auto split = [&](Tensor* t, int64_t dim, int64_t len) {
    return permute(ctx, reshape(ctx, t, {dim, heads, len, n}), {0, 2, 1, 3});
  };
  Tensor* o = attention(ctx, split(q, d, lq), split(k, d, lk), split(v, dv, lk), mask,
                        1.0f / std::sqrt(static_cast<float>(d)), precision);
  return reshape(ctx, o, {cv, lq, n});  // [Dv, H, Lq, N] is already [Cv, Lq, N] in memory
}

}  // namespace sd::nn
