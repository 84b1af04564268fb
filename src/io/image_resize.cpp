// Resampling: separable box (area-coverage) filter in linear light. Each output pixel
// covers an interval of the input; an input pixel's weight is the length of its overlap
// with that interval, so downscaling averages and upscaling blends only at pixel edges.
#include <algorithm>
#include <cmath>

#include "io/image.h"
#include "tensor/error.h"

namespace sd::io {

namespace {

struct Tap {
  int index;
  float weight;
};

// For each of `out_size` output pixels, the input pixels it covers and their weights (sum 1).
std::vector<std::vector<Tap>> box_taps(int in_size, int out_size) {
  std::vector<std::vector<Tap>> taps(static_cast<size_t>(out_size));
  const double scale = static_cast<double>(in_size) / out_size;
  for (int o = 0; o < out_size; ++o) {
    const double begin = o * scale, end = (o + 1) * scale;
    const int first = static_cast<int>(std::floor(begin));
    const int last = std::min(in_size - 1, static_cast<int>(std::ceil(end)) - 1);
    for (int i = first; i <= last; ++i) {
      const double overlap = std::min(end, i + 1.0) - std::max(begin, static_cast<double>(i));
      if (overlap > 0) taps[o].push_back({i, static_cast<float>(overlap / scale)});
    }
  }
  return taps;
}

const float* srgb_to_linear_table() {
  static const auto table = [] {
    std::vector<float> t(256);
    for (int i = 0; i < 256; ++i) {
      const double v = i / 255.0;
      t[i] = static_cast<float>(v <= 0.04045 ? v / 12.92 : std::pow((v + 0.055) / 1.055, 2.4));
    }
    return t;
  }();
  return table.data();
}

uint8_t linear_to_srgb(float linear) {
  const double v = std::clamp(static_cast<double>(linear), 0.0, 1.0);
  const double s = v <= 0.0031308 ? v * 12.92 : 1.055 * std::pow(v, 1 / 2.4) - 0.055;
  return static_cast<uint8_t>(std::lround(s * 255.0));
}

}  // namespace

Image resize(const Image& image, int width, int height) {
  SD_CHECK(width > 0 && height > 0 && width <= kMaxImageSide && height <= kMaxImageSide,
           "[resize] target size %d x %d is out of range (1 to %d per side)", width, height,
           kMaxImageSide);
  SD_CHECK(image.width > 0 && image.height > 0 && image.pixels.size() == image.size(),
           "[resize] malformed %d x %d x %d image", image.width, image.height, image.channels);
  if (width == image.width && height == image.height) return image;

  const int c = image.channels;
  const float* to_linear = srgb_to_linear_table();
  const auto x_taps = box_taps(image.width, width);
  const auto y_taps = box_taps(image.height, height);

  // Horizontal pass: every input row to `width` linear-light pixels.
  std::vector<float> rows(static_cast<size_t>(image.height) * width * c);
  for (int y = 0; y < image.height; ++y) {
    const uint8_t* in_row = &image.pixels[static_cast<size_t>(y) * image.width * c];
    float* out_row = &rows[static_cast<size_t>(y) * width * c];
    for (int x = 0; x < width; ++x) {
      for (const Tap& t : x_taps[x]) {
        for (int ch = 0; ch < c; ++ch) {
          out_row[x * c + ch] += t.weight * to_linear[in_row[t.index * c + ch]];
        }
      }
    }
  }
  // Vertical pass, then back to sRGB.
  Image out{width, height, c, {}};
  out.pixels.resize(out.size());
  std::vector<float> acc(static_cast<size_t>(width) * c);
  for (int y = 0; y < height; ++y) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (const Tap& t : y_taps[y]) {
      const float* row = &rows[static_cast<size_t>(t.index) * width * c];
      for (size_t i = 0; i < acc.size(); ++i) acc[i] += t.weight * row[i];
    }
    uint8_t* out_row = &out.pixels[static_cast<size_t>(y) * width * c];
    for (size_t i = 0; i < acc.size(); ++i) out_row[i] = linear_to_srgb(acc[i]);
  }
  return out;
}

Image fit_to_size(const Image& image, int width, int height) {
  SD_CHECK(width > 0 && height > 0, "[fit_to_size] target size %d x %d has no pixels", width,
           height);
  if (width == image.width && height == image.height) return image;
  // stable-diffusion.cpp's arithmetic, in float, so the crop lands on the same pixels.
  const float target_aspect = static_cast<float>(width) / static_cast<float>(height);
  const float source_aspect = static_cast<float>(image.width) / static_cast<float>(image.height);
  int crop_x = 0, crop_y = 0, crop_w = image.width, crop_h = image.height;
  if (source_aspect > target_aspect) {
    crop_w = static_cast<int>(image.height * target_aspect);
    crop_x = (image.width - crop_w) / 2;
  } else if (source_aspect < target_aspect) {
    crop_h = static_cast<int>(image.width / target_aspect);
    crop_y = (image.height - crop_h) / 2;
  }
  crop_w = std::max(crop_w, 1);
  crop_h = std::max(crop_h, 1);
  if (crop_x == 0 && crop_y == 0) return resize(image, width, height);

  Image cropped{crop_w, crop_h, image.channels, {}};
  cropped.pixels.resize(cropped.size());
  const size_t row_bytes = static_cast<size_t>(crop_w) * image.channels;
  for (int y = 0; y < crop_h; ++y) {
    const uint8_t* src =
        &image.pixels[(static_cast<size_t>(crop_y + y) * image.width + crop_x) * image.channels];
    std::copy(src, src + row_bytes, &cropped.pixels[y * row_bytes]);
  }
  return resize(cropped, width, height);
}

}  // namespace sd::io
