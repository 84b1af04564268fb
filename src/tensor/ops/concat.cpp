#include "tensor/ops/concat.h"

#include <cstring>

#include "tensor/error.h"
#include "tensor/ops/access.h"

namespace sd {

Tensor* concat(Context& ctx, Tensor* a, Tensor* b, int dim) {
  SD_CHECK(dim >= 0 && dim < kMaxDims, "[concat] dim %d is outside 0..3", dim);
  SD_CHECK(a->type == b->type, "[concat] '%s' is %s but '%s' is %s; cast one first",
           a->name.c_str(), dtype_name(a->type).data(), b->name.c_str(),
           dtype_name(b->type).data());
  SD_CHECK(is_float(a->type) || a->type == DType::I32,
           "[concat] '%s' is %s; concat takes f32, f16, bf16 or i32 (dequantize first)",
           a->name.c_str(), dtype_name(a->type).data());
  for (int i = 0; i < kMaxDims; ++i) {
    SD_CHECK(i == dim || a->ne[i] == b->ne[i],
             "[concat] along dim %d, '%s' %s and '%s' %s must agree in every other dim", dim,
             a->name.c_str(), a->shape_string().c_str(), b->name.c_str(),
             b->shape_string().c_str());
  }
  Shape ne = a->ne;
  ne[dim] += b->ne[dim];
  Tensor* t = ctx.new_op(Op::Concat, a->type, ne, {a, b});
  t->params[0] = dim;
  return t;
}

void reference_concat(Tensor* dst) {
  const Tensor* a = dst->src[0];
  const Tensor* b = dst->src[1];
  const int dim = dst->params[0];
  const size_t es = type_size(dst->type);
  for_each_index(dst, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    int64_t i[kMaxDims] = {i0, i1, i2, i3};
    const Tensor* from = a;
    if (i[dim] >= a->ne[dim]) {
      from = b;
      i[dim] -= a->ne[dim];
    }
    // A byte copy keeps the dtype exact (i32 ids, f16 bits).
    std::memcpy(element_ptr(dst, i0, i1, i2, i3), element_ptr(from, i[0], i[1], i[2], i[3]), es);
  });
}

}  // namespace sd
