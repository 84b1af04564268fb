#include "pipeline/image_tensor.h"

#include "tensor/error.h"

namespace sd::pipeline {

std::vector<float> image_to_planes(const io::Image& image) {
  const size_t pixels = static_cast<size_t>(image.width) * static_cast<size_t>(image.height);
  const int c = image.channels;
  SD_CHECK(image.pixels.size() == pixels * static_cast<size_t>(c),
           "[image] %dx%dx%d image holds %zu bytes", image.width, image.height, c,
           image.pixels.size());
  std::vector<float> planes(pixels * static_cast<size_t>(c));
  for (size_t i = 0; i < pixels; ++i)
    for (int k = 0; k < c; ++k)
      planes[static_cast<size_t>(k) * pixels + i] = image.pixels[i * c + k] / 255.0f;
  return planes;
}

io::Image planes_to_image(const float* planes, int width, int height, int channels) {
  io::Image image;
  image.width = width;
  image.height = height;
  image.channels = channels;
  const size_t pixels = static_cast<size_t>(width) * static_cast<size_t>(height);
  image.pixels.resize(pixels * static_cast<size_t>(channels));
  for (size_t i = 0; i < pixels; ++i) {
    for (int k = 0; k < channels; ++k) {
      const float v = planes[static_cast<size_t>(k) * pixels + i];
      image.pixels[i * channels + k] = v <= 0.0f   ? 0
                                       : v >= 1.0f ? 255
                                                   : static_cast<uint8_t>(v * 255.0f + 0.5f);
    }
  }
  return image;
}

void to_signed_range(std::vector<float>& planes) {
  for (float& v : planes) v = v * 2.0f - 1.0f;
}

void to_unsigned_range(std::vector<float>& planes) {
  for (float& v : planes) v = (v + 1.0f) * 0.5f;
}

}  // namespace sd::pipeline
