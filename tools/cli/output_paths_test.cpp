#include "cli/output_paths.h"

#include <gtest/gtest.h>

namespace sd::cli {
namespace {

using Paths = std::vector<std::string>;

TEST(CliOutputPaths, OneImageKeepsThePath) {
  EXPECT_EQ(output_paths("out.png", 1, 0), Paths{"out.png"});
  EXPECT_EQ(output_paths("dir/out.JPG", 1, 0), Paths{"dir/out.JPG"});
  // Not an image extension: ".png" is appended.
  EXPECT_EQ(output_paths("out", 1, 0), Paths{"out.png"});
  EXPECT_EQ(output_paths("out.bmp", 1, 0), Paths{"out.bmp.png"});
}

TEST(CliOutputPaths, BatchesGetIndexSuffixes) {
  EXPECT_EQ(output_paths("out.png", 3, 0), (Paths{"out_0.png", "out_1.png", "out_2.png"}));
  EXPECT_EQ(output_paths("out.webp", 2, 5), (Paths{"out_5.webp", "out_6.webp"}));
}

TEST(CliOutputPaths, PrintfSpecifiersNumberImages) {
  EXPECT_EQ(output_paths("img_%03d.png", 2, 0), (Paths{"img_000.png", "img_001.png"}));
  EXPECT_EQ(output_paths("%d.png", 2, 1), (Paths{"1.png", "2.png"}));
  EXPECT_EQ(output_paths("img_%d", 1, 7), Paths{"img_7.png"});
  // "%%" is a literal percent sign, and "%%d" is not a specifier.
  EXPECT_EQ(output_paths("100%%_%d.png", 1, 2), Paths{"100%_2.png"});
  EXPECT_FALSE(has_index_specifier("100%%d.png"));
  EXPECT_TRUE(has_index_specifier("a%%%d.png"));
  EXPECT_EQ(format_index("a%%%02d", 3), "a%03");
  EXPECT_FALSE(has_index_specifier("out.png"));
}

}  // namespace
}  // namespace sd::cli
