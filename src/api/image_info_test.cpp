#include "api/image_info.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/image.h"
#include "tensor/error.h"

namespace sd::api {
namespace {

const std::string kParameters =
    "a lighthouse at dusk\n"
    "Negative prompt: fog\n"
    "Steps: 20, CFG scale: 7.000000, Seed: 42, Size: 16x8, Sampler: euler_a discrete, "
    "Version: stable-diffusion.cpp, SDCPP: {\"schema\":\"sdcpp.image.params/v1\",\"seed\":42}";

class ImageInfo : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("sd_image_info_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& parameters) {
    io::Image image{16, 8, 3, std::vector<uint8_t>(16 * 8 * 3, 100)};
    const std::string path = (dir_ / name).string();
    io::write_image(path, image, parameters);
    return path;
  }

  std::filesystem::path dir_;
};

TEST_F(ImageInfo, TextReportStartsWithTheParsedParameters) {
  ImageInfoOptions o;
  o.image = write("a.png", kParameters);
  const std::string text = describe_image_metadata(o);
  EXPECT_EQ(text.rfind("File: " + o.image + "\nFormat: PNG (16 x 8)\n", 0), 0u) << text;
  EXPECT_NE(text.find("Generation parameters (PNG tEXt \"parameters\"):\n"
                      "  Prompt: a lighthouse at dusk\n"
                      "  Negative prompt: fog\n"
                      "  Steps: 20\n"
                      "  CFG scale: 7.000000\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Chunk: tEXt (offset 33, "), std::string::npos) << text;
  EXPECT_NE(text.find("  keyword: parameters\n"), std::string::npos) << text;
  // Continuation lines of a multi-line value stay indented.
  EXPECT_NE(text.find("  text: a lighthouse at dusk\n    Negative prompt: fog\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("IHDR"), std::string::npos) << "structural chunks only with --metadata-all";
}

TEST_F(ImageInfo, AllIncludesStructuralEntries) {
  ImageInfoOptions o;
  o.image = write("a.png", kParameters);
  o.all = true;
  const std::string text = describe_image_metadata(o);
  EXPECT_NE(text.find("Chunk: IHDR"), std::string::npos);
  EXPECT_NE(text.find("Chunk: IDAT"), std::string::npos);
  EXPECT_NE(text.find("Chunk: IEND"), std::string::npos);
}

TEST_F(ImageInfo, BriefCutsLongValues) {
  ImageInfoOptions o;
  o.image = write("a.jpg", std::string(1000, 'p') + "\nSteps: 1, Seed: 2, Size: 16x8");
  o.brief = true;
  const std::string text = describe_image_metadata(o);
  EXPECT_NE(text.find("Prompt: " + std::string(240, 'p') + "...\n"), std::string::npos) << text;
  EXPECT_EQ(text.find(std::string(241, 'p')), std::string::npos);
  o.brief = false;
  EXPECT_NE(describe_image_metadata(o).find(std::string(1000, 'p')), std::string::npos);
}

TEST_F(ImageInfo, JsonReportForEveryFormat) {
  for (const char* name : {"a.png", "a.jpg", "a.webp"}) {
    ImageInfoOptions o;
    o.image = write(name, kParameters);
    o.format = MetadataFormat::Json;
    const auto j = nlohmann::json::parse(describe_image_metadata(o));
    EXPECT_EQ(j["file"], o.image);
    EXPECT_EQ(j["width"], 16) << name;
    EXPECT_EQ(j["height"], 8) << name;
    const auto& p = j["parameters"];
    EXPECT_EQ(p["text"], kParameters) << name;
    EXPECT_EQ(p["prompt"], "a lighthouse at dusk");
    EXPECT_EQ(p["negative_prompt"], "fog");
    EXPECT_EQ(p["settings"]["Steps"], "20");
    EXPECT_EQ(p["settings"]["Sampler"], "euler_a discrete");
    EXPECT_EQ(p["settings"]["SDCPP"]["seed"], 42) << "the SDCPP setting is parsed JSON";
    ASSERT_TRUE(j["entries"].is_array());
    ASSERT_FALSE(j["entries"].empty()) << name;
    for (const auto& e : j["entries"]) EXPECT_TRUE(e.contains("name"));
  }
}

TEST_F(ImageInfo, RawAddsHexPreviewsOfUndecodedPayloads) {
  ImageInfoOptions o;
  o.image = write("a.png", "");
  o.all = true;
  o.raw = true;
  o.format = MetadataFormat::Json;
  // IDAT is never previewed (it is image data); a file without metadata shows only
  // structural chunks.
  const auto j = nlohmann::json::parse(describe_image_metadata(o));
  EXPECT_FALSE(j.contains("parameters"));
  EXPECT_EQ(j["entries"].size(), 3u);

  // An unknown ancillary chunk gets a preview only with raw.
  std::vector<uint8_t> bytes = io::encode_image(io::Image{1, 1, 1, {0}}, io::ImageFormat::Png, "");
  const uint8_t chunk[] = {0, 0, 0, 2, 'z', 'z', 'Z', 'z', 0xab, 0xcd, 0, 0, 0, 0};
  bytes.insert(bytes.begin() + 33, chunk, chunk + sizeof chunk);
  const std::string path = (dir_ / "odd.png").string();
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  o.image = path;
  o.all = false;
  const std::string with_raw = describe_image_metadata(o);
  EXPECT_NE(with_raw.find("\"raw_hex_preview\": \"ab cd\""), std::string::npos) << with_raw;
  o.raw = false;
  EXPECT_EQ(describe_image_metadata(o).find("raw_hex_preview"), std::string::npos);
}

TEST_F(ImageInfo, NoMetadataSaysSo) {
  ImageInfoOptions o;
  o.image = write("a.webp", "");
  const std::string text = describe_image_metadata(o);
  EXPECT_NE(text.find("No metadata entries found."), std::string::npos) << text;
  EXPECT_EQ(text.find("Generation parameters"), std::string::npos);
}

TEST_F(ImageInfo, TerminalEscapesInTheFileAreShownEscaped) {
  ImageInfoOptions o;
  o.image = write("escapes.png",
                  "a \x1b]0;pwned\x07 prompt \xc2\x9b"
                  "2J\nSteps: 2\x1b[31m, Seed: \xff"
                  "1");
  const std::string text = describe_image_metadata(o);
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_EQ(text.find('\x07'), std::string::npos) << text;
  EXPECT_EQ(text.find("\xc2\x9b"), std::string::npos) << text;
  EXPECT_NE(text.find("a \\e]0;pwned\\x07 prompt "), std::string::npos) << text;
  EXPECT_NE(text.find("Steps: 2\\e[31m"), std::string::npos) << text;
  o.format = MetadataFormat::Json;
  std::string json_text;
  ASSERT_NO_THROW(json_text = describe_image_metadata(o));  // not UTF-8: replaced, not fatal
  EXPECT_EQ(json_text.find('\x1b'), std::string::npos) << json_text;
  EXPECT_TRUE(nlohmann::json::accept(json_text)) << json_text;
}

TEST_F(ImageInfo, ErrorsNameTheProblem) {
  ImageInfoOptions o;
  try {
    describe_image_metadata(o);
    ADD_FAILURE() << "no image given";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--image"), std::string::npos) << e.what();
  }
  o.image = (dir_ / "missing.png").string();
  try {
    describe_image_metadata(o);
    ADD_FAILURE() << "missing file";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(o.image, 0), 0u) << e.what();
  }
  EXPECT_EQ(parse_metadata_format("JSON"), MetadataFormat::Json);
  EXPECT_EQ(parse_metadata_format("text"), MetadataFormat::Text);
  try {
    parse_metadata_format("xml");
    ADD_FAILURE() << "xml accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("valid formats: text, json"), std::string::npos);
  }
}

}  // namespace
}  // namespace sd::api
