// Wan 2.2's autoencoder (wan/modules/vae2_2.py) moves pixels and frames into channels and
// back: its image enters the encoder as 2x2 pixel patches and leaves the decoder so, and each
// level's residual block has a parameter-free shortcut that does the level's resampling by
// rearranging instead of convolving (AvgDown3D, DupUp3D). Tensors are [W, H, C, T] (T: a
// clip's frames).
#pragma once

#include <cstdint>

#include "tensor/context.h"

namespace sd::models {

// [W, H, C, T] -> [W / s, H / s, C * s * s, T]: the s x s pixels of each cell as channels,
// numbered (c * s + dy) * s + dx when `row_major` (the shortcuts') or (c * s + dx) * s + dy
// (the image patches'). depth_to_space is its inverse.
Tensor* space_to_depth(Context& ctx, Tensor* x, int64_t s, bool row_major);
Tensor* depth_to_space(Context& ctx, Tensor* x, int64_t s, bool row_major);

// [W, H, C, T] -> [W, H, C * f, T / f]: frame t * f + a as channel c * f + a. unfold_frames
// is its inverse.
Tensor* fold_frames(Context& ctx, Tensor* x, int64_t f);
Tensor* unfold_frames(Context& ctx, Tensor* x, int64_t f);

// The shortcut around a downsampling level: x [W, H, in, T], padded in front with zero
// frames to a multiple of ft, folded by ft frames and fs x fs pixels (row-major) into
// in * ft * fs^2 channels, each run of in * ft * fs^2 / out consecutive ones averaged:
// [W / fs, H / fs, out, T / ft]. (A clip's first frame is averaged with a zero frame.)
Tensor* average_down(Context& ctx, Tensor* x, int64_t out, int64_t ft, int64_t fs);

// The shortcut around an upsampling level: each of x's `in` channels repeated
// out * ft * fs^2 / in times, then unfolded into ft frames and fs x fs pixels (row-major):
// [W * fs, H * fs, out, T * ft]; `first` (a clip's first frame) keeps only the last of its
// ft frames.
Tensor* duplicate_up(Context& ctx, Tensor* x, int64_t out, int64_t ft, int64_t fs, bool first);

}  // namespace sd::models
