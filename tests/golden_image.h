// A generated image against a golden one of the reference implementation: the same size,
// a PSNR of at least `min_db` (printed, and recorded as a test property), and the image
// written to SD_TEST_OUTPUT_DIR when it is set, to look at.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "image_psnr.h"
#include "io/image.h"

namespace sd::test {

// tests/golden/<name>: the reference implementation's images of one model.
inline std::filesystem::path golden_folder(const std::string& name) {
  return std::filesystem::path(__FILE__).parent_path() / "golden" / name;
}

inline void expect_matches_golden(const io::Image& image, const std::string& golden_path,
                                  double min_db = 40.0) {
  const io::Image expected = io::read_image(golden_path);
  ASSERT_EQ(expected.width, image.width);
  ASSERT_EQ(expected.height, image.height);
  const io::Image got = io::to_channels(image, expected.channels);
  const double db = image_psnr(got, expected);
  const std::filesystem::path path(golden_path);
  const std::string label = path.parent_path().filename().string() + "/" + path.filename().string();
  ::testing::Test::RecordProperty("psnr_db", std::to_string(db));
  std::printf("PSNR %.2f dB against %s\n", db, label.c_str());
  if (const char* out = std::getenv("SD_TEST_OUTPUT_DIR")) {
    std::string name = label;  // "<set>/<image>.png" -> "<set>_<image>.png"
    std::replace(name.begin(), name.end(), '/', '_');
    io::write_image(std::string(out) + "/" + name, got, "");
  }
  EXPECT_GE(db, min_db) << "against " << golden_path;
}

}  // namespace sd::test
