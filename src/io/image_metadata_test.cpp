#include "io/image_metadata.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <random>

#include "io/fuzz_driver.h"
#include "io/image.h"
#include "io/image_test_util.h"
#include "io/io_test_util.h"

namespace sd::io {
namespace {

using test::Bytes;
using test::expect_error;

void put_be16(Bytes& b, uint16_t v) {
  b.insert(b.end(), {uint8_t(v >> 8), uint8_t(v)});
}
void put_be32(Bytes& b, uint32_t v) {
  b.insert(b.end(), {uint8_t(v >> 24), uint8_t(v >> 16), uint8_t(v >> 8), uint8_t(v)});
}
void put_le32(Bytes& b, uint32_t v) {
  b.insert(b.end(), {uint8_t(v), uint8_t(v >> 8), uint8_t(v >> 16), uint8_t(v >> 24)});
}
void append(Bytes& b, const std::string& s) {
  b.insert(b.end(), s.begin(), s.end());
}

// A big-endian TIFF block: IFD0 {Make, Model, Software, ExifIFDPointer} and an Exif IFD
// {DateTimeOriginal, UserComment (UNICODE, UTF-16BE)}.
Bytes exif_block(const std::string& comment) {
  Bytes tiff = {'M', 'M', 0, 42};
  put_be32(tiff, 8);
  Bytes data;  // values stored after both IFDs
  const uint32_t ifd0 = 8, ifd0_size = 2 + 4 * 12 + 4;
  const uint32_t exif_ifd = ifd0 + ifd0_size, exif_size = 2 + 2 * 12 + 4;
  const uint32_t data_start = exif_ifd + exif_size;
  auto entry = [&](Bytes& out, uint16_t tag, uint16_t type, const Bytes& value) {
    put_be16(out, tag);
    put_be16(out, type);
    const size_t unit = type == 3 ? 2 : type == 4 ? 4 : 1;
    put_be32(out, static_cast<uint32_t>(value.size() / unit));
    if (value.size() <= 4) {
      Bytes v = value;
      v.resize(4, 0);
      out.insert(out.end(), v.begin(), v.end());
    } else {
      put_be32(out, data_start + static_cast<uint32_t>(data.size()));
      data.insert(data.end(), value.begin(), value.end());
    }
  };
  auto ascii = [](const std::string& s) { return Bytes(s.c_str(), s.c_str() + s.size() + 1); };
  put_be16(tiff, 4);
  entry(tiff, 0x010F, 2, ascii("Canon"));
  entry(tiff, 0x0110, 2, ascii("EOS 5D"));
  entry(tiff, 0x0131, 2, ascii("sd-test 1.0"));
  Bytes pointer;
  put_be32(pointer, exif_ifd);
  entry(tiff, 0x8769, 4, pointer);
  put_be32(tiff, 0);
  put_be16(tiff, 2);
  entry(tiff, 0x9003, 2, ascii("2024:01:02 03:04:05"));
  Bytes user = {'U', 'N', 'I', 'C', 'O', 'D', 'E', 0};
  for (unsigned char c : comment) put_be16(user, c);
  entry(tiff, 0x9286, 7, user);
  put_be32(tiff, 0);
  tiff.insert(tiff.end(), data.begin(), data.end());
  return tiff;
}

Bytes jpeg_with_segment(uint8_t marker, const Bytes& payload) {
  Bytes jpeg = encode_image(test::test_image(8, 8, 3), ImageFormat::Jpeg, "");
  Bytes segment = {0xFF, marker};
  put_be16(segment, static_cast<uint16_t>(payload.size() + 2));
  segment.insert(segment.end(), payload.begin(), payload.end());
  jpeg.insert(jpeg.begin() + 2, segment.begin(), segment.end());
  return jpeg;
}

Bytes exif_jpeg(const std::string& comment) {
  Bytes app1 = {'E', 'x', 'i', 'f', 0, 0};
  const Bytes tiff = exif_block(comment);
  app1.insert(app1.end(), tiff.begin(), tiff.end());
  return jpeg_with_segment(0xE1, app1);
}

Bytes png_chunk(const std::string& type, const Bytes& payload) {
  Bytes c;
  put_be32(c, static_cast<uint32_t>(payload.size()));
  append(c, type);
  c.insert(c.end(), payload.begin(), payload.end());
  put_be32(c, static_cast<uint32_t>(crc32(0, c.data() + 4, static_cast<uInt>(payload.size() + 4))));
  return c;
}

// A PNG from the writer with extra chunks inserted after IHDR.
Bytes png_with_chunks(const std::vector<Bytes>& chunks) {
  Bytes png = encode_image(test::test_image(8, 8, 3), ImageFormat::Png, "");
  size_t at = 8 + 12 + 13;
  for (const auto& c : chunks) {
    png.insert(png.begin() + static_cast<std::ptrdiff_t>(at), c.begin(), c.end());
    at += c.size();
  }
  return png;
}

Bytes zlib_bytes(const std::string& text) {
  uLongf size = compressBound(static_cast<uLong>(text.size()));
  Bytes out(size);
  compress(out.data(), &size, reinterpret_cast<const Bytef*>(text.data()),
           static_cast<uLong>(text.size()));
  out.resize(size);
  return out;
}

const MetadataValue* exif_tag(const MetadataEntry& e, const std::string& ifd,
                              const std::string& tag) {
  const MetadataValue* group = e.find(ifd);
  return group ? group->find(tag) : nullptr;
}

TEST(ImageMetadata, PngTextChunksOfEveryKind) {
  Bytes text;
  append(text, std::string("Title\0plain text", 16));
  Bytes ztxt;
  append(ztxt, std::string("Comment\0\0", 9));
  const Bytes z = zlib_bytes("compressed comment");
  ztxt.insert(ztxt.end(), z.begin(), z.end());
  Bytes itxt;
  append(itxt, std::string("parameters\0\1\0en\0Parameter\0", 26));
  const Bytes zi = zlib_bytes("caf\xc3\xa9 prompt\nSteps: 20, Seed: 1, Size: 8x8");
  itxt.insert(itxt.end(), zi.begin(), zi.end());
  const Bytes png =
      png_with_chunks({png_chunk("tEXt", text), png_chunk("zTXt", ztxt), png_chunk("iTXt", itxt)});
  const ImageMetadata m = parse_image_metadata(png.data(), png.size(), "t.png");
  EXPECT_EQ(m.format, "PNG");
  EXPECT_EQ(m.warning, "");
  ASSERT_GE(m.entries.size(), 6u);
  EXPECT_EQ(m.entries[0].name, "IHDR");
  EXPECT_TRUE(m.entries[0].structural);
  EXPECT_EQ(m.entries[1].find("text")->text, "plain text");
  EXPECT_EQ(m.entries[2].find("keyword")->text, "Comment");
  EXPECT_EQ(m.entries[2].find("text")->text, "compressed comment");
  EXPECT_EQ(m.entries[3].find("language")->text, "en");
  EXPECT_EQ(m.parameters, "caf\xc3\xa9 prompt\nSteps: 20, Seed: 1, Size: 8x8");
  EXPECT_EQ(m.parameters_source, "PNG iTXt \"parameters\"");
}

TEST(ImageMetadata, PngLatin1TextBecomesUtf8) {
  Bytes text;
  append(text, std::string("Author\0Jos\xe9", 11));
  const Bytes png = png_with_chunks({png_chunk("tEXt", text)});
  const ImageMetadata m = parse_image_metadata(png.data(), png.size(), "t.png");
  EXPECT_EQ(m.entries[1].find("text")->text, "Jos\xc3\xa9");
}

TEST(ImageMetadata, PngDamagedChunksAreReported) {
  Bytes bad_crc = png_chunk("tEXt", {'k', 0, 'v'});
  bad_crc.back() ^= 1;
  Bytes bad_zlib;
  append(bad_zlib, std::string("k\0\0", 3));
  append(bad_zlib, "not zlib at all");
  const Bytes png = png_with_chunks({bad_crc, png_chunk("zTXt", bad_zlib)});
  const ImageMetadata m = parse_image_metadata(png.data(), png.size(), "t.png");
  EXPECT_NE(m.entries[1].error.find("CRC"), std::string::npos);
  EXPECT_NE(m.entries[2].error.find("corrupt"), std::string::npos) << m.entries[2].error;
  EXPECT_EQ(m.entries.back().name, "IEND");
}

TEST(ImageMetadata, JpegExifTagsAndUnicodeUserComment) {
  const Bytes jpeg = exif_jpeg("a red fox\nSteps: 30, Seed: 7, Size: 8x8");
  const ImageMetadata m = parse_image_metadata(jpeg.data(), jpeg.size(), "e.jpg");
  EXPECT_EQ(m.format, "JPEG");
  EXPECT_EQ(m.width, 8);
  const MetadataEntry* app1 = nullptr;
  for (const auto& e : m.entries) {
    if (e.name == "APP1") app1 = &e;
  }
  ASSERT_NE(app1, nullptr);
  EXPECT_EQ(app1->error, "");
  EXPECT_EQ(exif_tag(*app1, "IFD0", "Make")->text, "Canon");
  EXPECT_EQ(exif_tag(*app1, "IFD0", "Model")->text, "EOS 5D");
  EXPECT_EQ(exif_tag(*app1, "IFD0", "Software")->text, "sd-test 1.0");
  EXPECT_TRUE(exif_tag(*app1, "IFD0", "ExifIFDPointer")->is_number);
  EXPECT_EQ(exif_tag(*app1, "Exif", "DateTimeOriginal")->text, "2024:01:02 03:04:05");
  EXPECT_EQ(exif_tag(*app1, "Exif", "UserComment")->text,
            "a red fox\nSteps: 30, Seed: 7, Size: 8x8");
  EXPECT_EQ(m.parameters, "a red fox\nSteps: 30, Seed: 7, Size: 8x8");
  EXPECT_EQ(m.parameters_source, "EXIF UserComment");
}

TEST(ImageMetadata, RawModeKeepsHexOfUndecodedValues) {
  const Bytes jpeg = exif_jpeg("hi");
  const ImageMetadata m = parse_image_metadata(jpeg.data(), jpeg.size(), "e.jpg", true);
  for (const auto& e : m.entries) {
    if (e.name != "APP1") continue;
    const MetadataValue* comment = exif_tag(e, "Exif", "UserComment");
    ASSERT_NE(comment, nullptr);
    ASSERT_TRUE(comment->is_group());
    EXPECT_EQ(comment->find("value")->text, "hi");
    EXPECT_EQ(comment->find("raw")->text.substr(0, 23), "55 4e 49 43 4f 44 45 00");
  }
}

TEST(ImageMetadata, UserCommentCharsets) {
  auto decode = [](const std::string& bytes) {
    return decode_user_comment(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  };
  EXPECT_EQ(decode(std::string("ASCII\0\0\0hello", 13)), "hello");
  EXPECT_EQ(decode(std::string("UNICODE\0h\0i\0", 12)), "hi");                // LE, guessed
  EXPECT_EQ(decode(std::string("UNICODE\0\0h\0i", 12)), "hi");                // BE, guessed
  EXPECT_EQ(decode(std::string("UNICODE\0\xff\xfe\xe9\0", 12)), "\xc3\xa9");  // LE BOM
  EXPECT_EQ(decode(std::string("UNICODE\0\xfe\xff\xd8\x3d\xde\x00", 14)),
            "\xf0\x9f\x98\x80");  // BE BOM, surrogate pair
  EXPECT_EQ(decode(std::string("\0\0\0\0\0\0\0\0text\0", 13)), "text");
  EXPECT_EQ(decode("abc"), "abc");
}

TEST(ImageMetadata, ExifLoopsAndBadOffsetsDoNotHang) {
  // IFD0 whose Exif pointer points back at IFD0, and whose next-IFD offset is itself.
  Bytes tiff = {'I', 'I', 42, 0, 8, 0, 0, 0};
  tiff.insert(tiff.end(), {1, 0});                                      // one entry
  tiff.insert(tiff.end(), {0x69, 0x87, 4, 0, 1, 0, 0, 0, 8, 0, 0, 0});  // ExifIFDPointer -> 8
  tiff.insert(tiff.end(), {8, 0, 0, 0});                                // next IFD -> 8
  std::string error;
  const auto ifds = parse_exif(tiff.data(), tiff.size(), false, error);
  EXPECT_EQ(ifds.size(), 1u);
  EXPECT_NE(error.find("loop"), std::string::npos) << error;

  Bytes far = {'M', 'M', 0, 42, 0x7f, 0xff, 0xff, 0xff};
  error.clear();
  EXPECT_TRUE(parse_exif(far.data(), far.size(), false, error).empty());
  EXPECT_NE(error.find("outside"), std::string::npos) << error;
}

TEST(ImageMetadata, JpegCommentAndXmp) {
  Bytes com;
  append(com, "just a comment");
  const Bytes jpeg = jpeg_with_segment(0xFE, com);
  ImageMetadata m = parse_image_metadata(jpeg.data(), jpeg.size(), "c.jpg");
  EXPECT_EQ(m.parameters, "");
  bool found = false;
  for (const auto& e : m.entries)
    found |= e.name == "COM" && e.find("text")->text == "just a comment";
  EXPECT_TRUE(found);

  Bytes xmp;
  append(xmp, std::string("http://ns.adobe.com/xap/1.0/\0", 29));
  append(xmp, "<x><sdcpp:parameters>a &amp; b&#10;Steps: 1</sdcpp:parameters></x>");
  const Bytes with_xmp = jpeg_with_segment(0xE1, xmp);
  m = parse_image_metadata(with_xmp.data(), with_xmp.size(), "x.jpg");
  EXPECT_EQ(m.parameters, "a & b\nSteps: 1");
  EXPECT_EQ(m.parameters_source, "XMP sdcpp:parameters");
}

TEST(ImageMetadata, WebpExifChunk) {
  const Bytes simple = encode_image(test::test_image(8, 8, 3), ImageFormat::Webp, "");
  const Bytes tiff = exif_block("webp comment");
  Bytes webp;
  append(webp, "RIFF");
  put_le32(webp, 0);
  append(webp, "WEBPVP8X");
  put_le32(webp, 10);
  webp.insert(webp.end(), {0x08, 0, 0, 0, 7, 0, 0, 7, 0, 0});
  webp.insert(webp.end(), simple.begin() + 12, simple.end());
  append(webp, "EXIF");
  put_le32(webp, static_cast<uint32_t>(tiff.size()));
  webp.insert(webp.end(), tiff.begin(), tiff.end());
  if (tiff.size() & 1) webp.push_back(0);
  const uint32_t riff = static_cast<uint32_t>(webp.size() - 8);
  for (int i = 0; i < 4; ++i) webp[4 + i] = static_cast<uint8_t>(riff >> (8 * i));

  const ImageMetadata m = parse_image_metadata(webp.data(), webp.size(), "e.webp");
  EXPECT_EQ(m.format, "WebP");
  EXPECT_EQ(m.width, 8);
  EXPECT_EQ(m.warning, "");
  EXPECT_EQ(m.parameters, "webp comment");
  EXPECT_EQ(decode_image(webp.data(), webp.size(), "e.webp").width, 8);
}

TEST(ImageMetadata, NonImagesAreErrorsAndTruncationIsAWarning) {
  const Bytes text = {'h', 'i'};
  expect_error([&] { parse_image_metadata(text.data(), text.size(), "t.txt"); },
               {"t.txt: ", "not a PNG, JPEG or WebP"});
  expect_error([] { read_image_metadata("/nonexistent/x.png"); }, {"/nonexistent/x.png"});
  const Bytes png = encode_image(test::test_image(8, 8, 3), ImageFormat::Png, "params");
  const ImageMetadata m = parse_image_metadata(png.data(), png.size() - 5, "t.png");
  EXPECT_NE(m.warning.find("truncated"), std::string::npos) << m.warning;
  EXPECT_EQ(m.parameters, "params");
}

// Truncations at every length and random byte changes never crash the reader.
void fuzz_metadata(const Bytes& file, const std::string& name, uint32_t seed) {
  auto parse = [&](const Bytes& bytes, bool raw) {
    try {
      const ImageMetadata m = parse_image_metadata(bytes.data(), bytes.size(), name, raw);
      EXPECT_FALSE(m.format.empty());
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(name + ": ", 0), 0u) << e.what();
    }
  };
  for (size_t n = 0; n <= file.size(); ++n) parse(Bytes(file.begin(), file.begin() + n), n & 1);
  std::mt19937 rng(seed);
  const int iterations = test::fuzz_iterations(1500);
  for (int i = 0; i < iterations; ++i) {
    Bytes b = file;
    const int changes = 1 + static_cast<int>(rng() % 4);
    for (int c = 0; c < changes; ++c) {
      const size_t at = rng() % b.size();
      b[at] = rng() % 3 == 0 ? static_cast<uint8_t>(rng() % 2 ? 0xff : 0x00)
                             : static_cast<uint8_t>(b[at] ^ (1u << (rng() % 8)));
    }
    parse(b, i & 1);
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(ImageMetadata, CorruptFilesNeverCrashTheReader) {
  const std::string params = "prompt\nNegative prompt: n\nSteps: 1, Seed: 2, Size: 8x8";
  Bytes ztxt;
  append(ztxt, std::string("parameters\0\0", 12));
  const Bytes z = zlib_bytes(params);
  ztxt.insert(ztxt.end(), z.begin(), z.end());
  fuzz_metadata(png_with_chunks({png_chunk("zTXt", ztxt)}), "f.png", 1);
  fuzz_metadata(exif_jpeg(params), "f.jpg", 2);
  fuzz_metadata(encode_image(test::test_image(8, 8, 3), ImageFormat::Webp, params), "f.webp", 3);
}

}  // namespace
}  // namespace sd::io
