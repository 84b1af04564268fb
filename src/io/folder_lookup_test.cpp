#include "io/folder_lookup.h"

#include <gtest/gtest.h>

#include <fstream>

#include "io/io_test_util.h"

namespace sd::io {
namespace {

namespace fs = std::filesystem;

class FolderLookup : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = temp_.path();
    fs::create_directories(root_ / "lora");
    fs::create_directories(root_ / "lora-evil");
    fs::create_directories(root_ / "outside");
    std::ofstream(root_ / "lora" / "style.safetensors") << "x";
    std::ofstream(root_ / "lora-evil" / "x.safetensors") << "x";
    std::ofstream(root_ / "outside" / "secret.safetensors") << "x";
    fs::create_symlink(root_ / "outside" / "secret.safetensors",
                       root_ / "lora" / "link.safetensors");
    fs::create_directory_symlink(root_ / "outside", root_ / "lora" / "sub");
  }
  FolderMatch find(const std::string& name, bool confined) {
    return find_in_folder(name, (root_ / "lora").string(), {".safetensors"}, confined);
  }
  test::TempDir temp_;
  fs::path root_;
};

TEST_F(FolderLookup, FindsNamesWithOrWithoutExtension) {
  EXPECT_EQ(find("style", true).path, (root_ / "lora" / "style.safetensors").string());
  EXPECT_EQ(find("style.safetensors", true).path, (root_ / "lora" / "style.safetensors").string());
  EXPECT_EQ(find("missing", true).path, "");
  EXPECT_EQ(find("missing", true).refused, "");
}

TEST_F(FolderLookup, UnconfinedLookupsFollowTheNameAnywhere) {
  EXPECT_NE(find("../outside/secret", false).path, "");
  EXPECT_NE(find("link", false).path, "");
  EXPECT_NE(find((root_ / "outside" / "secret").string(), false).path, "");
}

TEST_F(FolderLookup, ConfinedLookupsRefuseWhatLeavesTheFolder) {
  const std::vector<std::string> names = {"../outside/secret", "link", "sub/secret",
                                          "../lora-evil/x",
                                          (root_ / "outside" / "secret").string()};
  for (const std::string& name : names) {
    const FolderMatch m = find(name, true);
    EXPECT_EQ(m.path, "") << name;
    EXPECT_NE(m.refused, "") << name;
  }
  EXPECT_TRUE(lies_inside(root_ / "lora" / "style.safetensors", root_ / "lora"));
  EXPECT_FALSE(lies_inside(root_ / "lora-evil" / "x.safetensors", root_ / "lora"));
  EXPECT_FALSE(lies_inside(root_ / "lora", root_ / "lora"));
}

}  // namespace
}  // namespace sd::io
