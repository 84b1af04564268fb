// Scaled dot-product attention, fused: softmax(scale * q k^T + mask) v per head, without
// materializing the scores of all queries at once (kernels work on blocks of queries).
//   q [D, Lq, H, N], k [D, Lk, H, N], v [Dv, Lk, H, N]: f32, may be strided views;
//   mask: null or f32 [Lk, Lq], added to the scaled scores of every head and batch
//     (-INFINITY masks a key out);
//   result f32 [Dv, H, Lq, N]: heads before queries, so reshaping to [Dv * H, Lq, N] (the
//     input of the output projection) is free.
// A query whose keys are all masked out gets zeros rather than the NaN of 0/0.
#pragma once

#include "tensor/context.h"

namespace sd {

Tensor* attention(Context& ctx, Tensor* q, Tensor* k, Tensor* v, Tensor* mask, float scale);

void reference_attention(Tensor* dst);

}  // namespace sd
