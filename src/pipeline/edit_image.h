// Instruct-pix2pix's input image (Brooks et al. 2023): the UNet takes the image's VAE
// latent as 4 more input channels next to the noisy latent, and sampling starts from noise.
// The image comes as a reference image (-r), as in stable-diffusion.cpp.
#pragma once

#include <cstdint>
#include <vector>

namespace sd::pipeline {

struct PixelSize {
  int width = 0, height = 0;
};

// The size the edit image is encoded at: its aspect ratio, the output's pixel count (at
// most 1024x1024), sides rounded to multiples of 16 -- sd.cpp's resize_before_vae, with
// its integer division before the square root. The latent is then resized (nearest) to the
// output's.
PixelSize edit_image_encode_size(int image_width, int image_height, int out_width, int out_height);

}  // namespace sd::pipeline
