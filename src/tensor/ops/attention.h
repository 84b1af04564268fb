// Scaled dot-product attention, fused: softmax(scale * q k^T + mask) v per head, without
// materializing the scores of all queries at once (kernels work on blocks of queries).
//   q [D, Lq, H, N], k [D, Lk, H, N], v [Dv, Lk, H, N]: f32, may be strided views;
//   mask: null or f32 [Lk, Lq], added to the scaled scores of every head and batch
//     (-INFINITY masks a key out);
//   result f32 [Dv, H, Lq, N]: heads before queries, so reshaping to [Dv * H, Lq, N] (the
//     input of the output projection) is free.
// A query whose keys are all masked out gets zeros rather than the NaN of 0/0.
//
// precision (param 1) says how exact a kernel must be. F32: f32 products throughout. BF16:
// a kernel may round q, k, v and the softmax weights to bf16 and multiply them at the bf16
// rate, accumulating in f32, as a bf16 model's matmuls and convolutions already do its
// activations; models ask for it when their weights are bf16.
#pragma once

#include "tensor/context.h"

namespace sd {

enum class AttentionPrecision : int32_t { F32 = 0, BF16 = 1 };

Tensor* attention(Context& ctx, Tensor* q, Tensor* k, Tensor* v, Tensor* mask, float scale,
                  AttentionPrecision precision = AttentionPrecision::F32);

AttentionPrecision attention_precision(const Tensor* node);

void reference_attention(Tensor* dst);

}  // namespace sd
