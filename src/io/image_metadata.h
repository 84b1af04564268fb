// Reading the metadata of PNG, JPEG and WebP files without decoding their pixels: every
// chunk (PNG, WebP) or segment (JPEG) in file order, with the payloads this reader
// understands decoded: PNG tEXt/zTXt/iTXt/eXIf and a few header chunks, JPEG COM, APP0
// JFIF, APP1 EXIF and XMP, APP2 ICC, APP14 Adobe, WebP VP8X/EXIF/XMP/ICCP; EXIF as its IFDs
// (IFD0, Exif, GPS, Interop, IFD1) with named tags, UserComment decoded by its charset.
//
// Damaged files are read as far as they make sense: every length and offset is checked
// against the bytes that exist, IFD chains are followed once, decompression is capped;
// what could not be read is reported in `error` / `warning`, never by crashing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sd::io {

// A decoded value: a text or a number, or a group of named values (an EXIF IFD).
struct MetadataValue {
  std::string key;
  std::string text;
  bool is_number = false;
  std::vector<MetadataValue> children;  // non-empty: this value is a group

  bool is_group() const { return !children.empty(); }
  // The child named `key`, or nullptr.
  const MetadataValue* find(const std::string& child_key) const;
};

struct MetadataEntry {
  std::string kind;                   // "chunk" (PNG, WebP) or "segment" (JPEG)
  std::string name;                   // "tEXt", "IHDR", "COM", "APP1", "SOF0", "EXIF", "XMP", ...
  uint64_t offset = 0;                // of the chunk or segment header in the file
  uint64_t length = 0;                // payload bytes
  bool structural = false;            // image layout or data (IHDR, IDAT, SOF, DQT, VP8, ...)
  std::vector<MetadataValue> fields;  // the decoded payload
  std::string raw_preview;            // hex of the first 64 payload bytes (only when asked for)
  std::string error;                  // why (part of) the payload could not be decoded

  const MetadataValue* find(const std::string& key) const;
};

struct ImageMetadata {
  std::string format;         // "PNG", "JPEG" or "WebP"
  int width = 0, height = 0;  // from the image header; 0 when not found
  std::vector<MetadataEntry> entries;
  std::string warning;  // why the walk stopped before the end of the file; "" if it did not

  // The generation-parameters text (A1111 style) found in the file, and where: a PNG text
  // chunk "parameters", a JPEG COM "parameters", an XMP <sdcpp:parameters> element or an
  // EXIF UserComment. "" when there is none.
  std::string parameters;
  std::string parameters_source;
};

// `raw_previews`: also keep a hex preview of payloads (and EXIF values) left undecoded.
// Throws sd::Error "<path>: ..." only when the file cannot be read or is not a PNG, JPEG
// or WebP file at all.
ImageMetadata read_image_metadata(const std::string& path, bool raw_previews = false);
ImageMetadata parse_image_metadata(const uint8_t* data, size_t size, const std::string& name,
                                   bool raw_previews = false);

// Decodes a TIFF-structured EXIF block (starting at its "II"/"MM" byte-order mark) into
// one group per IFD. Problems go to `error`; what was read before them is kept.
std::vector<MetadataValue> parse_exif(const uint8_t* data, size_t size, bool raw_previews,
                                      std::string& error);

// An EXIF UserComment: an 8-byte charset id ("ASCII", "UNICODE", "JIS", or zeros) then
// the text. UNICODE is UTF-16 in either byte order (a BOM or the zero bytes decide).
std::string decode_user_comment(const uint8_t* data, size_t size);

}  // namespace sd::io
