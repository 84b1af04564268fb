// The per-format coders behind image.h (one file each). Decoders throw sd::Error
// "<name>: <reason>"; encoders throw sd::Error "[write_image] <reason>".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/image.h"

namespace sd::io::detail {

Image decode_png(const uint8_t* data, size_t size, const std::string& name, int max_side);
Image decode_jpeg(const uint8_t* data, size_t size, const std::string& name, int max_side);
Image decode_webp(const uint8_t* data, size_t size, const std::string& name, int max_side);
Image decode_bmp(const uint8_t* data, size_t size, const std::string& name, int max_side);

std::vector<uint8_t> encode_png(const Image& image, const std::string& parameters);
std::vector<uint8_t> encode_jpeg(const Image& image, const std::string& parameters, int quality);
std::vector<uint8_t> encode_webp(const Image& image, const std::string& parameters, int quality);

// Throws "<name>: image is W x H, larger than ..." unless both sides are in [1, max_side]
// (max_side at most kMaxImageSide) and the pixel count is at most kMaxImagePixels. The
// decoders call it from the header, before any pixel is allocated.
void check_image_size(int64_t width, int64_t height, const std::string& name, int max_side);

// Throws "[write_image] ..." unless the image has a supported channel count, a positive
// size and as many pixels as it claims.
void check_writable(const Image& image);

// The XMP packet the WebP writer embeds, and the XML escaping it uses.
std::string parameters_xmp_packet(const std::string& parameters);
std::string xml_escape(const std::string& text);

}  // namespace sd::io::detail
