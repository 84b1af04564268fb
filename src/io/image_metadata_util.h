// Small helpers shared by the metadata readers: bounds-checked integer reads, text
// cleanup and hex previews.
#pragma once

#include <cstdint>
#include <string>

#include "io/image_metadata.h"

namespace sd::io::detail {

inline uint16_t be16(const uint8_t* p) {
  return static_cast<uint16_t>((p[0] << 8) | p[1]);
}
inline uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
inline uint16_t le16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
inline uint32_t le32(const uint8_t* p) {
  return p[0] | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}

// Hex of the first `limit` bytes, " ..." when there are more.
std::string hex_preview(const uint8_t* data, size_t size, size_t limit = 64);

// Bytes as text: kept when they are valid UTF-8, else read as Latin-1 (what PNG tEXt
// specifies) and converted; trailing NULs dropped.
std::string text_from_bytes(const uint8_t* data, size_t size);

// Appends code point `cp` as UTF-8.
void append_utf8(std::string& out, uint32_t cp);

// True when the bytes are mostly printable text (tabs and newlines allowed).
bool looks_like_text(const uint8_t* data, size_t size);

// zlib inflate, capped at `max_output` bytes. Returns false with `error` set on damage.
bool inflate_zlib(const uint8_t* data, size_t size, size_t max_output, std::string& out,
                  std::string& error);

// The text of the first <name>...</name> element (entities decoded), or "" if absent.
std::string xml_element_text(const std::string& xml, const std::string& name);

inline MetadataValue text_value(std::string key, std::string text) {
  return MetadataValue{std::move(key), std::move(text), false, {}};
}
inline MetadataValue number_value(std::string key, uint64_t n) {
  return MetadataValue{std::move(key), std::to_string(n), true, {}};
}

}  // namespace sd::io::detail
