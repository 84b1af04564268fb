// TAESD, the Tiny AutoEncoder for Stable Diffusion (Ollin Boer Bohan, madebyollin/taesd):
// a distilled stand-in for the AutoencoderKL with the same latent space, made of plain 3x3
// convs and ReLU residual blocks (64 channels, no normalization, no attention), so it
// decodes in a fraction of the time. taesd (SD 1.x/2.x) and taesdxl (SDXL) share the
// architecture; only the weights differ.
//
// Parameter names: a taesd file stores decoder.layers.N.* and encoder.layers.N.*; sd.cpp
// loads a --taesd file under the prefix "tae." (tae.decoder.layers.0.weight, ...), so the
// pipeline passes the scope at "tae.". Layer N is a Conv2d ("N.weight", "N.bias") or a
// block ("N.conv.{0,2,4}.weight/bias"); ReLU and Upsample layers hold no parameters but
// keep their index, as in the PyTorch Sequential.
//
// Scaling, as sd.cpp applies it for --taesd: none. The sampler's latent goes in unscaled
// (TAESD was trained on the scaled latent space: no 1 / 0.18215), the decoder's output is
// an image nominally in [0, 1] (not [-1, 1]; sd.cpp does not rescale it, only clamps to
// [0, 1] when it writes pixels), and the encoder takes an image in [0, 1] and returns the
// sampler's latent directly (no moments, no sampling, no scale factor).
#pragma once

#include <cstdint>

#include "nn/weights.h"

namespace sd::models {

// z: the sampler's latent [w, h, C, N] (C = 4 for taesd/taesdxl) -> image f32
// [8 w, 8 h, 3, N], nominally in [0, 1], not clamped.
Tensor* taesd_decode(const nn::Scope& taesd, Tensor* z);

// image [W, H, 3, N] in [0, 1], W and H multiples of 8 -> the sampler's latent
// [W / 8, H / 8, z_channels, N].
Tensor* taesd_encode(const nn::Scope& taesd, Tensor* image, int64_t z_channels = 4);

}  // namespace sd::models
