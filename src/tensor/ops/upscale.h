// Spatial resize of images [W, H, C, N] (PyTorch's F.interpolate modes).
#pragma once

#include <cstdint>

#include "tensor/context.h"

namespace sd {

// a: f32, f16 or bf16 [W, H, C, N] -> f32 [out_w, out_h, C, N]. params[0] = mode.
// Nearest: src = floor(dst * in / out) (PyTorch mode="nearest").
// Bilinear: align_corners=False, src = (dst + 0.5) * in / out - 0.5, clamped at 0.
// BilinearAlignCorners: src = dst * (in - 1) / (out - 1) (0 when out == 1).
Tensor* upscale(Context& ctx, Tensor* a, int64_t out_w, int64_t out_h, UpscaleMode mode);
// Nearest upscale of W and H by an integer factor.
Tensor* upscale_nearest(Context& ctx, Tensor* a, int factor);

// Source coordinate of output index `dst` along a dim of `in` -> `out` elements for the
// bilinear modes (before splitting into index and weight); shared with fast kernels.
double upscale_source_coord(UpscaleMode mode, int64_t dst, int64_t in, int64_t out);

void reference_upscale(Tensor* dst);

}  // namespace sd
