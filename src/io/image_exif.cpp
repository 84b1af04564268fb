// EXIF: a TIFF structure of IFDs (tables of 12-byte tag entries) linked by offsets. Every
// offset is checked against the block, each IFD is read at most once (a loop of pointers
// ends), and at most kMaxIfds are read.
#include <cstdio>
#include <cstring>
#include <set>

#include "io/image_metadata.h"
#include "io/image_metadata_util.h"

namespace sd::io {

namespace {

constexpr int kMaxIfds = 16;
constexpr size_t kMaxListedValues = 64;  // longer arrays are shown cut, with their count

struct TagName {
  uint16_t id;
  const char* name;
};

// Tag names from the TIFF 6.0 and EXIF 2.3 specifications, per IFD kind.
constexpr TagName kImageTags[] = {
    {0x0100, "ImageWidth"},
    {0x0101, "ImageLength"},
    {0x0102, "BitsPerSample"},
    {0x0103, "Compression"},
    {0x0106, "PhotometricInterpretation"},
    {0x010E, "ImageDescription"},
    {0x010F, "Make"},
    {0x0110, "Model"},
    {0x0111, "StripOffsets"},
    {0x0112, "Orientation"},
    {0x0115, "SamplesPerPixel"},
    {0x011A, "XResolution"},
    {0x011B, "YResolution"},
    {0x0128, "ResolutionUnit"},
    {0x0131, "Software"},
    {0x0132, "DateTime"},
    {0x013B, "Artist"},
    {0x013C, "HostComputer"},
    {0x0201, "JPEGInterchangeFormat"},
    {0x0202, "JPEGInterchangeFormatLength"},
    {0x0213, "YCbCrPositioning"},
    {0x8298, "Copyright"},
    {0x8769, "ExifIFDPointer"},
    {0x8825, "GPSInfoIFDPointer"},
    {0x9C9B, "XPTitle"},
    {0x9C9C, "XPComment"},
    {0x9C9D, "XPAuthor"},
    {0x9C9E, "XPKeywords"},
    {0x9C9F, "XPSubject"},
};
constexpr TagName kExifTags[] = {
    {0x829A, "ExposureTime"},
    {0x829D, "FNumber"},
    {0x8822, "ExposureProgram"},
    {0x8827, "ISOSpeedRatings"},
    {0x9000, "ExifVersion"},
    {0x9003, "DateTimeOriginal"},
    {0x9004, "DateTimeDigitized"},
    {0x9010, "OffsetTime"},
    {0x9101, "ComponentsConfiguration"},
    {0x9201, "ShutterSpeedValue"},
    {0x9202, "ApertureValue"},
    {0x9204, "ExposureBiasValue"},
    {0x9207, "MeteringMode"},
    {0x9209, "Flash"},
    {0x920A, "FocalLength"},
    {0x927C, "MakerNote"},
    {0x9286, "UserComment"},
    {0x9290, "SubSecTime"},
    {0xA000, "FlashpixVersion"},
    {0xA001, "ColorSpace"},
    {0xA002, "PixelXDimension"},
    {0xA003, "PixelYDimension"},
    {0xA005, "InteroperabilityIFDPointer"},
    {0xA402, "ExposureMode"},
    {0xA403, "WhiteBalance"},
    {0xA404, "DigitalZoomRatio"},
    {0xA405, "FocalLengthIn35mmFilm"},
    {0xA406, "SceneCaptureType"},
    {0xA420, "ImageUniqueID"},
    {0xA430, "CameraOwnerName"},
    {0xA431, "BodySerialNumber"},
    {0xA432, "LensSpecification"},
    {0xA433, "LensMake"},
    {0xA434, "LensModel"},
    {0xA435, "LensSerialNumber"},
};
constexpr TagName kGpsTags[] = {
    {0x0000, "GPSVersionID"},    {0x0001, "GPSLatitudeRef"}, {0x0002, "GPSLatitude"},
    {0x0003, "GPSLongitudeRef"}, {0x0004, "GPSLongitude"},   {0x0005, "GPSAltitudeRef"},
    {0x0006, "GPSAltitude"},     {0x0007, "GPSTimeStamp"},   {0x000D, "GPSSpeed"},
    {0x0011, "GPSImgDirection"}, {0x001D, "GPSDateStamp"},
};
constexpr TagName kInteropTags[] = {
    {0x0001, "InteroperabilityIndex"},  {0x0002, "InteroperabilityVersion"},
    {0x1000, "RelatedImageFileFormat"}, {0x1001, "RelatedImageWidth"},
    {0x1002, "RelatedImageLength"},
};

enum class IfdKind { Image, Exif, Gps, Interop };

std::string tag_name(uint16_t id, IfdKind kind) {
  auto search = [&](const auto& table) -> const char* {
    for (const TagName& t : table) {
      if (t.id == id) return t.name;
    }
    return nullptr;
  };
  const char* name = kind == IfdKind::Exif      ? search(kExifTags)
                     : kind == IfdKind::Gps     ? search(kGpsTags)
                     : kind == IfdKind::Interop ? search(kInteropTags)
                                                : search(kImageTags);
  if (name) return name;
  char hex[16];
  std::snprintf(hex, sizeof hex, "0x%04X", id);
  return hex;
}

// Bytes per value of each TIFF type (1 BYTE ... 12 DOUBLE); 0 for unknown types.
size_t type_size(uint16_t type) {
  static constexpr size_t kSizes[] = {0, 1, 1, 2, 4, 8, 1, 1, 2, 4, 8, 4, 8};
  return type < 13 ? kSizes[type] : 0;
}

class TiffReader {
 public:
  TiffReader(const uint8_t* data, size_t size, bool little) : d_(data), n_(size), le_(little) {}

  size_t size() const { return n_; }
  const uint8_t* at(size_t offset) const { return d_ + offset; }
  uint16_t u16(size_t o) const { return le_ ? detail::le16(d_ + o) : detail::be16(d_ + o); }
  uint32_t u32(size_t o) const { return le_ ? detail::le32(d_ + o) : detail::be32(d_ + o); }
  bool little_endian() const { return le_; }

 private:
  const uint8_t* d_;
  size_t n_;
  bool le_;
};

std::string format_number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

// The value of one entry as text; `is_number` set when it is a single integer.
std::string decode_value(const TiffReader& tiff, size_t offset, uint16_t type, uint32_t count,
                         uint16_t tag, bool& is_number) {
  const uint8_t* p = tiff.at(offset);
  const size_t bytes = type_size(type) * count;
  if (type == 2) return detail::text_from_bytes(p, bytes);  // ASCII
  if (type == 7) {                                          // UNDEFINED
    if (tag == 0x9286) return decode_user_comment(p, bytes);
    if (detail::looks_like_text(p, bytes)) return detail::text_from_bytes(p, bytes);
    return detail::hex_preview(p, bytes);
  }
  if (type == 1 && tag >= 0x9C9B && tag <= 0x9C9F) {  // Windows XP tags: UTF-16LE in BYTEs
    std::string out;
    for (size_t i = 0; i + 1 < bytes; i += 2) {
      const uint32_t unit = detail::le16(p + i);
      if (unit == 0) break;
      detail::append_utf8(out, unit >= 0xD800 && unit < 0xE000 ? 0xFFFD : unit);
    }
    return out;
  }
  std::string out;
  const size_t shown = std::min<size_t>(count, kMaxListedValues);
  for (size_t i = 0; i < shown; ++i) {
    const size_t o = offset + i * type_size(type);
    std::string v;
    switch (type) {
      case 1:
        v = std::to_string(tiff.at(o)[0]);
        break;
      case 6:
        v = std::to_string(static_cast<int8_t>(tiff.at(o)[0]));
        break;
      case 3:
        v = std::to_string(tiff.u16(o));
        break;
      case 8:
        v = std::to_string(static_cast<int16_t>(tiff.u16(o)));
        break;
      case 4:
        v = std::to_string(tiff.u32(o));
        break;
      case 9:
        v = std::to_string(static_cast<int32_t>(tiff.u32(o)));
        break;
      case 5:
      case 10: {
        const uint32_t num = tiff.u32(o), den = tiff.u32(o + 4);
        const bool sign = type == 10;
        const double n = sign ? static_cast<int32_t>(num) : static_cast<double>(num);
        const double d = sign ? static_cast<int32_t>(den) : static_cast<double>(den);
        v = (sign ? std::to_string(static_cast<int32_t>(num)) : std::to_string(num)) + "/" +
            (sign ? std::to_string(static_cast<int32_t>(den)) : std::to_string(den));
        if (d != 0) v += " (" + format_number(n / d) + ")";
        break;
      }
      case 11: {
        uint32_t bits = tiff.u32(o);
        float f;
        std::memcpy(&f, &bits, 4);
        v = format_number(f);
        break;
      }
      case 12: {
        const uint64_t hi = tiff.u32(o + (tiff.little_endian() ? 4 : 0));
        const uint64_t lo = tiff.u32(o + (tiff.little_endian() ? 0 : 4));
        const uint64_t bits = (hi << 32) | lo;
        double f;
        std::memcpy(&f, &bits, 8);
        v = format_number(f);
        break;
      }
    }
    if (i) out += ", ";
    out += v;
  }
  if (count > shown) out += ", ... (" + std::to_string(count) + " values)";
  is_number =
      count == 1 && (type == 1 || type == 3 || type == 4 || type == 6 || type == 8 || type == 9);
  return out;
}

class ExifParser {
 public:
  ExifParser(const TiffReader& tiff, bool raw, std::string& error)
      : tiff_(tiff), raw_(raw), error_(error) {}

  // Reads the IFD at `offset` (and the IFDs it points to) into `out`.
  void read_ifd(uint32_t offset, const std::string& name, IfdKind kind,
                std::vector<MetadataValue>& out) {
    if (offset == 0) return;
    if (static_cast<int>(visited_.size()) >= kMaxIfds) return note("too many IFDs; stopped");
    if (!visited_.insert(offset).second) return note("IFD offsets form a loop; stopped");
    if (uint64_t{offset} + 2 > tiff_.size()) return note(name + " offset is outside the block");
    const uint16_t count = tiff_.u16(offset);
    const uint64_t table_end = uint64_t{offset} + 2 + uint64_t{count} * 12;
    if (table_end > tiff_.size()) return note(name + " entries run past the end of the block");

    MetadataValue ifd{name, "", false, {}};
    std::vector<std::pair<uint32_t, IfdKind>> children;
    for (uint16_t i = 0; i < count; ++i) {
      const size_t e = offset + 2 + size_t{i} * 12;
      const uint16_t tag = tiff_.u16(e), type = tiff_.u16(e + 2);
      const uint32_t n = tiff_.u32(e + 4), pointer = tiff_.u32(e + 8);
      MetadataValue value{tag_name(tag, kind), "", false, {}};
      const uint64_t bytes = uint64_t{type_size(type)} * n;
      const uint64_t where = bytes <= 4 ? e + 8 : pointer;
      if (type_size(type) == 0) {
        value.text = "(unknown type " + std::to_string(type) + ")";
      } else if (where + bytes > tiff_.size()) {
        value.text = "(value outside the EXIF block)";
      } else {
        value.text = decode_value(tiff_, where, type, n, tag, value.is_number);
        if (raw_ && (type == 7 || !value.is_number)) {  // the decoded text and the bytes
          MetadataValue decoded = detail::text_value("value", std::move(value.text));
          value.children = {std::move(decoded),
                            detail::text_value("raw", detail::hex_preview(tiff_.at(where), bytes))};
          value.text.clear();
        }
      }
      if (kind == IfdKind::Image && tag == 0x8769) children.push_back({pointer, IfdKind::Exif});
      if (kind == IfdKind::Image && tag == 0x8825) children.push_back({pointer, IfdKind::Gps});
      if (kind == IfdKind::Exif && tag == 0xA005) children.push_back({pointer, IfdKind::Interop});
      ifd.children.push_back(std::move(value));
    }
    if (ifd.children.empty()) ifd.children.push_back(detail::text_value("entries", "none"));
    out.push_back(std::move(ifd));
    for (const auto& [child_offset, child_kind] : children) {
      const char* child_name = child_kind == IfdKind::Exif  ? "Exif"
                               : child_kind == IfdKind::Gps ? "GPS"
                                                            : "Interop";
      read_ifd(child_offset, child_name, child_kind, out);
    }
    if (name == "IFD0" && table_end + 4 <= tiff_.size()) {
      read_ifd(tiff_.u32(table_end), "IFD1", IfdKind::Image, out);  // the thumbnail's IFD
    }
  }

 private:
  void note(const std::string& problem) {
    if (error_.empty()) error_ = problem;
  }

  const TiffReader& tiff_;
  bool raw_;
  std::string& error_;
  std::set<uint32_t> visited_;
};

}  // namespace

std::vector<MetadataValue> parse_exif(const uint8_t* data, size_t size, bool raw_previews,
                                      std::string& error) {
  std::vector<MetadataValue> ifds;
  if (size < 8) {
    error = "EXIF block is too small";
    return ifds;
  }
  const bool little = data[0] == 'I' && data[1] == 'I';
  if (!little && !(data[0] == 'M' && data[1] == 'M')) {
    error = "EXIF block has no TIFF byte-order mark";
    return ifds;
  }
  const TiffReader tiff(data, size, little);
  if (tiff.u16(2) != 42) {
    error = "EXIF block has a bad TIFF magic number";
    return ifds;
  }
  ExifParser parser(tiff, raw_previews, error);
  parser.read_ifd(tiff.u32(4), "IFD0", IfdKind::Image, ifds);
  return ifds;
}

std::string decode_user_comment(const uint8_t* data, size_t size) {
  if (size < 8) return detail::text_from_bytes(data, size);
  const uint8_t* text = data + 8;
  size_t n = size - 8;
  if (std::memcmp(data, "UNICODE\0", 8) != 0) return detail::text_from_bytes(text, n);
  // UTF-16: a BOM decides; else the byte order whose high bytes are mostly zero.
  bool big_endian = true;
  if (n >= 2 && ((text[0] == 0xFE && text[1] == 0xFF) || (text[0] == 0xFF && text[1] == 0xFE))) {
    big_endian = text[0] == 0xFE;
    text += 2;
    n -= 2;
  } else {
    size_t zero_even = 0, zero_odd = 0;
    for (size_t i = 0; i + 1 < n; i += 2) {
      zero_even += text[i] == 0;
      zero_odd += text[i + 1] == 0;
    }
    big_endian = zero_even >= zero_odd;
  }
  std::string out;
  for (size_t i = 0; i + 1 < n; i += 2) {
    uint32_t unit = big_endian ? detail::be16(text + i) : detail::le16(text + i);
    if (unit >= 0xD800 && unit < 0xDC00 && i + 3 < n) {
      const uint32_t low = big_endian ? detail::be16(text + i + 2) : detail::le16(text + i + 2);
      if (low >= 0xDC00 && low < 0xE000) {
        unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
        i += 2;
      } else {
        unit = 0xFFFD;
      }
    } else if (unit >= 0xD800 && unit < 0xE000) {
      unit = 0xFFFD;
    }
    detail::append_utf8(out, unit);
  }
  while (!out.empty() && out.back() == '\0') out.pop_back();
  return out;
}

}  // namespace sd::io
