// PSNR between two 8-bit images of the same size, in dB, as bench/png_psnr.py computes it
// (99 for identical images): how the tests say how close two generations are.
#pragma once

#include <cmath>
#include <cstddef>

#include "io/image.h"

namespace sd::test {

inline double image_psnr(const io::Image& a, const io::Image& b) {
  double se = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) {
    const double d = static_cast<double>(a.pixels[i]) - b.pixels[i];
    se += d * d;
  }
  const double mse = se / static_cast<double>(a.pixels.size());
  return mse == 0 ? 99.0 : 10.0 * std::log10(255.0 * 255.0 / mse);
}

}  // namespace sd::test
