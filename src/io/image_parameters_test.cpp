#include "io/image_parameters.h"

#include <gtest/gtest.h>

namespace sd::io {
namespace {

TEST(GenerationParameters, SplitsPromptNegativeAndSettings) {
  const auto p = parse_generation_parameters(
      "a cat\non two lines\nNegative prompt: blurry,\nugly\n"
      "Steps: 20, CFG scale: 7.000000, Skip layers: [7, 8, 9, ], Seed: 42, Size: 512x512, "
      "Sampler: euler_a discrete, Version: stable-diffusion.cpp, "
      "SDCPP: {\"seed\":42,\"prompt\":{\"positive\":\"a, b\"}}");
  EXPECT_EQ(p.prompt, "a cat\non two lines");
  EXPECT_EQ(p.negative_prompt, "blurry,\nugly");
  ASSERT_EQ(p.settings.size(), 8u);
  EXPECT_EQ(p.setting("Steps"), "20");
  EXPECT_EQ(p.setting("CFG scale"), "7.000000");
  EXPECT_EQ(p.setting("Skip layers"), "[7, 8, 9, ]");
  EXPECT_EQ(p.setting("Sampler"), "euler_a discrete");
  EXPECT_EQ(p.setting("SDCPP"), "{\"seed\":42,\"prompt\":{\"positive\":\"a, b\"}}");
  EXPECT_EQ(p.settings.back().first, "SDCPP");
  EXPECT_EQ(p.setting("Missing"), "");
}

TEST(GenerationParameters, QuotedValuesKeepTheirCommas) {
  const auto p = parse_generation_parameters("x\nSteps: 5, Lora hashes: \"a: 1, b: 2\", Seed: 3");
  EXPECT_EQ(p.setting("Lora hashes"), "\"a: 1, b: 2\"");
  EXPECT_EQ(p.setting("Seed"), "3");
}

TEST(GenerationParameters, NoSettingsLineMeansAllPrompt) {
  const auto p = parse_generation_parameters("just a prompt: with a colon\nand more");
  EXPECT_EQ(p.prompt, "just a prompt: with a colon\nand more");
  EXPECT_TRUE(p.settings.empty());
  EXPECT_EQ(p.negative_prompt, "");
}

TEST(GenerationParameters, StepsLineWithoutPromptOrNegative) {
  const auto p = parse_generation_parameters("\nSteps: 20, Seed: 1, Size: 8x8\n");
  EXPECT_EQ(p.prompt, "");
  EXPECT_EQ(p.setting("Size"), "8x8");
  const auto short_line = parse_generation_parameters("prompt\nSteps: 4");
  EXPECT_EQ(short_line.prompt, "prompt");
  EXPECT_EQ(short_line.setting("Steps"), "4");
}

TEST(GenerationParameters, EmptyAndOddInputs) {
  EXPECT_EQ(parse_generation_parameters("").prompt, "");
  const auto p = parse_generation_parameters("Negative prompt: only negative");
  EXPECT_EQ(p.negative_prompt, "only negative");
  EXPECT_EQ(p.prompt, "");
  const auto unbalanced = parse_generation_parameters("p\nSteps: [1, Seed: {2, Size: \"3");
  EXPECT_EQ(unbalanced.prompt, "p");  // an unclosed bracket swallows the rest: one setting
  EXPECT_EQ(unbalanced.settings.size(), 1u);
}

}  // namespace
}  // namespace sd::io
