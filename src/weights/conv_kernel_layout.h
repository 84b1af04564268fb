// Convolution kernels in the q8_0 layouts of --quantize-convs (tensor/ops/conv2d.h): made
// from the stored kernel one output channel at a time, so no whole-kernel copy in another
// precision is ever held.
#pragma once

#include "tensor/context.h"
#include "tensor/ops/conv2d.h"

namespace sd::weights {

// `kernel`: a contiguous [KW, KH, Cin, Cout] kernel `ne` of float `type` (f32, f16, bf16).
// Writes it to `dst` in q8_0 as `layout` lays it out: ChannelsLast [Cin, KW, KH, Cout], or
// WinogradF2x3 [Cin, 4, 4, Cout] (a 3x3 kernel's transform). Cin must be a multiple of 32.
void quantize_conv_kernel(ConvKernelLayout layout, DType type, const void* kernel, const Shape& ne,
                          void* dst);

}  // namespace sd::weights
