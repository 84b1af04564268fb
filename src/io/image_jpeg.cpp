// JPEG through libjpeg(-turbo). Its errors (and the warnings that mean the data is
// truncated or corrupt) longjmp back into the small functions below, which set the jump
// point and hold no C++ objects; the caller turns the saved message into an sd::Error.
#include <cstddef>
#include <cstdio>
// jpeglib.h needs size_t and FILE declared first.
#include <jerror.h>
#include <jpeglib.h>

#include <algorithm>
#include <csetjmp>
#include <cstdlib>
#include <cstring>

#include "io/file_error.h"
#include "io/image_codecs.h"
#include "tensor/error.h"

namespace sd::io::detail {

namespace {

struct JpegErrors {
  jpeg_error_mgr mgr;  // first, so libjpeg's pointer to it is a pointer to us
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = "unknown libjpeg error";
};

[[noreturn]] void on_error(j_common_ptr cinfo) {
  auto* errors = reinterpret_cast<JpegErrors*>(cinfo->err);
  cinfo->err->format_message(cinfo, errors->message);
  std::longjmp(errors->jump, 1);
}

// libjpeg only warns about a file that ends early (it pads it with gray) or whose entropy
// data is damaged; those are errors here, so a broken init image is never used silently.
// Warnings that leave the pixels intact pass.
void on_message(j_common_ptr cinfo, int level) {
  if (level >= 0) return;  // trace messages
  switch (cinfo->err->msg_code) {
    case JWRN_EXTRANEOUS_DATA:
    case JWRN_ADOBE_XFORM:
    case JWRN_JFIF_MAJOR:
    case JWRN_BOGUS_ICC:
      return;
    default:
      on_error(cinfo);
  }
}

struct JpegReader {
  jpeg_decompress_struct cinfo{};
  JpegErrors errors;
  bool created = false;
  ~JpegReader() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

bool read_header(JpegReader& r, const uint8_t* data, size_t size) {
  r.cinfo.err = jpeg_std_error(&r.errors.mgr);
  r.errors.mgr.error_exit = on_error;
  r.errors.mgr.emit_message = on_message;
  if (setjmp(r.errors.jump)) return false;
  jpeg_create_decompress(&r.cinfo);
  r.created = true;
  r.cinfo.mem->max_memory_to_use = 1L << 30;  // progressive files buffer every coefficient
  jpeg_mem_src(&r.cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&r.cinfo, TRUE);
  return true;
}

// Called once the size is known to be sane: a progressive file's whole coefficient
// buffer is allocated here.
bool start_decoding(JpegReader& r) {
  if (setjmp(r.errors.jump)) return false;
  switch (r.cinfo.jpeg_color_space) {
    case JCS_GRAYSCALE:
      r.cinfo.out_color_space = JCS_GRAYSCALE;
      break;
    case JCS_CMYK:
    case JCS_YCCK:
      r.cinfo.out_color_space = JCS_CMYK;
      break;
    default:
      r.cinfo.out_color_space = JCS_RGB;
      break;
  }
  jpeg_start_decompress(&r.cinfo);
  return true;
}

bool read_rows(JpegReader& r, uint8_t* pixels, size_t stride) {
  if (setjmp(r.errors.jump)) return false;
  while (r.cinfo.output_scanline < r.cinfo.output_height) {
    JSAMPROW row = pixels + r.cinfo.output_scanline * stride;
    jpeg_read_scanlines(&r.cinfo, &row, 1);
  }
  jpeg_finish_decompress(&r.cinfo);
  return true;
}

// Adobe writes CMYK inverted (255 = no ink), the form libjpeg hands back.
void cmyk_to_rgb(const uint8_t* cmyk, size_t n, uint8_t* rgb) {
  for (size_t i = 0; i < n; ++i) {
    const int k = cmyk[i * 4 + 3];
    for (int c = 0; c < 3; ++c)
      rgb[i * 3 + c] = static_cast<uint8_t>((cmyk[i * 4 + c] * k + 127) / 255);
  }
}

struct JpegWriter {
  jpeg_compress_struct cinfo{};
  JpegErrors errors;
  bool created = false;
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  ~JpegWriter() {
    if (created) jpeg_destroy_compress(&cinfo);
    std::free(buffer);
  }
};

bool write_all(JpegWriter& w, const uint8_t* pixels, int width, int height, int channels,
               int quality, const uint8_t* comment, unsigned comment_size) {
  w.cinfo.err = jpeg_std_error(&w.errors.mgr);
  w.errors.mgr.error_exit = on_error;
  if (setjmp(w.errors.jump)) return false;
  jpeg_create_compress(&w.cinfo);
  w.created = true;
  jpeg_mem_dest(&w.cinfo, &w.buffer, &w.size);
  w.cinfo.image_width = static_cast<JDIMENSION>(width);
  w.cinfo.image_height = static_cast<JDIMENSION>(height);
  w.cinfo.input_components = channels;
  w.cinfo.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&w.cinfo);
  jpeg_set_quality(&w.cinfo, quality, TRUE);
  if (channels == 3 && quality > 90) {  // stable-diffusion.cpp's writer: no chroma subsampling
    for (int c = 0; c < 3; ++c) {
      w.cinfo.comp_info[c].h_samp_factor = 1;
      w.cinfo.comp_info[c].v_samp_factor = 1;
    }
  }
  jpeg_start_compress(&w.cinfo, TRUE);
  if (comment) jpeg_write_marker(&w.cinfo, JPEG_COM, comment, comment_size);
  const size_t stride = static_cast<size_t>(width) * channels;
  while (w.cinfo.next_scanline < w.cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(pixels + w.cinfo.next_scanline * stride);
    jpeg_write_scanlines(&w.cinfo, &row, 1);
  }
  jpeg_finish_compress(&w.cinfo);
  return true;
}

}  // namespace

Image decode_jpeg(const uint8_t* data, size_t size, const std::string& name, int max_side) {
  JpegReader r;
  if (!read_header(r, data, size)) {
    fail_file(name, format("corrupt or unsupported JPEG: %s", r.errors.message));
  }
  check_image_size(r.cinfo.image_width, r.cinfo.image_height, name, max_side);
  if (!start_decoding(r)) fail_file(name, format("corrupt JPEG: %s", r.errors.message));
  const int components = r.cinfo.output_components;
  SD_CHECK(components == 1 || components == 3 || components == 4,
           "%s: JPEG decodes to %d components, expected 1, 3 or 4", name.c_str(), components);
  const size_t stride = static_cast<size_t>(r.cinfo.output_width) * components;
  std::vector<uint8_t> decoded(stride * r.cinfo.output_height);
  if (!read_rows(r, decoded.data(), stride)) {
    fail_file(name, format("corrupt JPEG: %s", r.errors.message));
  }
  Image image{static_cast<int>(r.cinfo.output_width),
              static_cast<int>(r.cinfo.output_height),
              components == 1 ? 1 : 3,
              {}};
  if (components == 4) {
    image.pixels.resize(image.size());
    cmyk_to_rgb(decoded.data(), static_cast<size_t>(image.width) * image.height,
                image.pixels.data());
  } else {
    image.pixels = std::move(decoded);
  }
  return image;
}

std::vector<uint8_t> encode_jpeg(const Image& image, const std::string& parameters, int quality) {
  check_writable(image);
  const Image rgb = image.channels == 4 ? to_channels(image, 3) : Image{};
  const Image& source = image.channels == 4 ? rgb : image;

  // "parameters\0<text>\0", cut so the whole segment fits its 16-bit length.
  std::vector<uint8_t> comment;
  if (!parameters.empty()) {
    constexpr size_t kMaxPayload = 65533;
    static const char kLabel[] = "parameters";
    comment.assign(kLabel, kLabel + sizeof kLabel);
    const size_t room = kMaxPayload - comment.size() - 1;
    comment.insert(
        comment.end(), parameters.begin(),
        parameters.begin() + static_cast<std::ptrdiff_t>(std::min(room, parameters.size())));
    comment.push_back(0);
  }

  JpegWriter w;
  if (!write_all(w, source.pixels.data(), source.width, source.height, source.channels, quality,
                 comment.empty() ? nullptr : comment.data(),
                 static_cast<unsigned>(comment.size()))) {
    fail("[write_image] JPEG encoding failed: %s", w.errors.message);
  }
  return std::vector<uint8_t>(w.buffer, w.buffer + w.size);
}

}  // namespace sd::io::detail
