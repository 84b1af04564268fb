#include "tensor/ops/reduce.h"

#include "tensor/error.h"
#include "tensor/ops/access.h"

namespace sd {

namespace {

Tensor* reduce(Context& ctx, Op op, Tensor* a, int dim) {
  const char* name = op_name(op).data();
  SD_CHECK(dim >= 0 && dim < kMaxDims, "[%s] dim %d is outside 0..3", name, dim);
  SD_CHECK(is_float(a->type), "[%s] '%s' is %s; reductions take f32, f16 or bf16", name,
           a->name.c_str(), dtype_name(a->type).data());
  SD_CHECK(op == Op::Sum || a->ne[dim] > 0, "[mean] dim %d of '%s' %s is empty", dim,
           a->name.c_str(), a->shape_string().c_str());
  Shape ne = a->ne;
  ne[dim] = 1;
  Tensor* t = ctx.new_op(op, DType::F32, ne, {a});
  t->params[0] = dim;
  return t;
}

}  // namespace

Tensor* sum(Context& ctx, Tensor* a, int dim) {
  return reduce(ctx, Op::Sum, a, dim);
}
Tensor* mean(Context& ctx, Tensor* a, int dim) {
  return reduce(ctx, Op::Mean, a, dim);
}

void reference_reduce(Tensor* dst) {
  const Tensor* a = dst->src[0];
  const int dim = dst->params[0];
  for_each_index(dst, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    int64_t i[kMaxDims] = {i0, i1, i2, i3};
    double acc = 0;  // double: an f32 running sum loses digits over long rows
    for (int64_t k = 0; k < a->ne[dim]; ++k) {
      i[dim] = k;
      acc += load_f32(a, i[0], i[1], i[2], i[3]);
    }
    if (dst->op == Op::Mean) acc /= static_cast<double>(a->ne[dim]);
    store_f32(dst, static_cast<float>(acc), i0, i1, i2, i3);
  });
}

}  // namespace sd
