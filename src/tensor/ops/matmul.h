// Matrix product in GGUF's orientation, as a linear layer uses it: `a` is the weight-like
// operand [K, M, A2, A3] (rows of K values, any dtype including block types), `b` the f32
// activations [K, N, B2, B3], and the result f32 [M, N, B2, B3] with
//   out[m, n, i2, i3] = sum_k a[k, m, i2 / (B2 / A2), i3 / (B3 / A3)] * b[k, n, i2, i3].
// So a linear layer y = x W^T is matmul(W, x) with W as stored in a checkpoint, and `a`
// broadcasts over b's batch dims (B2 % A2 == 0, B3 % A3 == 0), as ggml_mul_mat does.
#pragma once

#include "tensor/context.h"

namespace sd {

Tensor* matmul(Context& ctx, Tensor* a, Tensor* b);

void reference_matmul(Tensor* dst);

}  // namespace sd
