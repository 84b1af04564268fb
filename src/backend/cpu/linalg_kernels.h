// The CPU backend's linear-algebra kernels: MatMul and Conv2d through oneDNN (f32 and bf16
// GEMM/convolution; weights in their own dtype packed into oneDNN's layout and cached in
// DnnlState, other dtypes converted per call), and fused Attention with our own Highway
// tiles. Each matches its reference kernel in src/tensor/ops and returns false to decline a
// node (the reference kernel runs then).
#pragma once

#include "backend/cpu/cpu_context.h"
#include "tensor/tensor.h"

namespace sd {

bool cpu_matmul(CpuContext& ctx, Tensor* dst);     // matmul.cpp
bool cpu_conv2d(CpuContext& ctx, Tensor* dst);     // conv2d.cpp
bool cpu_attention(CpuContext& ctx, Tensor* dst);  // attention.cpp

}  // namespace sd
