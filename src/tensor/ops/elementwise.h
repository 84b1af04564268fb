// Elementwise arithmetic. Binary ops broadcast `b` to `a`'s shape (each dim of b is 1 or
// equal); results are f32.
#pragma once

#include "tensor/context.h"

namespace sd {

Tensor* add(Context& ctx, Tensor* a, Tensor* b);
Tensor* sub(Context& ctx, Tensor* a, Tensor* b);
Tensor* mul(Context& ctx, Tensor* a, Tensor* b);
Tensor* div(Context& ctx, Tensor* a, Tensor* b);
// a * s + bias
Tensor* scale(Context& ctx, Tensor* a, float s, float bias = 0.0f);
Tensor* clamp(Context& ctx, Tensor* a, float lo, float hi);

void reference_binary(Tensor* dst);  // Add, Sub, Mul, Div
void reference_scale(Tensor* dst);
void reference_clamp(Tensor* dst);

}  // namespace sd
