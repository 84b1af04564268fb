#include "pipeline/reference_images.h"

#include <gtest/gtest.h>

#include "tensor/error.h"

namespace sd::pipeline {
namespace {

TEST(ReferenceImageArgs, StartFromTheModelsDefaults) {
  std::vector<std::string> ignored;
  const ReferenceImageOptions o = parse_reference_image_args("", &ignored);
  EXPECT_FALSE(o.index_mode.has_value()) << "each model places references its own way";
  EXPECT_TRUE(o.resize_before_vae);
  EXPECT_TRUE(o.pass_to_dit);
  EXPECT_TRUE(o.pass_to_vlm);
  EXPECT_LE(o.vae_input_max_pixels, 0);
  EXPECT_TRUE(ignored.empty());
}

TEST(ReferenceImageArgs, TheDeprecatedSwitchesSpellings) {
  // What --increase-ref-index and --disable-auto-resize-ref-image become.
  std::vector<std::string> ignored;
  const ReferenceImageOptions o =
      parse_reference_image_args(" resize_before_vae=0 , ref_index_mode=increase", &ignored);
  EXPECT_EQ(o.index_mode, models::RefIndexMode::Increase);
  EXPECT_FALSE(o.resize_before_vae);
  const ReferenceImageOptions p = parse_reference_image_args(
      "ref_index_mode=decrease,pass_to_dit=off,vae_input_max_pixels=4096,preset=flux_kontext",
      &ignored);
  EXPECT_EQ(p.index_mode, models::RefIndexMode::Decrease);
  EXPECT_FALSE(p.pass_to_dit);
  EXPECT_EQ(p.vae_input_max_pixels, 4096);
  EXPECT_TRUE(ignored.empty());
}

TEST(ReferenceImageArgs, OtherFamiliesKeysAreIgnoredAndBadValuesRefused) {
  std::vector<std::string> ignored;
  const ReferenceImageOptions o = parse_reference_image_args(
      "vlm_max_size=512,preset=longcat,pass_to_vlm=0,preset=qwen", &ignored);
  EXPECT_EQ(ignored, (std::vector<std::string>{"vlm_max_size", "preset=longcat"}));
  EXPECT_FALSE(o.pass_to_vlm);
  for (const char* bad : {"ref_index_mode=sideways", "resize_before_vae=maybe", "noequals",
                          "vae_input_max_pixels=lots", "pass_to_vlm=perhaps"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(parse_reference_image_args(bad, &ignored), Error);
  }
}

TEST(ReferenceImageVaeSize, KeepsTheAspectOverTheOutputsArea) {
  // 1024x1024 output, a 2:1 reference: sqrt(1048576 * 2) = 1448.2 and 724.1 -> 1456 x 720
  // (each side rounded to the nearest multiple of 16 on its own).
  EXPECT_EQ(reference_vae_size(2000, 1000, 1024, 1024, 0, 16), (std::pair<int, int>{1456, 720}));
  // Never more than 1024 * 1024 pixels (or the given maximum), whatever the output.
  EXPECT_EQ(reference_vae_size(512, 512, 2048, 2048, 0, 16), (std::pair<int, int>{1024, 1024}));
  EXPECT_EQ(reference_vae_size(512, 512, 2048, 2048, 256 * 256, 16),
            (std::pair<int, int>{256, 256}));
  // A smaller output bounds the area: sqrt(262144 * 3 / 2) = 627.1 and 418.0.
  EXPECT_EQ(reference_vae_size(300, 200, 512, 512, 0, 16), (std::pair<int, int>{624, 416}));
  EXPECT_THROW(reference_vae_size(4000, 2, 256, 256, 0, 16), Error);
}

}  // namespace
}  // namespace sd::pipeline
