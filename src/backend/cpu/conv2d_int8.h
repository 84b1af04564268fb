// Convolutions with block-quantized, channels-last weights ([Cin, KW, KH, Cout], rows of
// input channels, or a 3x3 kernel's Winograd transform [Cin, 4, 4, Cout]; --quantize-convs
// makes them at load) on the int8 GEMM.
#pragma once

#include "backend/cpu/cpu_context.h"
#include "tensor/tensor.h"

namespace sd {

// Runs the Conv2d `dst` when its weight is channels-last in a type the int8 GEMM reads and
// this CPU has the instructions. False otherwise (the reference kernel then runs).
bool cpu_conv2d_int8(CpuContext& ctx, Tensor* dst);

}  // namespace sd
