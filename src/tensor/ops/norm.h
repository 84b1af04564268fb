// Normalization layers: GroupNorm, LayerNorm, RMSNorm (PyTorch semantics, biased variance).
#pragma once

#include "tensor/context.h"

namespace sd {

// What a norm applies to its own output in the same pass: nothing, or SiLU (the norm and
// activation that open every ResNet block: one pass over the feature map instead of two).
enum class NormActivation : int32_t { None = 0, Silu = 1 };

// x: f32, f16 or bf16 [W, H, C, N]; normalizes over (W, H, C / groups) for each group and
// batch, then y = y * weight[c] + bias[c] when given (f32/f16/bf16 [C], nullable), then
// `activation`. C must be divisible by groups. f32 out.
// params[0] = groups, param_f32(1) = eps, params[2] = activation, src[1] = weight,
// src[2] = bias (each may be null).
Tensor* group_norm(Context& ctx, Tensor* x, int groups, float eps, Tensor* weight = nullptr,
                   Tensor* bias = nullptr, NormActivation activation = NormActivation::None);

// Normalizes each row over ne[0]; optional affine weight/bias [ne0] (nullable). f32 out.
// param_f32(0) = eps, src[1] = weight, src[2] = bias.
Tensor* layer_norm(Context& ctx, Tensor* x, float eps, Tensor* weight = nullptr,
                   Tensor* bias = nullptr);

// x / sqrt(mean(x^2) + eps) * weight over ne[0], then `activation`; weight [ne0] nullable.
// f32 out. param_f32(0) = eps, src[1] = weight, params[1] = the dim normalized over (0
// here), params[2] = activation.
Tensor* rms_norm(Context& ctx, Tensor* x, float eps, Tensor* weight = nullptr,
                 NormActivation activation = NormActivation::None);

// The same over each pixel's channels of a feature map x [W, H, C, N] (dim 2), times weight
// [C], then `activation`: the Wan autoencoder's norm, without permuting the map to tokens
// and back (two copies of a frame each way). An RmsNorm node with params[1] = 2.
Tensor* rms_norm_channels(Context& ctx, Tensor* x, float eps, Tensor* weight = nullptr,
                          NormActivation activation = NormActivation::None);

void reference_group_norm(Tensor* dst);
void reference_layer_norm(Tensor* dst);
void reference_rms_norm(Tensor* dst);

}  // namespace sd
