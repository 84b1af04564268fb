// WebP through libwebp. libwebp decodes from a buffer and reports errors by status, but it
// accepts a file whose trailing chunks are cut off; the RIFF container is checked here
// first so a truncated file is an error, not an image without its metadata.
// With parameters, the writer wraps libwebp's simple-format output in the extended format
// (VP8X header, image chunks, XMP chunk); that needs no muxer library.
#include <webp/decode.h>
#include <webp/encode.h>

#include <cstring>

#include "io/file_error.h"
#include "io/image_codecs.h"
#include "tensor/error.h"

namespace sd::io::detail {

namespace {

uint32_t read_le32(const uint8_t* p) {
  return p[0] | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}

void append_le(std::vector<uint8_t>& out, uint32_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

struct Chunk {
  std::string fourcc;
  const uint8_t* payload;
  uint32_t size;
};

// The chunks of a RIFF/WEBP file; throws naming the file when the container is damaged.
std::vector<Chunk> riff_chunks(const uint8_t* data, size_t size, const std::string& name) {
  if (size < 12) fail_file(name, "WebP file is truncated (no RIFF header)");
  const uint64_t riff_end = uint64_t{read_le32(data + 4)} + 8;
  if (riff_end > size) {
    fail_file(name, format("WebP file is truncated: the RIFF header promises %llu bytes, the "
                           "file has %zu",
                           static_cast<unsigned long long>(riff_end), size));
  }
  std::vector<Chunk> chunks;
  uint64_t pos = 12;
  while (pos < riff_end) {
    if (riff_end - pos < 8) fail_file(name, "WebP file has a cut-off chunk header");
    const uint32_t chunk_size = read_le32(data + pos + 4);
    const uint64_t padded = uint64_t{chunk_size} + (chunk_size & 1u);
    if (padded > riff_end - pos - 8) {
      // A missing pad byte after the last chunk is a common writer slip; accept exactly that.
      if (!(pos + 8 + chunk_size == riff_end && (chunk_size & 1u))) {
        fail_file(name, format("WebP chunk '%.4s' of %u bytes runs past the end of the file",
                               reinterpret_cast<const char*>(data + pos), chunk_size));
      }
    }
    chunks.push_back(
        {std::string(reinterpret_cast<const char*>(data + pos), 4), data + pos + 8, chunk_size});
    pos += 8 + padded;
  }
  if (chunks.empty()) fail_file(name, "WebP file holds no chunks");
  return chunks;
}

}  // namespace

Image decode_webp(const uint8_t* data, size_t size, const std::string& name, int max_side) {
  riff_chunks(data, size, name);
  WebPBitstreamFeatures features;
  const VP8StatusCode status = WebPGetFeatures(data, size, &features);
  if (status != VP8_STATUS_OK) {
    fail_file(name,
              format("corrupt or unsupported WebP (libwebp status %d)", static_cast<int>(status)));
  }
  if (features.has_animation) {
    fail_file(name, "animated WebP is not supported; extract one frame to PNG first");
  }
  check_image_size(features.width, features.height, name, max_side);
  Image image{features.width, features.height, features.has_alpha ? 4 : 3, {}};
  image.pixels.resize(image.size());
  const int stride = image.width * image.channels;
  const uint8_t* ok =
      image.channels == 4
          ? WebPDecodeRGBAInto(data, size, image.pixels.data(), image.size(), stride)
          : WebPDecodeRGBInto(data, size, image.pixels.data(), image.size(), stride);
  if (!ok) fail_file(name, "corrupt WebP: the image data does not decode");
  return image;
}

std::string xml_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string parameters_xmp_packet(const std::string& parameters) {
  return "<?xpacket begin=\"\" id=\"W5M0MpCehiHzreSzNTczkc9d\"?>\n"
         "<x:xmpmeta xmlns:x=\"adobe:ns:meta/\">\n"
         "  <rdf:RDF xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\">\n"
         "    <rdf:Description "
         "xmlns:sdcpp=\"https://github.com/leejet/stable-diffusion.cpp/ns/1.0/\">\n"
         "      <sdcpp:parameters>" +
         xml_escape(parameters) +
         "</sdcpp:parameters>\n"
         "    </rdf:Description>\n"
         "  </rdf:RDF>\n"
         "</x:xmpmeta>\n"
         "<?xpacket end=\"w\"?>";
}

std::vector<uint8_t> encode_webp(const Image& image, const std::string& parameters, int quality) {
  check_writable(image);
  const Image rgb = image.channels == 1 ? to_channels(image, 3) : Image{};
  const Image& source = image.channels == 1 ? rgb : image;
  uint8_t* encoded = nullptr;
  const int stride = source.width * source.channels;
  const size_t encoded_size =
      source.channels == 4 ? WebPEncodeRGBA(source.pixels.data(), source.width, source.height,
                                            stride, static_cast<float>(quality), &encoded)
                           : WebPEncodeRGB(source.pixels.data(), source.width, source.height,
                                           stride, static_cast<float>(quality), &encoded);
  std::vector<uint8_t> simple(encoded, encoded + (encoded ? encoded_size : 0));
  WebPFree(encoded);
  SD_CHECK(!simple.empty(), "[write_image] WebP encoding of a %d x %d image failed", source.width,
           source.height);
  if (parameters.empty()) return simple;

  bool has_alpha = false;
  std::vector<uint8_t> body;  // the extended file after "RIFF" size "WEBP"
  for (const Chunk& c : riff_chunks(simple.data(), simple.size(), "[write_image] WebP encoder")) {
    if (c.fourcc == "VP8X") continue;  // replaced by ours
    if (c.fourcc == "ALPH") has_alpha = true;
    // VP8L: signature byte, then 14+14 bits of size, then the alpha-is-used bit.
    if (c.fourcc == "VP8L" && c.size >= 5) has_alpha = (read_le32(c.payload + 1) >> 28) & 1u;
    body.insert(body.end(), c.fourcc.begin(), c.fourcc.end());
    append_le(body, c.size, 4);
    body.insert(body.end(), c.payload, c.payload + c.size);
    if (c.size & 1u) body.push_back(0);
  }
  const std::string xmp = parameters_xmp_packet(parameters);
  body.insert(body.end(), {'X', 'M', 'P', ' '});
  append_le(body, static_cast<uint32_t>(xmp.size()), 4);
  body.insert(body.end(), xmp.begin(), xmp.end());
  if (xmp.size() & 1u) body.push_back(0);

  std::vector<uint8_t> out = {'R', 'I', 'F', 'F', 0,   0,   0,   0,
                              'W', 'E', 'B', 'P', 'V', 'P', '8', 'X'};
  append_le(out, 10, 4);
  out.push_back(static_cast<uint8_t>((has_alpha ? 0x10 : 0) | 0x04));  // alpha, XMP flags
  append_le(out, 0, 3);
  append_le(out, static_cast<uint32_t>(source.width - 1), 3);
  append_le(out, static_cast<uint32_t>(source.height - 1), 3);
  out.insert(out.end(), body.begin(), body.end());
  SD_CHECK(out.size() - 8 <= 0xffffffffu, "[write_image] WebP file would exceed 4 GiB");
  const auto riff_size = static_cast<uint32_t>(out.size() - 8);
  for (int i = 0; i < 4; ++i) out[4 + i] = static_cast<uint8_t>(riff_size >> (8 * i));
  return out;
}

}  // namespace sd::io::detail
