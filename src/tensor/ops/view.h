// Views alias their source's memory with a new shape or stride order (no compute), and
// `cont` materializes any view as a contiguous tensor.
#pragma once

#include "tensor/context.h"

namespace sd {

Tensor* view(Context& ctx, Tensor* a, const Shape& ne, const std::array<size_t, kMaxDims>& nb,
             size_t offset);
// Same data, new shape with the same element count; `a` must be contiguous.
Tensor* reshape(Context& ctx, Tensor* a, const Shape& ne);
inline Tensor* reshape(Context& ctx, Tensor* a, std::initializer_list<int64_t> ne) {
  return reshape(ctx, a, make_shape(ne));
}
// Result dim i is source dim axes[i] (PyTorch's meaning, in ne order).
Tensor* permute(Context& ctx, Tensor* a, const std::array<int, kMaxDims>& axes);
// Swaps dims 0 and 1.
Tensor* transpose(Context& ctx, Tensor* a);
// Elements [start, end) of `dim`.
Tensor* slice(Context& ctx, Tensor* a, int dim, int64_t start, int64_t end);
// A contiguous copy.
Tensor* cont(Context& ctx, Tensor* a);

void reference_cont(Tensor* dst);

}  // namespace sd
