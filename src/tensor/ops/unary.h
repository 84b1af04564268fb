// Activation and elementwise math functions, f32 out.
#pragma once

#include "tensor/context.h"

namespace sd {

// `alpha` is the negative slope of LeakyRelu and unused otherwise.
Tensor* unary(Context& ctx, Tensor* a, UnaryOp op, float alpha = 0.0f);

inline Tensor* gelu(Context& ctx, Tensor* a) {
  return unary(ctx, a, UnaryOp::Gelu);
}
inline Tensor* gelu_quick(Context& ctx, Tensor* a) {
  return unary(ctx, a, UnaryOp::GeluQuick);
}
inline Tensor* silu(Context& ctx, Tensor* a) {
  return unary(ctx, a, UnaryOp::Silu);
}
inline Tensor* relu(Context& ctx, Tensor* a) {
  return unary(ctx, a, UnaryOp::Relu);
}

// The scalar definition of each function; reference kernels and tests use it.
float unary_reference_value(UnaryOp op, float x, float alpha);

void reference_unary(Tensor* dst);

}  // namespace sd
