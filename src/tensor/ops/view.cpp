#include "tensor/ops/view.h"

#include <cstring>

#include "tensor/error.h"
#include "tensor/ops/access.h"

namespace sd {

Tensor* view(Context& ctx, Tensor* a, const Shape& ne, const std::array<size_t, kMaxDims>& nb,
             size_t offset) {
  return ctx.new_view(Op::View, a, a->type, ne, nb, offset);
}

Tensor* reshape(Context& ctx, Tensor* a, const Shape& ne) {
  SD_CHECK(a->is_contiguous(), "[reshape] '%s' %s is not contiguous; call cont() first",
           a->name.c_str(), a->shape_string().c_str());
  Tensor probe;
  probe.ne = ne;
  SD_CHECK(probe.nelements() == a->nelements(), "[reshape] cannot reshape %s to %s",
           a->shape_string().c_str(), probe.shape_string().c_str());
  return ctx.new_view(Op::Reshape, a, a->type, ne, contiguous_strides(a->type, ne), 0);
}

Tensor* permute(Context& ctx, Tensor* a, const std::array<int, kMaxDims>& axes) {
  bool used[kMaxDims] = {};
  for (int ax : axes) {
    SD_CHECK(ax >= 0 && ax < kMaxDims && !used[ax], "[permute] axes must be a permutation of 0..3");
    used[ax] = true;
  }
  SD_CHECK(!is_quantized(a->type) || axes[0] == 0,
           "[permute] cannot move dim 0 of block-quantized tensor '%s'", a->name.c_str());
  Shape ne;
  std::array<size_t, kMaxDims> nb;
  for (int i = 0; i < kMaxDims; ++i) {
    ne[i] = a->ne[axes[i]];
    nb[i] = a->nb[axes[i]];
  }
  Tensor* t = ctx.new_view(Op::Permute, a, a->type, ne, nb, 0);
  for (int i = 0; i < kMaxDims; ++i) t->params[i] = axes[i];
  return t;
}

Tensor* transpose(Context& ctx, Tensor* a) {
  return permute(ctx, a, {1, 0, 2, 3});
}

Tensor* slice(Context& ctx, Tensor* a, int dim, int64_t start, int64_t end) {
  SD_CHECK(dim >= 0 && dim < kMaxDims, "[slice] dim %d out of range", dim);
  SD_CHECK(0 <= start && start <= end && end <= a->ne[dim],
           "[slice] range [%lld, %lld) outside dim %d of size %lld", static_cast<long long>(start),
           static_cast<long long>(end), dim, static_cast<long long>(a->ne[dim]));
  SD_CHECK(dim != 0 || (start % block_size(a->type) == 0 && end % block_size(a->type) == 0),
           "[slice] dim 0 of %s must be cut at block boundaries",
           std::string(dtype_name(a->type)).c_str());
  Shape ne = a->ne;
  ne[dim] = end - start;
  size_t offset = dim == 0 ? static_cast<size_t>(start / block_size(a->type)) * type_size(a->type)
                           : static_cast<size_t>(start) * a->nb[dim];
  return ctx.new_view(Op::View, a, a->type, ne, a->nb, offset);
}

Tensor* cont(Context& ctx, Tensor* a) {
  return ctx.new_op(Op::Cont, a->type, a->ne, {a});
}

void reference_cont(Tensor* dst) {
  const Tensor* a = dst->src[0];
  if (is_quantized(a->type)) {
    const size_t rs = row_size(a->type, a->ne[0]);
    for (int64_t i3 = 0; i3 < a->ne[3]; ++i3)
      for (int64_t i2 = 0; i2 < a->ne[2]; ++i2)
        for (int64_t i1 = 0; i1 < a->ne[1]; ++i1)
          std::memcpy(element_ptr(dst, 0, i1, i2, i3), element_ptr(a, 0, i1, i2, i3), rs);
    return;
  }
  const size_t es = type_size(a->type);
  for_each_index(dst, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    std::memcpy(element_ptr(dst, i0, i1, i2, i3), element_ptr(a, i0, i1, i2, i3), es);
  });
}

}  // namespace sd
