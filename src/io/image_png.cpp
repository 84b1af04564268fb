// PNG through libpng. libpng reports errors by longjmp, so every libpng call runs inside
// one of the small functions below that set the jump point and hold no C++ objects: the
// jump then skips no destructor, and the caller turns the saved message into an sd::Error.
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>

#include "io/file_error.h"
#include "io/image_codecs.h"
#include "tensor/error.h"

namespace sd::io::detail {

namespace {

struct PngState {
  png_structp png = nullptr;
  png_infop info = nullptr;
  bool writing = false;
  char message[256] = "unknown libpng error";
  // Reading: the file's bytes and how far libpng has read.
  const uint8_t* data = nullptr;
  size_t size = 0, pos = 0;
  // Writing: where the encoded bytes go.
  std::vector<uint8_t>* out = nullptr;

  ~PngState() {
    if (!png) return;
    if (writing) {
      png_destroy_write_struct(&png, &info);
    } else {
      png_destroy_read_struct(&png, &info, nullptr);
    }
  }
};

[[noreturn]] void on_error(png_structp png, png_const_charp message) {
  auto* state = static_cast<PngState*>(png_get_error_ptr(png));
  std::snprintf(state->message, sizeof state->message, "%s", message);
  png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp) {}  // ancillary problems: the image still reads

void read_bytes(png_structp png, png_bytep out, png_size_t length) {
  auto* state = static_cast<PngState*>(png_get_io_ptr(png));
  if (length > state->size - state->pos) png_error(png, "file is truncated");
  std::memcpy(out, state->data + state->pos, length);
  state->pos += length;
}

void write_bytes(png_structp png, png_bytep data, png_size_t length) {
  auto* state = static_cast<PngState*>(png_get_io_ptr(png));
  bool ok = true;
  try {
    state->out->insert(state->out->end(), data, data + length);
  } catch (...) {
    ok = false;
  }
  if (!ok) png_error(png, "out of memory");
}

void flush_nothing(png_structp) {}

// Reads the header and sets the transforms that give 8-bit gray, RGB or RGBA.
bool read_header(PngState& s, png_uint_32& width, png_uint_32& height, int& channels) {
  if (setjmp(png_jmpbuf(s.png))) return false;
  png_set_read_fn(s.png, &s, read_bytes);
  png_set_user_limits(s.png, kMaxImageSide, kMaxImageSide);
  png_read_info(s.png, s.info);
  width = png_get_image_width(s.png, s.info);
  height = png_get_image_height(s.png, s.info);
  const int color = png_get_color_type(s.png, s.info);
  if (png_get_bit_depth(s.png, s.info) == 16) png_set_strip_16(s.png);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(s.png);
  if (color == PNG_COLOR_TYPE_GRAY) png_set_expand_gray_1_2_4_to_8(s.png);
  if (png_get_valid(s.png, s.info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(s.png);
  // Gray with alpha has no Image layout of its own: it becomes RGBA.
  const bool has_alpha =
      (color & PNG_COLOR_MASK_ALPHA) || png_get_valid(s.png, s.info, PNG_INFO_tRNS);
  if (!(color & PNG_COLOR_MASK_COLOR) && has_alpha) png_set_gray_to_rgb(s.png);
  png_set_interlace_handling(s.png);
  png_read_update_info(s.png, s.info);
  channels = png_get_channels(s.png, s.info);
  return true;
}

// Reads every row, then the chunks after the image, so a truncated file is an error.
bool read_rows(PngState& s, png_bytepp rows) {
  if (setjmp(png_jmpbuf(s.png))) return false;
  png_read_image(s.png, rows);
  png_read_end(s.png, nullptr);
  return true;
}

bool write_all(PngState& s, const Image& image, png_textp text, png_bytepp rows) {
  if (setjmp(png_jmpbuf(s.png))) return false;
  png_set_write_fn(s.png, &s, write_bytes, flush_nothing);
  const int color = image.channels == 1   ? PNG_COLOR_TYPE_GRAY
                    : image.channels == 3 ? PNG_COLOR_TYPE_RGB
                                          : PNG_COLOR_TYPE_RGBA;
  png_set_IHDR(s.png, s.info, static_cast<png_uint_32>(image.width),
               static_cast<png_uint_32>(image.height), 8, color, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (text) png_set_text(s.png, s.info, text, 1);
  png_write_info(s.png, s.info);
  png_write_image(s.png, rows);
  png_write_end(s.png, nullptr);
  return true;
}

}  // namespace

Image decode_png(const uint8_t* data, size_t size, const std::string& name, int max_side) {
  PngState s;
  s.data = data;
  s.size = size;
  s.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &s, on_error, on_warning);
  if (s.png) s.info = png_create_info_struct(s.png);
  if (!s.png || !s.info) fail_file(name, "cannot start the PNG decoder (out of memory)");

  png_uint_32 width = 0, height = 0;
  int channels = 0;
  if (!read_header(s, width, height, channels)) {
    fail_file(name, format("corrupt or unsupported PNG: %s", s.message));
  }
  check_image_size(width, height, name, max_side);
  SD_CHECK(channels == 1 || channels == 3 || channels == 4,
           "%s: PNG decodes to %d channels, expected 1, 3 or 4", name.c_str(), channels);

  Image image{static_cast<int>(width), static_cast<int>(height), channels, {}};
  image.pixels.resize(image.size());
  std::vector<png_bytep> rows(height);
  for (png_uint_32 y = 0; y < height; ++y) {
    rows[y] = image.pixels.data() + static_cast<size_t>(y) * width * channels;
  }
  if (!read_rows(s, rows.data())) fail_file(name, format("corrupt PNG: %s", s.message));
  return image;
}

std::vector<uint8_t> encode_png(const Image& image, const std::string& parameters) {
  check_writable(image);
  PngState s;
  s.writing = true;
  std::vector<uint8_t> out;
  s.out = &out;
  s.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &s, on_error, on_warning);
  if (s.png) s.info = png_create_info_struct(s.png);
  SD_CHECK(s.png && s.info, "[write_image] cannot start the PNG encoder (out of memory)");

  char keyword[] = "parameters";
  png_text text{};
  text.compression = PNG_TEXT_COMPRESSION_NONE;
  text.key = keyword;
  text.text = const_cast<char*>(parameters.c_str());
  text.text_length = parameters.size();

  std::vector<png_bytep> rows(static_cast<size_t>(image.height));
  const size_t stride = static_cast<size_t>(image.width) * image.channels;
  for (int y = 0; y < image.height; ++y) {
    rows[y] = const_cast<png_bytep>(image.pixels.data() + y * stride);
  }
  if (!write_all(s, image, parameters.empty() ? nullptr : &text, rows.data())) {
    fail("[write_image] PNG encoding failed: %s", s.message);
  }
  return out;
}

}  // namespace sd::io::detail
