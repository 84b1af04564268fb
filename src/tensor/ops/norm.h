// Normalization layers: GroupNorm, LayerNorm, RMSNorm (PyTorch semantics, biased variance).
#pragma once

#include "tensor/context.h"

namespace sd {

// x: f32, f16 or bf16 [W, H, C, N]; normalizes over (W, H, C / groups) for each group and
// batch, then y = y * weight[c] + bias[c] when given (f32/f16/bf16 [C], nullable).
// C must be divisible by groups. f32 out.
// params[0] = groups, param_f32(1) = eps, src[1] = weight, src[2] = bias (each may be null).
Tensor* group_norm(Context& ctx, Tensor* x, int groups, float eps, Tensor* weight = nullptr,
                   Tensor* bias = nullptr);

// Normalizes each row over ne[0]; optional affine weight/bias [ne0] (nullable). f32 out.
// param_f32(0) = eps, src[1] = weight, src[2] = bias.
Tensor* layer_norm(Context& ctx, Tensor* x, float eps, Tensor* weight = nullptr,
                   Tensor* bias = nullptr);

// x / sqrt(mean(x^2) + eps) * weight over ne[0]; weight [ne0] nullable. f32 out.
// param_f32(0) = eps, src[1] = weight.
Tensor* rms_norm(Context& ctx, Tensor* x, float eps, Tensor* weight = nullptr);

void reference_group_norm(Tensor* dst);
void reference_layer_norm(Tensor* dst);
void reference_rms_norm(Tensor* dst);

}  // namespace sd
