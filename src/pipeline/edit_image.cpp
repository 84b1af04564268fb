#include "pipeline/edit_image.h"

#include <algorithm>
#include <cmath>

namespace sd::pipeline {

PixelSize edit_image_encode_size(int image_width, int image_height, int out_width, int out_height) {
  constexpr int64_t kMaxPixels = 1024 * 1024;
  constexpr double kUnit = 16;
  const int64_t pixels = std::min<int64_t>(kMaxPixels, int64_t{out_width} * out_height);
  // sd.cpp's order of operations: the pixel count times the aspect in integers first.
  const double width = std::sqrt(static_cast<double>(pixels * image_width / image_height));
  const double height = width * image_height / image_width;
  return {static_cast<int>(std::round(width / kUnit) * kUnit),
          static_cast<int>(std::round(height / kUnit) * kUnit)};
}

}  // namespace sd::pipeline
