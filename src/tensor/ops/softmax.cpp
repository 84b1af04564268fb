#include "tensor/ops/softmax.h"

#include <cmath>
#include <limits>
#include <vector>

#include "tensor/error.h"
#include "tensor/ops/access.h"

namespace sd {

Tensor* softmax(Context& ctx, Tensor* a, Tensor* mask, float scale) {
  SD_CHECK(is_float(a->type), "[softmax] '%s' is %s; softmax takes f32, f16 or bf16",
           a->name.c_str(), dtype_name(a->type).data());
  SD_CHECK(std::isfinite(scale), "[softmax] scale %g is not finite", scale);
  if (mask) {
    SD_CHECK(mask->type == DType::F32 || mask->type == DType::F16,
             "[softmax] mask '%s' is %s; masks are f32 or f16", mask->name.c_str(),
             dtype_name(mask->type).data());
    SD_CHECK(can_broadcast(*a, *mask), "[softmax] mask '%s' %s does not broadcast to '%s' %s",
             mask->name.c_str(), mask->shape_string().c_str(), a->name.c_str(),
             a->shape_string().c_str());
  }
  Tensor* t = ctx.new_op(Op::Softmax, DType::F32, a->ne, {a, mask});
  t->set_param_f32(0, scale);
  return t;
}

void reference_softmax(Tensor* dst) {
  const Tensor* a = dst->src[0];
  const Tensor* mask = dst->src[1];
  const float scale = dst->param_f32(0);
  const int64_t n = a->ne[0];
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i3 = 0; i3 < a->ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < a->ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < a->ne[1]; ++i1) {
        constexpr double kNegInf = -std::numeric_limits<double>::infinity();
        double max = kNegInf;
        bool fully_masked = true;
        for (int64_t i0 = 0; i0 < n; ++i0) {
          // Scale, then add the mask in f32 as the fast kernels do; -inf stays -inf.
          float x = load_f32(a, i0, i1, i2, i3) * scale;
          if (mask) {
            x += load_f32(mask, bcast(mask, 0, i0), bcast(mask, 1, i1), bcast(mask, 2, i2),
                          bcast(mask, 3, i3));
          }
          v[i0] = x;
          if (x > max) max = x;
          if (x != kNegInf) fully_masked = false;  // NaN counts as unmasked: it propagates
        }
        // Fully masked row: zeros (documented in softmax.h), not exp(-inf - -inf) = NaN.
        if (fully_masked) {
          for (int64_t i0 = 0; i0 < n; ++i0) store_f32(dst, 0.0f, i0, i1, i2, i3);
          continue;
        }
        double total = 0;
        for (int64_t i0 = 0; i0 < n; ++i0) total += v[i0] = std::exp(v[i0] - max);
        for (int64_t i0 = 0; i0 < n; ++i0) {
          store_f32(dst, static_cast<float>(v[i0] / total), i0, i1, i2, i3);
        }
      }
}

}  // namespace sd
