#include "io/image.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "io/file_error.h"
#include "io/image_codecs.h"
#include "io/mapped_file.h"
#include "io/whole_file.h"
#include "tensor/error.h"

namespace sd::io {

namespace detail {

void check_image_size(int64_t width, int64_t height, const std::string& name, int max_side) {
  if (width < 1 || height < 1) {
    fail_file(name, format("image has no pixels (%lld x %lld)", static_cast<long long>(width),
                           static_cast<long long>(height)));
  }
  if (max_side < kMaxImageSide && (width > max_side || height > max_side)) {
    fail_file(name,
              format("image is %lld x %lld, larger than the %d pixels a side accepted here",
                     static_cast<long long>(width), static_cast<long long>(height), max_side));
  }
  if (width > kMaxImageSide || height > kMaxImageSide || width * height > kMaxImagePixels) {
    fail_file(name, format("image is %lld x %lld, larger than the %d x %d (%lld pixels) this "
                           "reader accepts",
                           static_cast<long long>(width), static_cast<long long>(height),
                           kMaxImageSide, kMaxImageSide, static_cast<long long>(kMaxImagePixels)));
  }
}

void check_writable(const Image& image) {
  SD_CHECK(image.channels == 1 || image.channels == 3 || image.channels == 4,
           "[write_image] images have 1, 3 or 4 channels, not %d", image.channels);
  SD_CHECK(image.width > 0 && image.height > 0 && image.width <= kMaxImageSide &&
               image.height <= kMaxImageSide,
           "[write_image] image size %d x %d is out of range (1 to %d per side)", image.width,
           image.height, kMaxImageSide);
  SD_CHECK(image.pixels.size() == image.size(),
           "[write_image] a %d x %d x %d image needs %zu bytes of pixels, has %zu", image.width,
           image.height, image.channels, image.size(), image.pixels.size());
}

}  // namespace detail

Image decode_image(const uint8_t* data, size_t size, const std::string& name, int max_side) {
  auto starts_with = [&](const char* magic, size_t offset = 0) {
    const size_t n = std::strlen(magic);
    return size >= offset + n && std::memcmp(data + offset, magic, n) == 0;
  };
  if (starts_with("\x89PNG\r\n\x1a\n")) return detail::decode_png(data, size, name, max_side);
  if (starts_with("\xff\xd8\xff")) return detail::decode_jpeg(data, size, name, max_side);
  if (starts_with("RIFF") && starts_with("WEBP", 8))
    return detail::decode_webp(data, size, name, max_side);
  if (starts_with("BM")) return detail::decode_bmp(data, size, name, max_side);
  if (size == 0) fail_file(name, "file is empty, not an image");
  fail_file(name, "not a PNG, JPEG, WebP or BMP image (unknown file signature)");
}

Image read_image(const std::string& path) {
  if (std::filesystem::is_directory(path)) fail_file(path, "is a folder, not an image file");
  auto file = MappedFile::open(path);
  return decode_image(file->data(), file->size(), path);
}

namespace {

// stb_image's luma weights, without rounding, so gray images match stable-diffusion.cpp's.
uint8_t luma(const uint8_t* rgb) {
  return static_cast<uint8_t>((rgb[0] * 77 + rgb[1] * 150 + rgb[2] * 29) >> 8);
}

}  // namespace

Image to_channels(const Image& image, int channels) {
  SD_CHECK(channels == 1 || channels == 3 || channels == 4,
           "[to_channels] images have 1, 3 or 4 channels, not %d", channels);
  SD_CHECK(image.pixels.size() == image.size() &&
               (image.channels == 1 || image.channels == 3 || image.channels == 4),
           "[to_channels] malformed %d x %d x %d image", image.width, image.height, image.channels);
  if (image.channels == channels) return image;
  Image out{image.width, image.height, channels, {}};
  out.pixels.resize(out.size());
  const size_t n = static_cast<size_t>(image.width) * image.height;
  const int cin = image.channels;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* src = &image.pixels[i * cin];
    uint8_t* dst = &out.pixels[i * channels];
    if (channels == 1) {
      dst[0] = luma(src);
      continue;
    }
    for (int c = 0; c < 3; ++c) dst[c] = cin == 1 ? src[0] : src[c];
    if (channels == 4) dst[3] = cin == 4 ? src[3] : 255;
  }
  return out;
}

ImageFormat output_format_for(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (ext == ".png") return ImageFormat::Png;
  if (ext == ".jpg" || ext == ".jpeg" || ext == ".jpe") return ImageFormat::Jpeg;
  if (ext == ".webp") return ImageFormat::Webp;
  fail(
      "%s: cannot tell the image format from the extension '%s'; use .png, .jpg, .jpeg or "
      ".webp",
      path.c_str(), ext.c_str());
}

std::vector<uint8_t> encode_image(const Image& image, ImageFormat file_format,
                                  const std::string& parameters, int quality) {
  detail::check_writable(image);
  SD_CHECK(quality >= 1 && quality <= 100, "[write_image] quality is 1 to 100, got %d", quality);
  switch (file_format) {
    case ImageFormat::Png:
      return detail::encode_png(image, parameters);
    case ImageFormat::Jpeg:
      return detail::encode_jpeg(image, parameters, quality);
    case ImageFormat::Webp:
      return detail::encode_webp(image, parameters, quality);
    case ImageFormat::Bmp:
      break;
  }
  fail("[write_image] writing BMP is not supported; use PNG, JPEG or WebP");
}

void write_image(const std::string& path, const Image& image, const std::string& parameters,
                 int quality) {
  const std::vector<uint8_t> bytes =
      encode_image(image, output_format_for(path), parameters, quality);
  write_file_whole(path, bytes.data(), bytes.size(), "image");
}

void check_image_writable(const std::string& path) {
  output_format_for(path);
  check_file_writable(path, "image");
}

}  // namespace sd::io
