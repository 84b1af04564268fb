#include "pipeline/flux_fill.h"

#include <cstddef>

namespace sd::pipeline {

std::vector<float> flux_fill_concat(const std::vector<float>& masked_latent,
                                    const std::vector<float>& mask, int64_t width, int64_t height,
                                    int64_t f) {
  const int64_t w = width / f, h = height / f;
  std::vector<float> out = masked_latent;
  const size_t base = out.size();
  out.resize(base + static_cast<size_t>(f * f * w * h));
  for (int64_t dy = 0; dy < f; ++dy)
    for (int64_t dx = 0; dx < f; ++dx) {
      float* plane = out.data() + base + (dy * f + dx) * w * h;
      for (int64_t row = 0; row < h; ++row)
        for (int64_t col = 0; col < w; ++col)
          plane[row * w + col] = mask[static_cast<size_t>((row * f + dy) * width + col * f + dx)];
    }
  return out;
}

}  // namespace sd::pipeline
