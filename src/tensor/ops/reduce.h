// Reductions over one dim, kept as size 1 (PyTorch keepdim=True).
#pragma once

#include "tensor/context.h"

namespace sd {

// a: f32, f16 or bf16; result f32 with ne[dim] = 1. params[0] = dim.
Tensor* sum(Context& ctx, Tensor* a, int dim);
Tensor* mean(Context& ctx, Tensor* a, int dim);

void reference_reduce(Tensor* dst);  // Sum, Mean

}  // namespace sd
