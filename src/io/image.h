// 8-bit images: reading PNG, JPEG, WebP and BMP files, channel conversion, resizing, and
// writing PNG, JPEG and WebP files with the generation parameters embedded the way
// stable-diffusion.cpp embeds them (so other tools read them back):
//   PNG:  a tEXt chunk, keyword "parameters", before the image data;
//   JPEG: a COM segment holding "parameters\0<text>\0" (cut to fit one segment, 64 KiB);
//   WebP: an XMP packet whose <sdcpp:parameters> element holds the XML-escaped text.
// Every read error is an sd::Error "<path>: <reason>"; hostile files never crash the reader
// (decoder errors are caught, dimensions are bounded before anything is allocated).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sd::io {

// Row-major, interleaved, 8 bits per sample; channels is 1 (gray), 3 (RGB) or 4 (RGBA).
struct Image {
  int width = 0, height = 0, channels = 0;
  std::vector<uint8_t> pixels;

  size_t size() const { return static_cast<size_t>(width) * height * channels; }
  uint8_t& at(int x, int y, int c) {
    return pixels[(static_cast<size_t>(y) * width + x) * channels + c];
  }
  uint8_t at(int x, int y, int c) const {
    return pixels[(static_cast<size_t>(y) * width + x) * channels + c];
  }
};

enum class ImageFormat { Png, Jpeg, Webp, Bmp };

// The largest image the readers accept: a side of 32768 pixels and 2^28 pixels in all,
// so a forged header cannot make the reader allocate gigabytes.
constexpr int kMaxImageSide = 32768;
constexpr int64_t kMaxImagePixels = int64_t{1} << 28;

// Reads by content (magic bytes), not by extension. The image keeps the file's channels:
// gray stays 1, gray+alpha becomes RGBA, palettes are expanded, 16-bit samples keep their
// high byte. Throws sd::Error "<path>: <reason>" for a missing, unreadable, truncated,
// corrupt or unsupported (animated WebP, compressed BMP, ...) file.
Image read_image(const std::string& path);
// The same from bytes in memory; `name` stands in for the path in error messages. An image
// with a side over `max_side` is refused from its header, before its pixels are decoded
// (a 1 MB PNG can hold 16384 x 16384 pixels: 768 MB decoded).
Image decode_image(const uint8_t* data, size_t size, const std::string& name,
                   int max_side = kMaxImageSide);

// Gray <-> RGB (gray = (77 R + 150 G + 29 B) >> 8, the weights stb_image uses, so masks
// read as stable-diffusion.cpp reads them), alpha dropped or added as 255.
Image to_channels(const Image& image, int channels);

// Area-weighted (box) resampling in linear light, each output pixel the coverage-weighted
// mean of the input pixels under it, sRGB-decoded; the filter stable-diffusion.cpp resizes
// init images and masks with. Every channel is treated as sRGB, as it does.
Image resize(const Image& image, int width, int height);

// Center-crops `image` to the aspect ratio of width x height, then resizes to exactly that
// size: how stable-diffusion.cpp fits an init image or mask of another size. Returns the
// image unchanged when it already has that size.
Image fit_to_size(const Image& image, int width, int height);

// The format for a path's extension (case-insensitive): .png, .jpg/.jpeg/.jpe, .webp.
// Throws sd::Error naming the valid extensions for anything else.
ImageFormat output_format_for(const std::string& path);

// Encodes to a file's bytes; `parameters` empty writes no metadata. `quality` (1-100) is
// for JPEG and WebP: WebP is always lossy, as stable-diffusion.cpp writes it; JPEG above 90
// keeps full-resolution chroma. Alpha is dropped for JPEG, gray is expanded to RGB for WebP.
std::vector<uint8_t> encode_image(const Image& image, ImageFormat format,
                                  const std::string& parameters, int quality = 90);

// Writes `image` to `path` in the format its extension names, whole or not at all: the
// bytes go to a temporary file in the same folder that is renamed over `path`; on any
// error the temporary file is removed and `path` is left as it was.
void write_image(const std::string& path, const Image& image, const std::string& parameters,
                 int quality = 90);

// Fails, naming the path and the reason, unless write_image could write `path` now: its
// format is known, it is not a folder, and a file can be created beside it (tried, then
// removed). Lets a caller find an unwritable output before any long work.
void check_image_writable(const std::string& path);

}  // namespace sd::io
