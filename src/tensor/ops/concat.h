// Concatenation of two tensors along one dim.
#pragma once

#include "tensor/context.h"

namespace sd {

// a and b have the same dtype (f32, f16, bf16 or i32) and equal dims except `dim` (0..3);
// the result has a's dtype and ne[dim] = a.ne[dim] + b.ne[dim]. params[0] = dim.
Tensor* concat(Context& ctx, Tensor* a, Tensor* b, int dim);

void reference_concat(Tensor* dst);

}  // namespace sd
