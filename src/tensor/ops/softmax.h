// Softmax over ne[0] with an optional additive mask (attention scores).
#pragma once

#include "tensor/context.h"

namespace sd {

// softmax(a * scale + mask) along ne[0]; f32 out, a's shape. a: f32, f16 or bf16.
// mask (nullable): f32 or f16, broadcastable to a (each dim 1 or equal), added after scaling.
// A row whose every entry is -inf (fully masked) gives all zeros, not PyTorch's NaN: a
// padded query then contributes nothing instead of poisoning the output.
// src[1] = mask (or null), param_f32(0) = scale.
Tensor* softmax(Context& ctx, Tensor* a, Tensor* mask = nullptr, float scale = 1.0f);

void reference_softmax(Tensor* dst);

}  // namespace sd
