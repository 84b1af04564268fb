// Convolutions with few output pixels per weight (a UNet's low-resolution levels), computed
// from weights in their stored dtype: im2col, then a GEMM over weight tiles converted in
// cache.
#pragma once

#include "backend/cpu/cpu_context.h"
#include "tensor/tensor.h"

namespace sd {

// Runs the Conv2d `dst` when its weights are not in a dtype the GEMM reads as stored (f16,
// or bf16 without native bf16 dot products), it is ungrouped, and its output has at most
// DnnlState::weight_tiles_max_rows pixels (all images together). False otherwise: the
// caller then runs the direct kernel, whose weights are converted per call in slices.
bool cpu_conv2d_weight_tiles(CpuContext& ctx, Tensor* dst);

}  // namespace sd
