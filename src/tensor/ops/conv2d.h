// 2-D convolution (cross-correlation, as PyTorch's Conv2d) with zero padding:
//   x [W, H, Cin, N] f32, w [KW, KH, Cin / groups, Cout] (f32, f16 or bf16; PyTorch's
//   [Cout, Cin/g, KH, KW] in ne order), optional bias [Cout] -> f32 [OW, OH, Cout, N] with
//   OW = (W + 2 p0 - d0 (KW - 1) - 1) / s0 + 1 (OH likewise with s1, p1, d1, KH).
// Index 0 of stride/padding/dilation is along W. Group g maps input channels
// [g Cin/groups, (g+1) Cin/groups) to output channels [g Cout/groups, (g+1) Cout/groups).
#pragma once

#include "tensor/context.h"

namespace sd {

Tensor* conv2d(Context& ctx, Tensor* x, Tensor* w, Tensor* bias, int s0, int s1, int p0, int p1,
               int d0, int d1, int groups = 1);

// The parameters a conv2d node stores, for kernels.
struct Conv2dParams {
  int s0, s1, p0, p1, d0, d1, groups;
};
Conv2dParams conv2d_params(const Tensor* dst);

// The source of a nearest 2x upscale that conv node `dst` reads (its input is that
// upscale), or null. A kernel may convolve the upscale's source directly (the bf16
// Winograd kernel does: the upsampled input's 2x2 tiles repeat rows and columns, which
// zeroes 7 of the 16 transformed products), so the graph allocator keeps this source alive
// until the conv has run, as if the conv read it too.
const Tensor* conv2d_upsampled_source(const Tensor* dst);

void reference_conv2d(Tensor* dst);

}  // namespace sd
