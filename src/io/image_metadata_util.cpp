#include "io/image_metadata_util.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace sd::io::detail {

std::string hex_preview(const uint8_t* data, size_t size, size_t limit) {
  std::string out;
  const size_t n = std::min(size, limit);
  out.reserve(n * 3 + 4);
  for (size_t i = 0; i < n; ++i) {
    char hex[4];
    std::snprintf(hex, sizeof hex, i ? " %02x" : "%02x", data[i]);
    out += hex;
  }
  if (size > limit) out += " ...";
  return out;
}

namespace {

// Length of the valid UTF-8 sequence at p (1-4), or 0 if it is not one.
size_t utf8_sequence(const uint8_t* p, size_t left) {
  const uint8_t b = p[0];
  size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xe ? 3 : (b >> 3) == 0x1e ? 4 : 0;
  if (n == 0 || n > left) return 0;
  for (size_t i = 1; i < n; ++i) {
    if ((p[i] & 0xc0) != 0x80) return 0;
  }
  if (n == 2 && b < 0xc2) return 0;  // overlong
  return n;
}

}  // namespace

std::string text_from_bytes(const uint8_t* data, size_t size) {
  while (size > 0 && data[size - 1] == 0) --size;
  bool utf8 = true;
  for (size_t i = 0; i < size && utf8;) {
    const size_t n = utf8_sequence(data + i, size - i);
    utf8 = n != 0;
    i += n;
  }
  if (utf8) return std::string(reinterpret_cast<const char*>(data), size);
  std::string out;
  out.reserve(size * 2);
  for (size_t i = 0; i < size; ++i) {
    const uint8_t b = data[i];
    if (b < 0x80) {
      out += static_cast<char>(b);
    } else {
      out += static_cast<char>(0xc0 | (b >> 6));
      out += static_cast<char>(0x80 | (b & 0x3f));
    }
  }
  return out;
}

bool looks_like_text(const uint8_t* data, size_t size) {
  while (size > 0 && data[size - 1] == 0) --size;
  if (size == 0) return true;
  size_t printable = 0;
  for (size_t i = 0; i < size; ++i) {
    const uint8_t b = data[i];
    if (b >= 0x20 || b == '\n' || b == '\r' || b == '\t') ++printable;
  }
  return printable == size;
}

bool inflate_zlib(const uint8_t* data, size_t size, size_t max_output, std::string& out,
                  std::string& error) {
  out.clear();
  z_stream z{};
  if (inflateInit(&z) != Z_OK) {
    error = "cannot start zlib";
    return false;
  }
  z.next_in = const_cast<Bytef*>(data);
  z.avail_in = static_cast<uInt>(std::min<size_t>(size, 0xffffffffu));
  char buffer[16384];
  int status = Z_OK;
  while (status == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof buffer;
    status = inflate(&z, Z_NO_FLUSH);
    const size_t produced = sizeof buffer - z.avail_out;
    if (out.size() + produced > max_output) {
      error = "decompressed text is larger than " + std::to_string(max_output >> 20) + " MiB";
      inflateEnd(&z);
      return false;
    }
    out.append(buffer, produced);
    // No progress possible: the input ended before the stream did.
    if (status == Z_BUF_ERROR || (status == Z_OK && produced == 0 && z.avail_in == 0)) {
      status = Z_BUF_ERROR;
    }
  }
  inflateEnd(&z);
  if (status != Z_STREAM_END) {
    error = status == Z_BUF_ERROR ? "compressed text is truncated"
                                  : std::string("compressed text is corrupt (") +
                                        (z.msg ? z.msg : "zlib error") + ")";
    return false;
  }
  return true;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

namespace {

std::string xml_unescape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    const size_t semi = s.find(';', i);
    if (semi == std::string::npos || semi - i > 10) {
      out += s[i];
      continue;
    }
    const std::string name = s.substr(i + 1, semi - i - 1);
    if (name == "amp")
      out += '&';
    else if (name == "lt")
      out += '<';
    else if (name == "gt")
      out += '>';
    else if (name == "quot")
      out += '"';
    else if (name == "apos")
      out += '\'';
    else if (name.size() > 1 && name[0] == '#') {
      const bool hex = name[1] == 'x' || name[1] == 'X';
      char* end = nullptr;
      const unsigned long cp = std::strtoul(name.c_str() + (hex ? 2 : 1), &end, hex ? 16 : 10);
      if (!end || *end != '\0' || cp > 0x10ffff) {
        out += s.substr(i, semi - i + 1);
      } else {
        append_utf8(out, static_cast<uint32_t>(cp));
      }
    } else {
      out += s.substr(i, semi - i + 1);
    }
    i = semi;
  }
  return out;
}

}  // namespace

std::string xml_element_text(const std::string& xml, const std::string& name) {
  const std::string open = "<" + name;
  size_t start = xml.find(open);
  while (start != std::string::npos) {
    const size_t after = start + open.size();
    if (after < xml.size() && (xml[after] == '>' || xml[after] == ' ' || xml[after] == '\t' ||
                               xml[after] == '\n' || xml[after] == '\r')) {
      break;
    }
    start = xml.find(open, after);
  }
  if (start == std::string::npos) return "";
  const size_t content = xml.find('>', start);
  if (content == std::string::npos || xml[content - 1] == '/') return "";
  const size_t close = xml.find("</" + name + ">", content);
  if (close == std::string::npos) return "";
  return xml_unescape(xml.substr(content + 1, close - content - 1));
}

}  // namespace sd::io::detail
