// BMP reading for the common uncompressed forms: 1/4/8-bit palettes, 24-bit BGR and 32-bit
// BGRA/bitfields, bottom-up or top-down. RLE and 16-bit files are refused with a hint.
#include <cstring>

#include "io/file_error.h"
#include "io/image_codecs.h"
#include "tensor/error.h"

namespace sd::io::detail {

namespace {

uint32_t le32(const uint8_t* p) {
  return p[0] | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}
uint16_t le16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

// The 8-bit value of the bits `mask` selects.
uint8_t masked_channel(uint32_t pixel, uint32_t mask) {
  if (mask == 0) return 255;
  int shift = 0;
  while (!((mask >> shift) & 1u)) ++shift;
  const uint64_t max = mask >> shift;
  return static_cast<uint8_t>((((pixel & mask) >> shift) * uint64_t{255} + max / 2) / max);
}

}  // namespace

Image decode_bmp(const uint8_t* data, size_t size, const std::string& name, int max_side) {
  if (size < 14 + 40) fail_file(name, "BMP file is truncated (no complete header)");
  const uint32_t pixel_offset = le32(data + 10);
  const uint32_t header_size = le32(data + 14);
  if (header_size < 40 || header_size > size - 14) {
    fail_file(name, format("unsupported BMP header of %u bytes (only Windows BMP v3-v5 is read)",
                           header_size));
  }
  const auto width = static_cast<int32_t>(le32(data + 18));
  const auto raw_height = static_cast<int32_t>(le32(data + 22));
  const int bits = le16(data + 28);
  const uint32_t compression = le32(data + 30);
  uint32_t colors_used = le32(data + 46);
  const bool top_down = raw_height < 0;
  const int64_t height = top_down ? -int64_t{raw_height} : raw_height;
  check_image_size(width, height, name, max_side);

  uint32_t masks[4] = {0x00ff0000u, 0x0000ff00u, 0x000000ffu, 0};
  if (compression == 3 && bits == 32) {  // BI_BITFIELDS: masks follow a v3 header
    const size_t at = 14 + 40;           // right after the v3 header, or inside a v4/v5 one
    if (at + 16 > size) fail_file(name, "BMP file is truncated (bitfield masks)");
    for (int i = 0; i < 3; ++i) masks[i] = le32(data + at + 4 * i);
    if (header_size >= 56) masks[3] = le32(data + at + 12);
  } else if (compression != 0) {
    fail_file(name, format("compressed BMP (compression %u) is not supported; convert it to PNG",
                           compression));
  }
  if (bits != 1 && bits != 4 && bits != 8 && bits != 24 && bits != 32) {
    fail_file(name, format("%d-bit BMP is not supported; convert it to PNG", bits));
  }

  const uint8_t* palette = nullptr;
  if (bits <= 8) {
    const uint32_t max_colors = 1u << bits;
    if (colors_used == 0 || colors_used > max_colors) colors_used = max_colors;
    const size_t at = 14 + size_t{header_size};
    if (at + size_t{colors_used} * 4 > size) fail_file(name, "BMP file is truncated (palette)");
    palette = data + at;
  }
  const size_t row_bytes = ((static_cast<size_t>(width) * bits + 31) / 32) * 4;
  if (pixel_offset > size || row_bytes * static_cast<size_t>(height) > size - pixel_offset) {
    fail_file(name, "BMP file is truncated (pixel data)");
  }

  const bool alpha = bits == 32 && masks[3] != 0;
  Image image{width, static_cast<int>(height), alpha ? 4 : 3, {}};
  image.pixels.resize(image.size());
  for (int y = 0; y < image.height; ++y) {
    const int file_row = top_down ? y : image.height - 1 - y;
    const uint8_t* row = data + pixel_offset + static_cast<size_t>(file_row) * row_bytes;
    for (int x = 0; x < width; ++x) {
      uint8_t* out = &image.at(x, y, 0);
      if (bits <= 8) {
        const int per_byte = 8 / bits;
        const int shift = 8 - bits * (x % per_byte + 1);
        uint32_t index = (row[x / per_byte] >> shift) & ((1u << bits) - 1);
        if (index >= colors_used) index = 0;  // out-of-palette index: a damaged file, not a crash
        const uint8_t* bgr = palette + index * 4;
        out[0] = bgr[2], out[1] = bgr[1], out[2] = bgr[0];
      } else if (bits == 24) {
        const uint8_t* bgr = row + static_cast<size_t>(x) * 3;
        out[0] = bgr[2], out[1] = bgr[1], out[2] = bgr[0];
      } else {
        const uint32_t pixel = le32(row + static_cast<size_t>(x) * 4);
        for (int c = 0; c < image.channels; ++c) out[c] = masked_channel(pixel, masks[c]);
      }
    }
  }
  return image;
}

}  // namespace sd::io::detail
