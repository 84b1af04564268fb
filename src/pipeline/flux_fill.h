// FLUX.1 Fill's extra input (black-forest-labs/flux, "FLUX.1 Fill"): besides the noisy
// latent, the transformer reads the latent of the image with the part to repaint made grey,
// and the full-resolution mask folded into the latent grid (each f x f pixel block becomes
// f * f channels, channel dy * f + dx). Both are patchified like the latent and appended to
// each token: 64 + 64 + 256 = img_in's 384 channels.
#pragma once

#include <cstdint>
#include <vector>

namespace sd::pipeline {

// [masked-image latent planes, then f * f mask planes], each plane (width / f) x
// (height / f). `mask`: width x height, 1 = repaint.
std::vector<float> flux_fill_concat(const std::vector<float>& masked_latent,
                                    const std::vector<float>& mask, int64_t width, int64_t height,
                                    int64_t f);

}  // namespace sd::pipeline
