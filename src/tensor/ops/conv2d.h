// 2-D convolution (cross-correlation, as PyTorch's Conv2d) with zero padding:
//   x [W, H, Cin, N] f32, w [KW, KH, Cin / groups, Cout] (f32, f16 or bf16; PyTorch's
//   [Cout, Cin/g, KH, KW] in ne order), optional bias [Cout] -> f32 [OW, OH, Cout, N] with
//   OW = (W + 2 p0 - d0 (KW - 1) - 1) / s0 + 1 (OH likewise with s1, p1, d1, KH).
// Index 0 of stride/padding/dilation is along W. Group g maps input channels
// [g Cin/groups, (g+1) Cin/groups) to output channels [g Cout/groups, (g+1) Cout/groups).
//
// The weight may instead be channels-last, [Cin, KW, KH, Cout] (PyTorch's [Cout, KH, KW,
// Cin]; ungrouped only): each row then runs along the input channels, so a block type
// (q8_0 ...) can hold it in blocks of input channels, which the int8 convolution needs
// (--quantize-convs, weights/model_manager.h). Any type the reference reads is allowed.
//
// A 3x3 kernel of a stride-1, undilated convolution may also come as its Winograd
// F(2x2, 3x3) transform (Lavin and Gray 2015), [Cin, 4, 4, Cout] channels-last: element
// (ci, j, i, co) is (G g G^T)[i][j] of filter g of (co, ci) (winograd_f2x3_filter). Each
// 2x2 block of outputs is then A^T [U . (B^T d B)] A over its 4x4 input patch d: 16
// multiplies per 4 outputs and input channel where the direct method does 36.
#pragma once

#include "tensor/context.h"

namespace sd {

enum class ConvKernelLayout : int {
  Standard = 0,      // [KW, KH, Cin / groups, Cout]
  ChannelsLast = 1,  // [Cin, KW, KH, Cout]
  WinogradF2x3 = 2,  // [Cin, 4, 4, Cout]: a 3x3 kernel's Winograd transform, channels-last
};

// u[4 i + j] = (G g G^T)[i][j] for the 3x3 filter g[3 ky + kx], with
// G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1].
void winograd_f2x3_filter(const float g[9], float u[16]);
// The same for n filters at once, tap-major: g[(3 ky + kx) n + i] -> u[(4 i' + j) n + i].
void winograd_f2x3_filters(const float* g, int64_t n, float* u);

Tensor* conv2d(Context& ctx, Tensor* x, Tensor* w, Tensor* bias, int s0, int s1, int p0, int p1,
               int d0, int d1, int groups = 1,
               ConvKernelLayout layout = ConvKernelLayout::Standard);

// The parameters a conv2d node stores, for kernels, and its kernel's geometry.
struct Conv2dParams {
  int s0, s1, p0, p1, d0, d1, groups;
  ConvKernelLayout layout;
  int64_t kw, kh, cin_per_group;  // from the weight's shape in its layout
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
