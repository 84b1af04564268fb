#include "io/image.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "io/fuzz_driver.h"
#include "io/image_metadata.h"
#include "io/image_test_util.h"
#include "io/io_test_util.h"

namespace sd::io {
namespace {

using test::difference;
using test::expect_error;
using test::TempDir;
using test::test_image;

const std::string kParameters =
    "a photo of a cat, <lora:x:0.5> & \"quotes\" 'apostrophes' <tags>\n"
    "Negative prompt: blurry, ugly\n"
    "Steps: 20, CFG scale: 7.000000, Seed: 42, Size: 64x48, Sampler: euler_a discrete";

Image round_trip(const Image& image, const std::string& name, const std::string& parameters = "",
                 int quality = 90) {
  TempDir dir;
  write_image(dir.file(name), image, parameters, quality);
  return read_image(dir.file(name));
}

TEST(ImageIo, PngRoundTripIsExactForEveryChannelCount) {
  for (int channels : {1, 3, 4}) {
    const Image image = test_image(37, 23, channels, static_cast<uint32_t>(channels));
    const Image back = round_trip(image, "a.png");
    EXPECT_EQ(back.width, 37);
    EXPECT_EQ(back.height, 23);
    EXPECT_EQ(back.channels, channels);
    EXPECT_EQ(back.pixels, image.pixels) << channels << " channels";
  }
}

// A caller's side limit is checked from the header of every format, before decoding.
TEST(ImageIo, ASideLimitRefusesLargerImagesOfEveryFormat) {
  const Image image = test_image(40, 24, 3, 1);
  for (ImageFormat format : {ImageFormat::Png, ImageFormat::Jpeg, ImageFormat::Webp}) {
    const std::vector<uint8_t> bytes = encode_image(image, format, "", 90);
    EXPECT_EQ(decode_image(bytes.data(), bytes.size(), "in", 40).width, 40);
    expect_error([&] { decode_image(bytes.data(), bytes.size(), "in", 32); },
                 {"in: image is 40 x 24, larger than the 32 pixels a side"});
  }
}

TEST(ImageIo, JpegRoundTripIsCloseAndDropsAlpha) {
  for (int channels : {1, 3, 4}) {
    const Image image = test_image(64, 48, channels, 7);
    const Image back = round_trip(image, "a.jpg", "", 95);
    const Image expected = channels == 4 ? to_channels(image, 3) : image;
    ASSERT_EQ(back.channels, expected.channels);
    const auto d = difference(back, expected);
    EXPECT_LT(d.mean, 3.0) << channels << " channels";
    EXPECT_LT(d.max, 40) << channels << " channels";
  }
}

TEST(ImageIo, JpegQualityChangesSize) {
  const Image image = test_image(64, 64, 3, 3);
  const auto low = encode_image(image, ImageFormat::Jpeg, "", 20);
  const auto high = encode_image(image, ImageFormat::Jpeg, "", 100);
  EXPECT_LT(low.size(), high.size());
}

TEST(ImageIo, WebpRoundTripIsCloseAndKeepsAlpha) {
  for (int channels : {1, 3, 4}) {
    const Image image = test_image(40, 30, channels, 11);
    const Image back = round_trip(image, "a.webp", "", 95);
    const Image expected = channels == 1 ? to_channels(image, 3) : image;
    ASSERT_EQ(back.channels, expected.channels) << channels;
    const auto d = difference(back, expected);
    EXPECT_LT(d.mean, 4.0) << channels << " channels";
    EXPECT_LT(d.max, 48) << channels << " channels";
  }
}

TEST(ImageIo, WebpWithParametersStillDecodesTheSamePixels) {
  const Image image = test_image(40, 30, 4, 5);
  const auto plain = decode_image(encode_image(image, ImageFormat::Webp, "").data(),
                                  encode_image(image, ImageFormat::Webp, "").size(), "plain");
  const auto with = encode_image(image, ImageFormat::Webp, kParameters);
  const Image tagged = decode_image(with.data(), with.size(), "tagged");
  EXPECT_EQ(tagged.pixels, plain.pixels);
}

// A 2 x 2 24-bit BMP, rows bottom-up, BGR, rows padded to 4 bytes: red, white over blue, green.
std::vector<uint8_t> small_bmp() {
  test::ByteWriter w;
  const uint32_t row = 8, pixels = 54;
  w.raw("BM", 2).put<uint32_t>(pixels + 2 * row).put<uint32_t>(0).put<uint32_t>(pixels);
  w.put<uint32_t>(40).put<int32_t>(2).put<int32_t>(2).put<uint16_t>(1).put<uint16_t>(24);
  w.put<uint32_t>(0).put<uint32_t>(2 * row).put<int32_t>(0).put<int32_t>(0);
  w.put<uint32_t>(0).put<uint32_t>(0);
  const uint8_t bottom[8] = {255, 0, 0, 0, 255, 0, 0, 0};
  const uint8_t top[8] = {0, 0, 255, 255, 255, 255, 0, 0};
  w.raw(bottom, 8).raw(top, 8);
  return w.b;
}

TEST(ImageIo, BmpReadsBottomUp24Bit) {
  const std::vector<uint8_t> bmp = small_bmp();
  const Image image = decode_image(bmp.data(), bmp.size(), "x.bmp");
  ASSERT_EQ(image.channels, 3);
  EXPECT_EQ(image.at(0, 0, 0), 255);  // top-left red
  EXPECT_EQ(image.at(0, 0, 2), 0);
  EXPECT_EQ(image.at(1, 0, 1), 255);  // top-right white
  EXPECT_EQ(image.at(0, 1, 2), 255);  // bottom-left blue
  EXPECT_EQ(image.at(1, 1, 1), 255);  // bottom-right green
  EXPECT_EQ(image.at(1, 1, 0), 0);
}

TEST(ImageIo, ParametersRoundTripThroughEveryFormat) {
  const Image image = test_image(16, 12, 3);
  for (const char* name : {"p.png", "p.jpg", "p.webp"}) {
    TempDir dir;
    write_image(dir.file(name), image, kParameters);
    const ImageMetadata m = read_image_metadata(dir.file(name));
    EXPECT_EQ(m.parameters, kParameters) << name;
    EXPECT_EQ(m.width, 16) << name;
    EXPECT_EQ(m.height, 12) << name;
  }
}

TEST(ImageIo, EmptyParametersWriteNoMetadata) {
  const Image image = test_image(16, 12, 3);
  for (const char* name : {"p.png", "p.jpg", "p.webp"}) {
    TempDir dir;
    write_image(dir.file(name), image, "");
    const ImageMetadata m = read_image_metadata(dir.file(name));
    EXPECT_EQ(m.parameters, "") << name;
    for (const auto& e : m.entries) {
      EXPECT_TRUE(e.name != "tEXt" && e.name != "COM" && e.name != "XMP") << name << " " << e.name;
    }
  }
}

TEST(ImageIo, PngParametersSitInATextChunkBeforeTheImageData) {
  const auto bytes = encode_image(test_image(8, 8, 3), ImageFormat::Png, "hello");
  const std::string s(bytes.begin(), bytes.end());
  const size_t text = s.find(std::string("tEXtparameters\0hello", 20));
  ASSERT_NE(text, std::string::npos);
  EXPECT_LT(text, s.find("IDAT"));
}

TEST(ImageIo, JpegParametersSitInACommentSegment) {
  const auto bytes = encode_image(test_image(8, 8, 3), ImageFormat::Jpeg, "hello");
  const std::string s(bytes.begin(), bytes.end());
  // FF FE, length 2 + "parameters\0" + "hello" + "\0" = 19.
  EXPECT_NE(s.find(std::string("\xff\xfe\x00\x13parameters\0hello\0", 21)), std::string::npos);
}

TEST(ImageIo, LongJpegParametersAreCutToOneSegment) {
  const std::string long_text(70000, 'x');
  const auto bytes = encode_image(test_image(8, 8, 3), ImageFormat::Jpeg, long_text);
  const ImageMetadata m = parse_image_metadata(bytes.data(), bytes.size(), "long.jpg");
  EXPECT_EQ(m.parameters, std::string(65533 - 12, 'x'));
  EXPECT_NO_THROW(decode_image(bytes.data(), bytes.size(), "long.jpg"));
}

TEST(ImageIo, WebpParametersAreXmlEscapedInXmp) {
  const auto bytes = encode_image(test_image(8, 8, 3), ImageFormat::Webp, "a<b & \"c\"");
  const std::string s(bytes.begin(), bytes.end());
  EXPECT_EQ(s.substr(12, 4), "VP8X");
  EXPECT_NE(s.find("XMP "), std::string::npos);
  EXPECT_NE(s.find("<sdcpp:parameters>a&lt;b &amp; &quot;c&quot;</sdcpp:parameters>"),
            std::string::npos);
}

TEST(ImageIo, UnknownExtensionListsTheValidOnes) {
  TempDir dir;
  expect_error([&] { write_image(dir.file("a.gif"), test_image(4, 4, 3), ""); },
               {"a.gif", "'.gif'", ".png", ".jpg", ".webp"});
  expect_error([&] { write_image(dir.file("noext"), test_image(4, 4, 3), ""); }, {".png"});
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(ImageIo, ExtensionIsCaseInsensitive) {
  EXPECT_EQ(output_format_for("A.PNG"), ImageFormat::Png);
  EXPECT_EQ(output_format_for("b.JPEG"), ImageFormat::Jpeg);
  EXPECT_EQ(output_format_for("c.WebP"), ImageFormat::Webp);
}

TEST(ImageIo, WriteIntoMissingFolderFailsAndLeavesNothing) {
  TempDir dir;
  const std::string path = dir.file("missing/a.png");
  expect_error([&] { write_image(path, test_image(4, 4, 3), ""); },
               {path, "No such file or directory"});
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(ImageIo, WriteBelowAFileFailsAndLeavesNothing) {
  TempDir dir;
  test::write_file(dir.file("plain"), {'x'});
  const std::string path = dir.file("plain/a.jpg");
  expect_error([&] { write_image(path, test_image(4, 4, 3), "p"); }, {path, "Not a directory"});
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()),
                          std::filesystem::directory_iterator()),
            1);
}

TEST(ImageIo, FailedRenameRemovesTheTemporaryFile) {
  TempDir dir;
  std::filesystem::create_directory(dir.path() / "taken.png");  // a folder where the file goes
  const std::string path = dir.file("taken.png");
  expect_error([&] { write_image(path, test_image(4, 4, 3), "p"); }, {path, "cannot write"});
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()),
                          std::filesystem::directory_iterator()),
            1);
  EXPECT_TRUE(std::filesystem::is_directory(path));
}

TEST(ImageIo, WriteIntoReadOnlyFolderFailsAndLeavesNothing) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes into read-only folders";
  TempDir dir;
  const auto locked = dir.path() / "locked";
  std::filesystem::create_directory(locked);
  ::chmod(locked.c_str(), 0555);
  const std::string path = (locked / "a.png").string();
  expect_error([&] { write_image(path, test_image(4, 4, 3), ""); }, {path, "Permission denied"});
  EXPECT_TRUE(std::filesystem::is_empty(locked));
  ::chmod(locked.c_str(), 0755);
}

TEST(ImageIo, FailedWriteKeepsTheOldFile) {
  TempDir dir;
  const std::string path = dir.file("a.png");
  write_image(path, test_image(4, 4, 3), "first");
  Image bad = test_image(4, 4, 3);
  bad.pixels.resize(5);  // claims more pixels than it has
  expect_error([&] { write_image(path, bad, "second"); }, {"[write_image]", "bytes of pixels"});
  EXPECT_EQ(read_image_metadata(path).parameters, "first");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()),
                          std::filesystem::directory_iterator()),
            1);
}

TEST(ImageIo, OverwriteReplacesTheFile) {
  TempDir dir;
  const std::string path = dir.file("a.png");
  write_image(path, test_image(4, 4, 3), "first");
  write_image(path, test_image(6, 5, 1), "second");
  const Image back = read_image(path);
  EXPECT_EQ(back.width, 6);
  EXPECT_EQ(back.channels, 1);
  EXPECT_EQ(read_image_metadata(path).parameters, "second");
}

TEST(ImageIo, BadImagesAreRefusedByTheWriter) {
  TempDir dir;
  Image two{4, 4, 2, std::vector<uint8_t>(32)};
  expect_error([&] { write_image(dir.file("a.png"), two, ""); }, {"1, 3 or 4 channels"});
  expect_error([&] { write_image(dir.file("a.png"), Image{0, 4, 3, {}}, ""); }, {"out of range"});
  expect_error([&] { write_image(dir.file("a.jpg"), test_image(4, 4, 3), "", 0); },
               {"quality is 1 to 100"});
}

TEST(ImageIo, MissingAndNonImageFilesNameThePath) {
  TempDir dir;
  expect_error([&] { read_image(dir.file("none.png")); }, {dir.file("none.png")});
  test::write_file(dir.file("text.png"), {'h', 'e', 'l', 'l', 'o'});
  expect_error([&] { read_image(dir.file("text.png")); },
               {dir.file("text.png") + ": ", "not a PNG, JPEG, WebP or BMP"});
  test::write_file(dir.file("empty.png"), {});
  expect_error([&] { read_image(dir.file("empty.png")); }, {"empty"});
  expect_error([&] { read_image(dir.path().string()); }, {"folder"});
}

TEST(ImageIo, ReadsByContentNotExtension) {
  TempDir dir;
  const Image image = test_image(9, 7, 3);
  const auto png = encode_image(image, ImageFormat::Png, "");
  test::write_file(dir.file("really_png.jpg"), png);
  EXPECT_EQ(read_image(dir.file("really_png.jpg")).pixels, image.pixels);
}

TEST(ImageIo, HugeDeclaredSizeIsRefusedBeforeAllocating) {
  auto jpeg = encode_image(test_image(16, 16, 3), ImageFormat::Jpeg, "");
  const std::string s(jpeg.begin(), jpeg.end());
  const size_t sof = s.find("\xff\xc0");
  ASSERT_NE(sof, std::string::npos);
  for (auto [h, w] : {std::pair{40000, 16}, std::pair{30000, 30000}}) {
    auto bytes = jpeg;
    bytes[sof + 5] = static_cast<uint8_t>(h >> 8), bytes[sof + 6] = static_cast<uint8_t>(h);
    bytes[sof + 7] = static_cast<uint8_t>(w >> 8), bytes[sof + 8] = static_cast<uint8_t>(w);
    expect_error([&] { decode_image(bytes.data(), bytes.size(), "huge.jpg"); },
                 {"huge.jpg: ", "larger than"});
  }
}

// Every prefix of a valid file is refused with an error naming it.
void expect_every_truncation_fails(const std::vector<uint8_t>& file, const std::string& name) {
  for (size_t n = 0; n < file.size(); ++n) {
    try {
      decode_image(file.data(), n, name);
      ADD_FAILURE() << name << " truncated to " << n << " of " << file.size() << " bytes decoded";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(name + ": ", 0), 0u) << e.what();
    }
    if (::testing::Test::HasFailure()) return;
  }
}

// Random byte changes either decode (to some image) or fail with an error naming the file.
void expect_flips_fail_cleanly(const std::vector<uint8_t>& file, const std::string& name,
                               uint32_t seed) {
  std::mt19937 rng(seed);
  int refused = 0;
  const int variants = test::fuzz_iterations(400);
  for (int i = 0; i < variants; ++i) {
    auto bytes = file;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int f = 0; f < flips; ++f)
      bytes[rng() % bytes.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
    try {
      const Image image = decode_image(bytes.data(), bytes.size(), name);
      EXPECT_EQ(image.pixels.size(), image.size());
    } catch (const Error& e) {
      ++refused;
      EXPECT_EQ(std::string(e.what()).rfind(name + ": ", 0), 0u) << e.what();
    }
    if (::testing::Test::HasFailure()) return;
  }
  std::printf("[ flips    ] %s: %d of %d refused\n", name.c_str(), refused, variants);
  EXPECT_GT(refused, 0) << "no change was ever detected";
}

TEST(ImageIo, TruncatedFilesFailWithTheirName) {
  const Image image = test_image(12, 10, 3);
  expect_every_truncation_fails(encode_image(image, ImageFormat::Png, "params"), "t.png");
  expect_every_truncation_fails(encode_image(image, ImageFormat::Jpeg, "params"), "t.jpg");
  expect_every_truncation_fails(encode_image(image, ImageFormat::Webp, "params"), "t.webp");
  expect_every_truncation_fails(encode_image(test_image(12, 10, 4), ImageFormat::Webp, ""),
                                "alpha.webp");
  expect_every_truncation_fails(small_bmp(), "t.bmp");
}

TEST(ImageIo, CorruptedFilesFailCleanly) {
  const Image image = test_image(12, 10, 3);
  expect_flips_fail_cleanly(encode_image(image, ImageFormat::Png, "params"), "f.png", 1);
  expect_flips_fail_cleanly(encode_image(image, ImageFormat::Jpeg, "params"), "f.jpg", 2);
  expect_flips_fail_cleanly(encode_image(image, ImageFormat::Webp, "params"), "f.webp", 3);
  expect_flips_fail_cleanly(small_bmp(), "f.bmp", 4);
}

TEST(ImageChannels, GrayRgbAlphaConversions) {
  Image rgb{2, 1, 3, {10, 20, 30, 255, 255, 255}};
  const Image gray = to_channels(rgb, 1);
  ASSERT_EQ(gray.channels, 1);
  EXPECT_EQ(gray.pixels[0], (10 * 77 + 20 * 150 + 30 * 29) >> 8);
  EXPECT_EQ(gray.pixels[1], 255);

  const Image rgba = to_channels(rgb, 4);
  EXPECT_EQ(rgba.pixels, (std::vector<uint8_t>{10, 20, 30, 255, 255, 255, 255, 255}));
  Image translucent{1, 1, 4, {1, 2, 3, 4}};
  EXPECT_EQ(to_channels(translucent, 3).pixels, (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_EQ(to_channels(gray, 3).pixels,
            (std::vector<uint8_t>{gray.pixels[0], gray.pixels[0], gray.pixels[0], 255, 255, 255}));
  EXPECT_EQ(to_channels(gray, 4).pixels[3], 255);
  EXPECT_EQ(to_channels(rgb, 3).pixels, rgb.pixels);
  expect_error([&] { to_channels(rgb, 2); }, {"1, 3 or 4 channels"});
}

TEST(ImageResize, SameSizeIsUnchanged) {
  const Image image = test_image(13, 9, 3);
  EXPECT_EQ(resize(image, 13, 9).pixels, image.pixels);
}

TEST(ImageResize, ConstantImageStaysConstant) {
  Image image{10, 7, 3, std::vector<uint8_t>(210)};
  for (size_t i = 0; i < image.pixels.size(); ++i)
    image.pixels[i] = static_cast<uint8_t>(40 + i % 3 * 50);
  for (auto [w, h] : {std::pair{5, 3}, std::pair{23, 17}, std::pair{1, 1}}) {
    const Image out = resize(image, w, h);
    ASSERT_EQ(out.width, w);
    ASSERT_EQ(out.height, h);
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        for (int c = 0; c < 3; ++c) EXPECT_EQ(out.at(x, y, c), 40 + c * 50);
      }
    }
  }
}

TEST(ImageResize, HalvingAveragesInLinearLight) {
  // Black and white columns average to linear 0.5, which is sRGB 188, not 128.
  Image stripes{4, 2, 1, {0, 255, 0, 255, 0, 255, 0, 255}};
  const Image half = resize(stripes, 2, 1);
  EXPECT_EQ(half.pixels, (std::vector<uint8_t>{188, 188}));
}

TEST(ImageResize, UpscalingKeepsBlocksAndOrder) {
  Image two{2, 1, 1, {0, 255}};
  const Image four = resize(two, 4, 1);
  EXPECT_EQ(four.pixels, (std::vector<uint8_t>{0, 0, 255, 255}));
  const Image three = resize(two, 3, 1);  // the middle pixel straddles both
  EXPECT_EQ(three.pixels[0], 0);
  EXPECT_GT(three.pixels[1], 0);
  EXPECT_LT(three.pixels[1], 255);
  EXPECT_EQ(three.pixels[2], 255);
}

TEST(ImageResize, BadTargetsAreErrors) {
  expect_error([&] { resize(test_image(4, 4, 3), 0, 4); }, {"[resize]"});
  expect_error([&] { resize(test_image(4, 4, 3), 4, kMaxImageSide + 1); }, {"[resize]"});
}

TEST(ImageResize, FitCropsTheCenterToTheAspectRatio) {
  // 6 x 2 with distinct columns, fitted to 2 x 2: the center 2 columns survive.
  Image wide{6, 2, 1, {0, 10, 20, 30, 40, 50, 0, 10, 20, 30, 40, 50}};
  const Image fitted = fit_to_size(wide, 2, 2);
  EXPECT_EQ(fitted.pixels, (std::vector<uint8_t>{20, 30, 20, 30}));
  Image tall{1, 4, 1, {1, 2, 3, 4}};
  EXPECT_EQ(fit_to_size(tall, 1, 2).pixels, (std::vector<uint8_t>{2, 3}));
  const Image scaled = fit_to_size(test_image(64, 32, 3), 32, 16);
  EXPECT_EQ(scaled.width, 32);
  EXPECT_EQ(scaled.height, 16);
}

}  // namespace
}  // namespace sd::io
