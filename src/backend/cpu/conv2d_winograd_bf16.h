// 3x3 convolutions with bf16 weights by Winograd's minimal filtering, F(2x2, 3x3).
#pragma once

#include "backend/cpu/cpu_context.h"
#include "tensor/tensor.h"

namespace sd {

// Runs the Conv2d `dst` when it is a 3x3, stride-1, undilated, ungrouped convolution with
// bf16 weights, padding of at most 1, outputs of at least
// DnnlState::winograd_bf16_min_pixels and DnnlState::winograd_bf16_min_out_channels, on a CPU
// with AVX512_BF16. False otherwise: the
// caller then runs the direct kernel.
bool cpu_conv2d_winograd_bf16(CpuContext& ctx, Tensor* dst);

}  // namespace sd
