#include "tensor/ops/norm.h"

#include <array>
#include <cmath>
#include <vector>

#include "tensor/error.h"
#include "tensor/ops/access.h"

namespace sd {

namespace {

void check_input(const char* op, const Tensor* x, float eps) {
  SD_CHECK(is_float(x->type), "[%s] '%s' is %s; norms take f32, f16 or bf16", op, x->name.c_str(),
           dtype_name(x->type).data());
  SD_CHECK(std::isfinite(eps) && eps >= 0, "[%s] eps %g must be finite and >= 0", op, eps);
}

// An affine parameter of n values: a vector whose one non-1 dim (if any) has n elements, so
// both [C] and [1, 1, C] (a conv-style bias) are accepted.
void check_affine(const char* op, const char* role, const Tensor* p, int64_t n, const Tensor* x) {
  if (!p) return;
  SD_CHECK(is_float(p->type), "[%s] %s '%s' is %s; it must be f32, f16 or bf16", op, role,
           p->name.c_str(), dtype_name(p->type).data());
  int non_unit = 0;
  for (int i = 0; i < kMaxDims; ++i) non_unit += p->ne[i] != 1;
  SD_CHECK(p->nelements() == n && non_unit <= 1,
           "[%s] %s '%s' %s must be a vector of %lld values for '%s' %s", op, role, p->name.c_str(),
           p->shape_string().c_str(), static_cast<long long>(n), x->name.c_str(),
           x->shape_string().c_str());
}

// Element i of a vector-shaped tensor, whichever dim holds it.
float load_vector(const Tensor* p, int64_t i) {
  for (int d = 0; d < kMaxDims; ++d) {
    if (p->ne[d] != 1) {
      int64_t idx[kMaxDims] = {0, 0, 0, 0};
      idx[d] = i;
      return load_f32(p, idx[0], idx[1], idx[2], idx[3]);
    }
  }
  return load_f32(p, 0);
}

// Normalizes x over dim `dim` (each line of values along it) with mean (when centered) and
// variance in double, then the affine parameters and `silu`.
void normalize_lines(Tensor* dst, int dim, bool centered, bool silu) {
  const Tensor* x = dst->src[0];
  const Tensor* weight = dst->src[1];
  const Tensor* bias = centered ? dst->src[2] : nullptr;
  const double eps = dst->param_f32(0);
  const int64_t n = x->ne[dim];
  int64_t lines = 1;
  for (int d = 0; d < kMaxDims; ++d) lines *= d == dim ? 1 : x->ne[d];
  std::vector<double> line(static_cast<size_t>(n));
  for (int64_t l = 0; l < lines; ++l) {
    std::array<int64_t, kMaxDims> at{};  // element i of the line: `at` with at[dim] = i
    for (int64_t d = 0, rest = l; d < kMaxDims; ++d) {
      if (d == dim) continue;
      at[d] = rest % x->ne[d];
      rest /= x->ne[d];
    }
    double mean = 0;
    for (int64_t i = 0; i < n; ++i) {
      at[dim] = i;
      mean += line[i] = load_f32(x, at[0], at[1], at[2], at[3]);
    }
    mean = centered ? mean / n : 0.0;
    double var = 0;  // two passes: the one-pass E[x^2] - E[x]^2 cancels badly
    for (int64_t i = 0; i < n; ++i) var += (line[i] - mean) * (line[i] - mean);
    const double inv = 1.0 / std::sqrt(var / n + eps);
    for (int64_t i = 0; i < n; ++i) {
      double y = (line[i] - mean) * inv;
      if (weight) y *= load_vector(weight, i);
      if (bias) y += load_vector(bias, i);
      if (silu) y /= 1.0 + std::exp(-y);
      at[dim] = i;
      store_f32(dst, static_cast<float>(y), at[0], at[1], at[2], at[3]);
    }
  }
}

}  // namespace

Tensor* group_norm(Context& ctx, Tensor* x, int groups, float eps, Tensor* weight, Tensor* bias,
                   NormActivation activation) {
  check_input("group_norm", x, eps);
  SD_CHECK(activation == NormActivation::None || activation == NormActivation::Silu,
           "[group_norm] unknown activation %d (0 none, 1 silu)", static_cast<int>(activation));
  const int64_t channels = x->ne[2];
  SD_CHECK(groups >= 1 && channels % groups == 0,
           "[group_norm] %lld channels of '%s' %s do not split into %d groups",
           static_cast<long long>(channels), x->name.c_str(), x->shape_string().c_str(), groups);
  check_affine("group_norm", "weight", weight, channels, x);
  check_affine("group_norm", "bias", bias, channels, x);
  Tensor* t = ctx.new_op(Op::GroupNorm, DType::F32, x->ne, {x, weight, bias});
  t->params[0] = groups;
  t->set_param_f32(1, eps);
  t->params[2] = static_cast<int32_t>(activation);
  return t;
}

Tensor* layer_norm(Context& ctx, Tensor* x, float eps, Tensor* weight, Tensor* bias) {
  check_input("layer_norm", x, eps);
  check_affine("layer_norm", "weight", weight, x->ne[0], x);
  check_affine("layer_norm", "bias", bias, x->ne[0], x);
  Tensor* t = ctx.new_op(Op::LayerNorm, DType::F32, x->ne, {x, weight, bias});
  t->set_param_f32(0, eps);
  return t;
}

namespace {

Tensor* rms_norm_along(Context& ctx, Tensor* x, float eps, Tensor* weight, int dim,
                       NormActivation activation) {
  check_input("rms_norm", x, eps);
  SD_CHECK(dim == 0 || dim == 2, "[rms_norm] normalizes over dim 0 or 2, not %d", dim);
  SD_CHECK(activation == NormActivation::None || activation == NormActivation::Silu,
           "[rms_norm] unknown activation %d (0 none, 1 silu)", static_cast<int>(activation));
  check_affine("rms_norm", "weight", weight, x->ne[dim], x);
  Tensor* t = ctx.new_op(Op::RmsNorm, DType::F32, x->ne, {x, weight});
  t->set_param_f32(0, eps);
  t->params[1] = dim;
  t->params[2] = static_cast<int32_t>(activation);
  return t;
}

}  // namespace

Tensor* rms_norm(Context& ctx, Tensor* x, float eps, Tensor* weight, NormActivation activation) {
  return rms_norm_along(ctx, x, eps, weight, 0, activation);
}

Tensor* rms_norm_channels(Context& ctx, Tensor* x, float eps, Tensor* weight,
                          NormActivation activation) {
  return rms_norm_along(ctx, x, eps, weight, 2, activation);
}

void reference_group_norm(Tensor* dst) {
  const Tensor* x = dst->src[0];
  const Tensor* weight = dst->src[1];
  const Tensor* bias = dst->src[2];
  const int groups = dst->params[0];
  const double eps = dst->param_f32(1);
  const bool silu = static_cast<NormActivation>(dst->params[2]) == NormActivation::Silu;
  const int64_t w = x->ne[0], h = x->ne[1], per_group = x->ne[2] / groups;
  const double count = static_cast<double>(w * h * per_group);
  for (int64_t n = 0; n < x->ne[3]; ++n)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t c0 = g * per_group, c1 = c0 + per_group;
      auto each = [&](auto&& f) {
        for (int64_t c = c0; c < c1; ++c)
          for (int64_t y = 0; y < h; ++y)
            for (int64_t i = 0; i < w; ++i) f(i, y, c);
      };
      double mean = 0, var = 0;
      each([&](int64_t i, int64_t y, int64_t c) { mean += load_f32(x, i, y, c, n); });
      mean /= count;
      each([&](int64_t i, int64_t y, int64_t c) {
        const double d = load_f32(x, i, y, c, n) - mean;
        var += d * d;
      });
      const double inv = 1.0 / std::sqrt(var / count + eps);  // biased variance, as PyTorch
      each([&](int64_t i, int64_t y, int64_t c) {
        double v = (load_f32(x, i, y, c, n) - mean) * inv;
        if (weight) v *= load_vector(weight, c);
        if (bias) v += load_vector(bias, c);
        if (silu) v /= 1.0 + std::exp(-v);
        store_f32(dst, static_cast<float>(v), i, y, c, n);
      });
    }
}

void reference_layer_norm(Tensor* dst) {
  normalize_lines(dst, 0, true, false);
}
void reference_rms_norm(Tensor* dst) {
  normalize_lines(dst, dst->params[1], false,
                  static_cast<NormActivation>(dst->params[2]) == NormActivation::Silu);
}

}  // namespace sd
