#include "pipeline/latent_preview.h"

#include <algorithm>

#include "tensor/error.h"

namespace sd::pipeline {
namespace {

// Least-squares fit of decoded colours to SD 1.x/2.x latents (community-measured
// factors, the ones stable-diffusion.cpp uses): rgb = latent . kProj + kBias.
constexpr float kProj[4][3] = {{0.337366f, 0.216344f, 0.257386f},
                               {0.165636f, 0.386828f, 0.046994f},
                               {-0.267803f, 0.237036f, 0.223517f},
                               {-0.178022f, -0.200862f, -0.678514f}};
constexpr float kBias[3] = {-0.017478f, -0.055834f, -0.105825f};

}  // namespace

io::Image project_latent_to_rgb(const std::vector<float>& latent, int64_t w, int64_t h) {
  const size_t plane = static_cast<size_t>(w * h);
  SD_CHECK(latent.size() >= 4 * plane, "[preview] latent of %zu values is not %lldx%lldx4",
           latent.size(), static_cast<long long>(w), static_cast<long long>(h));
  io::Image img;
  img.width = static_cast<int>(w);
  img.height = static_cast<int>(h);
  img.channels = 3;
  img.pixels.resize(plane * 3);
  for (size_t p = 0; p < plane; ++p) {
    for (int k = 0; k < 3; ++k) {
      float v = kBias[k];
      for (int c = 0; c < 4; ++c) v += latent[c * plane + p] * kProj[c][k];
      v = std::clamp(v * 0.5f + 0.5f, 0.0f, 1.0f);
      img.pixels[p * 3 + k] = static_cast<uint8_t>(v * 255);
    }
  }
  return img;
}

}  // namespace sd::pipeline
