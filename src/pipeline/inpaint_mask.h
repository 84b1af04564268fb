// The mask of inpainting, as sd.cpp prepares it: pixels rounded to 0/1 (white = repaint),
// reduced to latent resolution by taking the maximum of each 8x8 block (any masked pixel
// marks its latent pixel), optionally grown by one latent pixel.
#pragma once

#include <cstdint>
#include <vector>

namespace sd::pipeline {

// [W, H] values in [0, 1] -> 0 or 1 (>= 0.5 is 1).
std::vector<float> binarize(std::vector<float> mask);

// [W, H] -> [W / factor, H / factor]: the maximum over each factor x factor block.
std::vector<float> max_downsample(const std::vector<float>& mask, int64_t width, int64_t height,
                                  int64_t factor);

// 3x3 maximum filter (stride 1; outside the edge does not count).
std::vector<float> dilate3x3(const std::vector<float>& mask, int64_t width, int64_t height);

// Nearest-neighbour resize of [W, H, C] planes (sd.cpp's interpolate: src = floor(dst * in /
// out)).
std::vector<float> resize_nearest(const std::vector<float>& planes, int64_t in_w, int64_t in_h,
                                  int64_t channels, int64_t out_w, int64_t out_h);

}  // namespace sd::pipeline
