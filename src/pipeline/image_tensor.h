// Pixels <-> the f32 planes models read and write ([W, H, C], W fastest), with the value
// mappings sd.cpp uses so images match it byte for byte.
#pragma once

#include <cstdint>
#include <vector>

#include "io/image.h"

namespace sd::pipeline {

// 8-bit pixels -> [W, H, C] planes in [0, 1] (value / 255).
std::vector<float> image_to_planes(const io::Image& image);

// [W, H, C] planes nominally in [0, 1] -> 8-bit pixels: clamped, then rounded to nearest.
io::Image planes_to_image(const float* planes, int width, int height, int channels);

// The VAE's [-1, 1] range <-> [0, 1].
void to_signed_range(std::vector<float>& planes);    // x * 2 - 1
void to_unsigned_range(std::vector<float>& planes);  // (x + 1) / 2

}  // namespace sd::pipeline
