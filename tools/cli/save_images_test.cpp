#include "cli/save_images.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "io/image.h"
#include "io/image_metadata.h"
#include "io/io_test_util.h"

namespace sd::cli {
namespace {

namespace fs = std::filesystem;

class CliSaveImages : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_.path();
    for (int i = 0; i < 2; ++i) {
      pixels_[i].assign(16 * 8 * 3, static_cast<uint8_t>(40 + 100 * i));
      images_[i] = {16, 8, 3, pixels_[i].data()};
    }
  }

  Arguments arguments(std::vector<const char*> flags) {
    flags.insert(flags.begin(), "sd-cli");
    return parse_arguments(static_cast<int>(flags.size()), flags.data());
  }

  io::test::TempDir temp_;  // one per test: ctest runs tests in parallel processes
  fs::path dir_;
  std::vector<uint8_t> pixels_[2];
  sd_image_t images_[2];
};

TEST_F(CliSaveImages, BatchGetsNumberedFilesWithTheirSeeds) {
  const std::string out = (dir_ / "sub" / "out.png").string();
  Arguments a = arguments({"-m", "m.safetensors", "-p", "a cat", "-o", out.c_str(), "-b", "2"});
  ASSERT_TRUE(save_images(a, images_, 2));
  for (int i = 0; i < 2; ++i) {
    const std::string path = (dir_ / "sub" / ("out_" + std::to_string(i) + ".png")).string();
    const io::Image image = io::read_image(path);
    EXPECT_EQ(image.width, 16);
    EXPECT_EQ(image.height, 8);
    EXPECT_EQ(image.pixels, pixels_[i]);
    const std::string parameters = io::read_image_metadata(path).parameters;
    EXPECT_EQ(parameters.rfind("a cat\nSteps: 20, ", 0), 0u) << parameters;
    EXPECT_NE(parameters.find("Seed: " + std::to_string(42 + i) + ", "), std::string::npos)
        << parameters;
  }
}

TEST_F(CliSaveImages, MetadataCanBeLeftOut) {
  const std::string out = (dir_ / "img_%02d.jpg").string();
  Arguments a = arguments({"-m", "m.safetensors", "-o", out.c_str(), "--disable-image-metadata",
                           "--output-begin-idx", "3"});
  ASSERT_TRUE(save_images(a, images_, 1));
  const std::string path = (dir_ / "img_03.jpg").string();
  ASSERT_TRUE(fs::exists(path));
  EXPECT_EQ(io::read_image_metadata(path).parameters, "");
}

TEST_F(CliSaveImages, ReportsImagesItCouldNotWrite) {
  const std::string out = (dir_ / "out.png").string();
  Arguments a = arguments({"-m", "m.safetensors", "-o", out.c_str()});
  sd_image_t missing[2] = {images_[0], {16, 8, 3, nullptr}};
  EXPECT_FALSE(save_images(a, missing, 2));
  EXPECT_TRUE(fs::exists(dir_ / "out_0.png"));
  EXPECT_FALSE(fs::exists(dir_ / "out_1.png"));
}

}  // namespace
}  // namespace sd::cli
