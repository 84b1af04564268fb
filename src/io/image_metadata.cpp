#include "io/image_metadata.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "io/file_error.h"
#include "io/image_metadata_util.h"
#include "io/mapped_file.h"

namespace sd::io {

using detail::be16;
using detail::be32;
using detail::le32;
using detail::number_value;
using detail::text_value;

const MetadataValue* MetadataValue::find(const std::string& child_key) const {
  for (const auto& c : children) {
    if (c.key == child_key) return &c;
  }
  return nullptr;
}

const MetadataValue* MetadataEntry::find(const std::string& key) const {
  for (const auto& f : fields) {
    if (f.key == key) return &f;
  }
  return nullptr;
}

namespace {

constexpr size_t kMaxInflatedText = size_t{16} << 20;

std::string bytes(const uint8_t* begin, const uint8_t* end) {
  return std::string(reinterpret_cast<const char*>(begin), static_cast<size_t>(end - begin));
}

// Where a NUL ends a field inside [p, end), or `end` when there is none.
const uint8_t* field_end(const uint8_t* p, const uint8_t* end) {
  const void* nul = std::memchr(p, 0, static_cast<size_t>(end - p));
  return nul ? static_cast<const uint8_t*>(nul) : end;
}

class MetadataBuilder {
 public:
  MetadataBuilder(ImageMetadata& m, bool raw) : m_(m), raw_(raw) {}

  MetadataEntry& add(const char* kind, std::string name, uint64_t offset, uint64_t length,
                     bool structural) {
    MetadataEntry e;
    e.kind = kind;
    e.name = std::move(name);
    e.offset = offset;
    e.length = length;
    e.structural = structural;
    m_.entries.push_back(std::move(e));
    return m_.entries.back();
  }
  void preview(MetadataEntry& e, const uint8_t* payload, size_t size) {
    if (raw_) e.raw_preview = detail::hex_preview(payload, size);
  }
  void parameters(const std::string& text, const std::string& source) {
    if (m_.parameters.empty() && !text.empty()) {
      m_.parameters = text;
      m_.parameters_source = source;
    }
  }
  // EXIF fields; UserComment counts as parameters when nothing better was found.
  void exif(MetadataEntry& e, const uint8_t* tiff, size_t size) {
    e.fields = parse_exif(tiff, size, raw_, e.error);
    for (const auto& ifd : e.fields) {
      const MetadataValue* comment = ifd.find("UserComment");
      if (!comment) continue;
      const MetadataValue* text = comment->is_group() ? comment->find("value") : comment;
      if (text) pending_comment_ = text->text;
    }
  }
  void xmp(MetadataEntry& e, const uint8_t* payload, size_t size) {
    const std::string xml = detail::text_from_bytes(payload, size);
    const std::string params = detail::xml_element_text(xml, "sdcpp:parameters");
    e.fields.push_back(text_value("type", "XMP"));
    if (!params.empty()) e.fields.push_back(text_value("parameters", params));
    e.fields.push_back(text_value("xml", xml));
    parameters(params, "XMP sdcpp:parameters");
  }
  void finish() { parameters(pending_comment_, "EXIF UserComment"); }
  bool raw() const { return raw_; }

 private:
  ImageMetadata& m_;
  bool raw_;
  std::string pending_comment_;
};

// --- PNG: signature, then chunks of length (BE), type, payload, CRC ---

void png_text_chunk(MetadataBuilder& b, MetadataEntry& e, const std::string& type, const uint8_t* p,
                    const uint8_t* end) {
  const uint8_t* key_end = field_end(p, end);
  if (key_end == end) {
    e.error = "text chunk has no keyword terminator";
    return;
  }
  const std::string keyword = bytes(p, key_end);
  e.fields.push_back(text_value("keyword", keyword));
  const uint8_t* cursor = key_end + 1;
  std::string text, error;
  bool ok = true;
  if (type == "tEXt") {
    text = detail::text_from_bytes(cursor, static_cast<size_t>(end - cursor));
  } else if (type == "zTXt") {
    if (cursor == end) {
      e.error = "zTXt chunk has no compression method";
      return;
    }
    ok = detail::inflate_zlib(cursor + 1, static_cast<size_t>(end - cursor - 1), kMaxInflatedText,
                              text, error);
  } else {  // iTXt: flag, method, language\0, translated keyword\0, text
    if (end - cursor < 2) {
      e.error = "iTXt chunk is cut short";
      return;
    }
    const bool compressed = cursor[0] != 0;
    cursor += 2;
    const uint8_t* lang_end = field_end(cursor, end);
    const std::string language = bytes(cursor, lang_end);
    cursor = lang_end == end ? end : lang_end + 1;
    const uint8_t* translated_end = field_end(cursor, end);
    const std::string translated = detail::text_from_bytes(cursor, translated_end - cursor);
    cursor = translated_end == end ? end : translated_end + 1;
    if (!language.empty()) e.fields.push_back(text_value("language", language));
    if (!translated.empty()) e.fields.push_back(text_value("translated_keyword", translated));
    if (compressed) {
      ok = detail::inflate_zlib(cursor, static_cast<size_t>(end - cursor), kMaxInflatedText, text,
                                error);
    } else {
      text = detail::text_from_bytes(cursor, static_cast<size_t>(end - cursor));
    }
  }
  if (!ok) {
    e.error = error;
    return;
  }
  while (!text.empty() && text.back() == '\0') text.pop_back();
  e.fields.push_back(text_value("text", text));
  if (keyword == "parameters") b.parameters(text, "PNG " + type + " \"parameters\"");
  if (keyword == "XML:com.adobe.xmp") {
    const std::string params = detail::xml_element_text(text, "sdcpp:parameters");
    b.parameters(params, "XMP sdcpp:parameters");
  }
}

void parse_png(const uint8_t* d, size_t n, ImageMetadata& m, MetadataBuilder& b) {
  m.format = "PNG";
  size_t pos = 8;
  while (true) {
    if (n - pos < 12) {
      m.warning = "file ends before the IEND chunk (truncated)";
      return;
    }
    const uint32_t length = be32(d + pos);
    const std::string type = bytes(d + pos + 4, d + pos + 8);
    if (length > n - pos - 12) {
      m.warning = "chunk '" + type + "' at offset " + std::to_string(pos) +
                  " runs past the end of the file (truncated or corrupt)";
      return;
    }
    const uint8_t* p = d + pos + 8;
    const uint8_t* end = p + length;
    const bool structural = type == "IHDR" || type == "PLTE" || type == "IDAT" || type == "IEND";
    MetadataEntry& e = b.add("chunk", type, pos, length, structural);
    const uint32_t crc =
        static_cast<uint32_t>(crc32(crc32(0, nullptr, 0), d + pos + 4, length + 4));
    if (crc != be32(end)) e.error = "CRC mismatch (the chunk is damaged)";

    if (type == "IHDR" && length == 13) {
      m.width = static_cast<int>(std::min<uint32_t>(be32(p), 0x7fffffff));
      m.height = static_cast<int>(std::min<uint32_t>(be32(p + 4), 0x7fffffff));
      e.fields = {number_value("width", be32(p)), number_value("height", be32(p + 4)),
                  number_value("bit_depth", p[8]), number_value("color_type", p[9]),
                  number_value("interlace", p[12])};
    } else if (type == "tEXt" || type == "zTXt" || type == "iTXt") {
      png_text_chunk(b, e, type, p, end);
    } else if (type == "eXIf") {
      b.exif(e, p, length);
    } else if (type == "iCCP") {
      const uint8_t* name_end = field_end(p, end);
      e.fields = {text_value("profile_name", bytes(p, name_end)),
                  number_value("compressed_size", name_end + 2 <= end ? end - name_end - 2 : 0)};
      b.preview(e, p, length);
    } else if (type == "gAMA" && length == 4) {
      e.fields = {number_value("gamma_x100000", be32(p))};
    } else if (type == "sRGB" && length == 1) {
      e.fields = {number_value("rendering_intent", p[0])};
    } else if (type == "pHYs" && length == 9) {
      e.fields = {number_value("pixels_per_unit_x", be32(p)),
                  number_value("pixels_per_unit_y", be32(p + 4)),
                  text_value("unit", p[8] == 1 ? "meter" : "unknown")};
    } else if (type == "tIME" && length == 7) {
      char when[32];
      std::snprintf(when, sizeof when, "%04u-%02u-%02u %02u:%02u:%02u", be16(p), p[2], p[3], p[4],
                    p[5], p[6]);
      e.fields = {text_value("time", when)};
    } else if (type != "IDAT" && type != "IEND") {
      b.preview(e, p, length);
    }
    pos += 12 + size_t{length};
    if (type == "IEND") return;
  }
}

// --- JPEG: SOI, then segments FF xx [length BE, payload] up to the scan data ---

std::string marker_name(uint8_t marker) {
  if (marker >= 0xE0 && marker <= 0xEF) return "APP" + std::to_string(marker - 0xE0);
  if (marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC) {
    return "SOF" + std::to_string(marker - 0xC0);
  }
  switch (marker) {
    case 0xC4:
      return "DHT";
    case 0xCC:
      return "DAC";
    case 0xDA:
      return "SOS";
    case 0xDB:
      return "DQT";
    case 0xDD:
      return "DRI";
    case 0xFE:
      return "COM";
  }
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02X", marker);
  return hex;
}

void jpeg_segment(MetadataBuilder& b, ImageMetadata& m, MetadataEntry& e, uint8_t marker,
                  const uint8_t* p, size_t n) {
  static const char kParameters[] = "parameters";  // sizeof includes the NUL
  static const char kXmp[] = "http://ns.adobe.com/xap/1.0/";
  if (marker == 0xFE) {
    if (n >= sizeof kParameters && std::memcmp(p, kParameters, sizeof kParameters) == 0) {
      const std::string text =
          detail::text_from_bytes(p + sizeof kParameters, n - sizeof kParameters);
      e.fields = {text_value("label", "parameters"), text_value("text", text)};
      b.parameters(text, "JPEG COM \"parameters\"");
    } else {
      e.fields = {text_value("text", detail::text_from_bytes(p, n))};
    }
  } else if (marker == 0xE0 && n >= 14 && std::memcmp(p, "JFIF\0", 5) == 0) {
    e.fields = {text_value("identifier", "JFIF"),
                text_value("version", std::to_string(p[5]) + "." + std::to_string(p[6])),
                number_value("density_units", p[7]), number_value("x_density", be16(p + 8)),
                number_value("y_density", be16(p + 10))};
  } else if (marker == 0xE1 && n >= 6 && std::memcmp(p, "Exif\0", 5) == 0) {
    e.fields.push_back(text_value("type", "EXIF"));
    MetadataEntry exif;
    b.exif(exif, p + 6, n - 6);
    e.error = exif.error;
    for (auto& f : exif.fields) e.fields.push_back(std::move(f));
  } else if (marker == 0xE1 && n >= sizeof kXmp && std::memcmp(p, kXmp, sizeof kXmp) == 0) {
    b.xmp(e, p + sizeof kXmp, n - sizeof kXmp);
  } else if (marker == 0xE2 && n >= 14 && std::memcmp(p, "ICC_PROFILE\0", 12) == 0) {
    e.fields = {text_value("type", "ICC_PROFILE"), number_value("sequence", p[12]),
                number_value("count", p[13]), number_value("profile_bytes", n - 14)};
    b.preview(e, p + 14, n - 14);
  } else if (marker == 0xEE && n >= 12 && std::memcmp(p, "Adobe", 5) == 0) {
    e.fields = {text_value("identifier", "Adobe"), number_value("version", be16(p + 5)),
                number_value("transform", p[11])};
  } else if (marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 &&
             marker != 0xCC && n >= 6) {
    m.width = be16(p + 3);
    m.height = be16(p + 1);
    e.fields = {number_value("precision", p[0]), number_value("height", be16(p + 1)),
                number_value("width", be16(p + 3)), number_value("components", p[5])};
  } else {
    b.preview(e, p, n);
  }
}

void parse_jpeg(const uint8_t* d, size_t n, ImageMetadata& m, MetadataBuilder& b) {
  m.format = "JPEG";
  b.add("segment", "SOI", 0, 0, true);
  size_t pos = 2;
  while (true) {
    if (pos >= n) {
      m.warning = "file ends before the image data (truncated)";
      return;
    }
    if (d[pos] != 0xFF) {
      m.warning = "expected a marker at offset " + std::to_string(pos) + " (corrupt)";
      return;
    }
    const size_t start = pos;
    while (pos < n && d[pos] == 0xFF) ++pos;  // fill bytes
    if (pos >= n) {
      m.warning = "file ends inside a marker (truncated)";
      return;
    }
    const uint8_t marker = d[pos++];
    if (marker == 0xD9) {
      b.add("segment", "EOI", start, 0, true);
      return;
    }
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD8)) continue;  // no payload
    if (n - pos < 2 || be16(d + pos) < 2 || be16(d + pos) > n - pos) {
      m.warning = "segment " + marker_name(marker) + " at offset " + std::to_string(start) +
                  " runs past the end of the file (truncated or corrupt)";
      return;
    }
    const size_t length = be16(d + pos) - 2u;
    const uint8_t* p = d + pos + 2;
    const bool structural = !(marker == 0xFE || (marker >= 0xE0 && marker <= 0xEF));
    MetadataEntry& e = b.add("segment", marker_name(marker), start, length, structural);
    jpeg_segment(b, m, e, marker, p, length);
    pos += 2 + length;
    if (marker == 0xDA) return;  // entropy-coded data follows; metadata comes before it
  }
}

// --- WebP: RIFF header, then chunks of fourcc, size (LE), payload padded to even ---

void parse_webp(const uint8_t* d, size_t n, ImageMetadata& m, MetadataBuilder& b) {
  m.format = "WebP";
  const uint64_t riff_end = std::min<uint64_t>(uint64_t{le32(d + 4)} + 8, n);
  if (uint64_t{le32(d + 4)} + 8 > n)
    m.warning = "file is shorter than its RIFF header says (truncated)";
  uint64_t pos = 12;
  while (pos + 8 <= riff_end) {
    std::string fourcc = bytes(d + pos, d + pos + 4);
    const uint32_t length = le32(d + pos + 4);
    if (length > riff_end - pos - 8) {
      m.warning = "chunk '" + fourcc + "' at offset " + std::to_string(pos) +
                  " runs past the end of the file (truncated or corrupt)";
      return;
    }
    const uint8_t* p = d + pos + 8;
    if (!fourcc.empty() && fourcc.back() == ' ') fourcc.pop_back();
    const bool structural = !(fourcc == "EXIF" || fourcc == "XMP" || fourcc == "ICCP");
    MetadataEntry& e = b.add("chunk", fourcc, pos, length, structural);
    if (fourcc == "VP8X" && length >= 10) {
      auto le24 = [](const uint8_t* q) { return q[0] | (q[1] << 8) | (q[2] << 16); };
      m.width = 1 + le24(p + 4);
      m.height = 1 + le24(p + 7);
      e.fields = {number_value("canvas_width", static_cast<uint64_t>(m.width)),
                  number_value("canvas_height", static_cast<uint64_t>(m.height)),
                  text_value("icc", p[0] & 0x20 ? "yes" : "no"),
                  text_value("alpha", p[0] & 0x10 ? "yes" : "no"),
                  text_value("exif", p[0] & 0x08 ? "yes" : "no"),
                  text_value("xmp", p[0] & 0x04 ? "yes" : "no"),
                  text_value("animation", p[0] & 0x02 ? "yes" : "no")};
    } else if (fourcc == "VP8" && length >= 10 && p[3] == 0x9d && p[4] == 0x01 && p[5] == 0x2a) {
      if (m.width == 0) m.width = detail::le16(p + 6) & 0x3fff;
      if (m.height == 0) m.height = detail::le16(p + 8) & 0x3fff;
      e.fields = {number_value("width", detail::le16(p + 6) & 0x3fff),
                  number_value("height", detail::le16(p + 8) & 0x3fff)};
    } else if (fourcc == "VP8L" && length >= 5 && p[0] == 0x2f) {
      const uint32_t bits = le32(p + 1);
      if (m.width == 0) m.width = static_cast<int>((bits & 0x3fff) + 1);
      if (m.height == 0) m.height = static_cast<int>(((bits >> 14) & 0x3fff) + 1);
      e.fields = {number_value("width", (bits & 0x3fff) + 1),
                  number_value("height", ((bits >> 14) & 0x3fff) + 1),
                  text_value("alpha", (bits >> 28) & 1 ? "yes" : "no")};
    } else if (fourcc == "EXIF") {
      // Some writers keep JPEG's "Exif\0\0" prefix inside the chunk.
      const size_t skip = length >= 6 && std::memcmp(p, "Exif\0", 5) == 0 ? 6 : 0;
      b.exif(e, p + skip, length - skip);
    } else if (fourcc == "XMP") {
      b.xmp(e, p, length);
    } else if (fourcc == "ICCP") {
      e.fields = {number_value("profile_bytes", length)};
      b.preview(e, p, length);
    } else if (fourcc != "VP8" && fourcc != "VP8L") {
      b.preview(e, p, length);
    }
    pos += 8 + uint64_t{length} + (length & 1u);
  }
}

}  // namespace

ImageMetadata parse_image_metadata(const uint8_t* data, size_t size, const std::string& name,
                                   bool raw_previews) {
  ImageMetadata m;
  MetadataBuilder b(m, raw_previews);
  if (size >= 8 && std::memcmp(data, "\x89PNG\r\n\x1a\n", 8) == 0) {
    parse_png(data, size, m, b);
  } else if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) {
    parse_jpeg(data, size, m, b);
  } else if (size >= 12 && std::memcmp(data, "RIFF", 4) == 0 &&
             std::memcmp(data + 8, "WEBP", 4) == 0) {
    parse_webp(data, size, m, b);
  } else {
    fail_file(name, "not a PNG, JPEG or WebP file; metadata can be read from those only");
  }
  b.finish();
  return m;
}

ImageMetadata read_image_metadata(const std::string& path, bool raw_previews) {
  if (std::filesystem::is_directory(path)) fail_file(path, "is a folder, not an image file");
  auto file = MappedFile::open(path);
  return parse_image_metadata(file->data(), file->size(), path, raw_previews);
}

}  // namespace sd::io
