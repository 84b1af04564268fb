// ESRGAN upscaler: the RRDBNet generator of ESRGAN (Wang et al. 2018, "ESRGAN: Enhanced
// Super-Resolution Generative Adversarial Networks") as Real-ESRGAN (Wang et al. 2021)
// trains and releases it: a 3x3 input conv, a trunk of Residual-in-Residual Dense Blocks
// (three 5-conv dense blocks each, residuals scaled by 0.2), a trunk conv with a long skip,
// nearest 2x upsampling each followed by a 3x3 conv, and two output convs; LeakyReLU(0.2)
// throughout. Presets: RealESRGAN_x4plus (23 blocks), RealESRGAN_x4plus_anime_6B (6 blocks),
// both with 64 features and growth 32.
//
// Parameter names are Real-ESRGAN's (BasicSR's rrdbnet_arch.py): conv_first,
// body.N.rdb{1,2,3}.conv{1..5}, conv_body, conv_up1, conv_up2, conv_hr, conv_last.
//
// Scale: the net upsamples by 2 per conv_up layer. Real-ESRGAN's own x2 and x1 models feed
// it a pixel-unshuffled image (conv_first then reads 12 or 48 channels) and keep both
// upsampling convs; files with a 3-channel conv_first and fewer conv_up layers (as
// stable-diffusion.cpp's loader expects for x2 and x1) scale by 2^(conv_up layers).
#pragma once

#include <cstdint>

#include "nn/weights.h"

namespace sd::models {

struct EsrganConfig {
  int num_block = 23;     // RRDB blocks in the trunk
  int num_upsample = 2;   // conv_up layers, each a nearest 2x upsample and a 3x3 conv
  int unshuffle = 1;      // pixel-unshuffle factor applied to the image before conv_first
  int64_t num_in_ch = 3;  // conv_first's input channels: 3 * unshuffle^2
  int64_t num_out_ch = 3;
  int64_t num_feat = 64;
  int64_t num_grow_ch = 32;

  // Output pixels per input pixel.
  int scale() const { return (1 << num_upsample) / unshuffle; }

  // Real-ESRGAN's release configurations.
  static EsrganConfig x4plus() { return {}; }
  static EsrganConfig x4plus_anime_6b() {
    EsrganConfig c;
    c.num_block = 6;
    return c;
  }
};

// x [W, H, num_in_ch, N] (already pixel-unshuffled when config.unshuffle > 1) ->
// [W * 2^num_upsample, H * 2^num_upsample, num_out_ch, N], not clamped.
Tensor* rrdbnet(const nn::Scope& s, const EsrganConfig& config, Tensor* x);

// Real-ESRGAN's pixel_unshuffle on host planes: [W, H, C] -> [W / r, H / r, C * r * r],
// channel c * r * r + i * r + j taking pixel (x * r + j, y * r + i). W and H must be
// multiples of r.
void pixel_unshuffle(const float* in, int64_t w, int64_t h, int64_t c, int r, float* out);

}  // namespace sd::models
