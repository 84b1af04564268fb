#include "models/embeddings.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tensor/error.h"

namespace sd::models {
namespace {

namespace fs = std::filesystem;

class EmbeddingDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("embeddings_test_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string touch(const std::string& name) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << "x";
    return p.string();
  }
  fs::path dir_;
};

TEST_F(EmbeddingDir, ListsWeightFilesByLowercaseStem) {
  const std::string style = touch("MyStyle.pt");
  const std::string neg = touch("bad-hands.safetensors");
  touch("notes.txt");
  touch("model.bin");  // sd.cpp does not read .bin embeddings
  fs::create_directories(dir_ / "sub.pt");
  const auto files = list_embedding_files(dir_.string());
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files.at("mystyle"), style);
  EXPECT_EQ(files.at("bad-hands"), neg);
  // Ordered by the original stems: "MyStyle" < "bad-hands" byte-wise.
  EXPECT_EQ(embedding_words(dir_.string()), (std::vector<std::string>{"mystyle", "bad-hands"}));
}

TEST_F(EmbeddingDir, LaterStemWinsForOneWord) {
  touch("Foo.pt");
  const std::string lower = touch("foo.gguf");
  const auto files = list_embedding_files(dir_.string());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files.at("foo"), lower);  // "Foo" < "foo" byte-wise
  EXPECT_EQ(embedding_words(dir_.string()), (std::vector<std::string>{"foo"}));
}

TEST(Embeddings, MissingFolderHasNoEmbeddings) {
  EXPECT_TRUE(list_embedding_files("").empty());
  EXPECT_TRUE(list_embedding_files("/no/such/folder").empty());
  EXPECT_TRUE(embedding_words("/no/such/folder").empty());
}

TEST(Embeddings, PicksTheLastTensorOfTheEncodersWidth) {
  const std::vector<EmbeddingTensorShape> shapes = {
      {1, {1, 1, 1, 1}},     // string_to_token
      {2, {768, 4, 1, 1}},   // string_to_param.*
      {2, {1280, 4, 1, 1}},  // an SDXL clip_g row set
      {1, {768, 1, 1, 1}},   // a single vector
      {3, {768, 2, 2, 1}},   // not an embedding
  };
  EXPECT_EQ(pick_embedding_tensor(shapes, 768), 3u);
  EXPECT_EQ(pick_embedding_tensor(shapes, 1280), 2u);
  EXPECT_FALSE(pick_embedding_tensor(shapes, 1024).has_value());
}

TEST(Embeddings, RowsGetIdsAfterTheVocabulary) {
  CustomEmbeddings e(4, 100);
  EXPECT_EQ(e.rows(), 0);
  EXPECT_EQ(e.add("a", std::vector<float>(8, 1.0f)), (std::vector<int>{100, 101}));
  EXPECT_EQ(e.add("b", std::vector<float>(4, 2.0f)), (std::vector<int>{102}));
  EXPECT_EQ(e.rows(), 3);
  ASSERT_NE(e.find("a"), nullptr);
  EXPECT_EQ(*e.find("b"), (std::vector<int>{102}));
  EXPECT_EQ(e.find("c"), nullptr);
  EXPECT_EQ(e.table().size(), 12u);
  EXPECT_EQ(e.table()[8], 2.0f);
  EXPECT_THROW(e.add("bad", std::vector<float>(5, 0.0f)), Error);
  EXPECT_THROW(e.add("empty", {}), Error);
}

}  // namespace
}  // namespace sd::models
