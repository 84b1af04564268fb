// The CPU backend's Highway + OpenMP kernels for the elementwise, conversion, data
// movement and normalization ops. Each matches its reference kernel in src/tensor/ops and
// returns false to decline a node it does not handle (the reference kernel runs then).
// Per-element work uses Highway's runtime dispatch, so one build uses AVX2 or AVX-512
// where the CPU has it; rows and channels are split across ctx.threads.
#pragma once

#include "backend/cpu/cpu_context.h"
#include "tensor/tensor.h"

namespace sd {

// elementwise.cpp
bool cpu_binary(CpuContext& ctx, Tensor* dst);  // Add, Sub, Mul, Div
bool cpu_scale(CpuContext& ctx, Tensor* dst);
bool cpu_clamp(CpuContext& ctx, Tensor* dst);

// unary.cpp
bool cpu_unary(CpuContext& ctx, Tensor* dst);

// convert.cpp
bool cpu_cast(CpuContext& ctx, Tensor* dst);
bool cpu_cont(CpuContext& ctx, Tensor* dst);

// softmax.cpp
bool cpu_softmax(CpuContext& ctx, Tensor* dst);

// norm.cpp
bool cpu_group_norm(CpuContext& ctx, Tensor* dst);
bool cpu_layer_norm(CpuContext& ctx, Tensor* dst);
bool cpu_rms_norm(CpuContext& ctx, Tensor* dst);

// get_rows.cpp, concat.cpp, pad.cpp, upscale.cpp
bool cpu_get_rows(CpuContext& ctx, Tensor* dst);
bool cpu_concat(CpuContext& ctx, Tensor* dst);
bool cpu_pad(CpuContext& ctx, Tensor* dst);
bool cpu_upscale(CpuContext& ctx, Tensor* dst);

}  // namespace sd
