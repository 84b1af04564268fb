#include "pipeline/inpaint_mask.h"

#include <algorithm>

namespace sd::pipeline {

std::vector<float> binarize(std::vector<float> mask) {
  for (float& v : mask) v = v >= 0.5f ? 1.0f : 0.0f;
  return mask;
}

std::vector<float> max_downsample(const std::vector<float>& mask, int64_t width, int64_t height,
                                  int64_t factor) {
  const int64_t w = width / factor, h = height / factor;
  std::vector<float> out(static_cast<size_t>(w * h), 0.0f);
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x) {
      float m = 0.0f;
      for (int64_t dy = 0; dy < factor; ++dy)
        for (int64_t dx = 0; dx < factor; ++dx)
          m = std::max(m, mask[static_cast<size_t>((y * factor + dy) * width + x * factor + dx)]);
      out[static_cast<size_t>(y * w + x)] = m;
    }
  return out;
}

std::vector<float> dilate3x3(const std::vector<float>& mask, int64_t width, int64_t height) {
  std::vector<float> out(mask.size());
  for (int64_t y = 0; y < height; ++y)
    for (int64_t x = 0; x < width; ++x) {
      float m = mask[static_cast<size_t>(y * width + x)];
      for (int64_t yy = std::max<int64_t>(0, y - 1); yy <= std::min(height - 1, y + 1); ++yy)
        for (int64_t xx = std::max<int64_t>(0, x - 1); xx <= std::min(width - 1, x + 1); ++xx)
          m = std::max(m, mask[static_cast<size_t>(yy * width + xx)]);
      out[static_cast<size_t>(y * width + x)] = m;
    }
  return out;
}

std::vector<float> resize_nearest(const std::vector<float>& planes, int64_t in_w, int64_t in_h,
                                  int64_t channels, int64_t out_w, int64_t out_h) {
  std::vector<float> out(static_cast<size_t>(out_w * out_h * channels));
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t y = 0; y < out_h; ++y)
      for (int64_t x = 0; x < out_w; ++x) {
        const int64_t sx = x * in_w / out_w, sy = y * in_h / out_h;
        out[static_cast<size_t>((c * out_h + y) * out_w + x)] =
            planes[static_cast<size_t>((c * in_h + sy) * in_w + sx)];
      }
  return out;
}

}  // namespace sd::pipeline
