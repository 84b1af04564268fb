#include "models/t5_tokenizer.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include "tensor/error.h"
#include "test_support.h"

namespace sd::models {
namespace {

namespace fs = std::filesystem;

// A hand-made unigram vocabulary: ids 0..2 are T5's specials, then pieces whose scores make
// the best segmentations below checkable by hand.
constexpr const char* kTinyJson = R"({
  "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": true},
  "model": {"type": "Unigram", "unk_id": 2, "vocab": [
    ["<pad>", 0.0], ["</s>", 0.0], ["<unk>", 0.0],
    ["\u2581", -2.0], ["a", -3.0], ["b", -3.0], ["ab", -2.5], ["\u2581a", -1.0],
    ["\u2581ab", -3.5], ["c", -4.0], ["\u2581c", -5.0]
  ]}
})";

T5Tokenizer tiny() {
  return T5Tokenizer::from_json(kTinyJson);
}

TEST(T5Tokenizer, ViterbiTakesTheBestScoringSegmentation) {
  const T5Tokenizer t = tiny();
  // "▁ab" (-3.5) beats "▁a" + "b" (-4) and "▁" + "ab" (-4.5).
  EXPECT_EQ(t.encode("ab"), (std::vector<int>{8}));
  // "▁a" + "ab" (-3.5) beats "▁ab" + ... ("▁ab" + "b" = -6.5).
  EXPECT_EQ(t.encode("aab"), (std::vector<int>{7, 6}));
  // "▁c" (-5) beats "▁" + "c" (-6).
  EXPECT_EQ(t.encode("c"), (std::vector<int>{10}));
  EXPECT_EQ(t.encode_pieces("ab c"), (std::vector<std::string>{"\xE2\x96\x81"
                                                               "ab",
                                                               "\xE2\x96\x81"
                                                               "c"}));
}

TEST(T5Tokenizer, UnknownCharactersBecomeOneUnkEach) {
  const T5Tokenizer t = tiny();
  // "é" is two bytes and no piece: one <unk>; "x" likewise.
  EXPECT_EQ(t.encode("a\xC3\xA9x"), (std::vector<int>{7, 2, 2}));
}

TEST(T5Tokenizer, SpacesAndSpecialTokensAsTheReferenceHandlesThem) {
  const T5Tokenizer t = tiny();
  // Runs of spaces collapse; a trailing space adds nothing.
  EXPECT_EQ(t.encode("a   b "), t.encode("a b"));
  // Special tokens are cut out of the text; the text around them gets its own "▁".
  EXPECT_EQ(t.encode("a</s>b"), (std::vector<int>{7, 1, 3, 5}));
  EXPECT_EQ(t.encode("<pad><unk>"), (std::vector<int>{0, 2}));
  // The empty prompt is the lone "▁".
  EXPECT_EQ(t.encode(""), (std::vector<int>{3}));
}

TEST(T5Tokenizer, PromptWindowsEndInEosAndArePadded) {
  const T5Tokenizer t = tiny();
  T5Chunks c = t5_tokenize_prompt(t, "ab", 4);
  EXPECT_EQ(c.ids, (std::vector<int>{8, kT5EosToken, kT5PadToken, kT5PadToken}));
  EXPECT_EQ(c.weights, (std::vector<float>{1, 1, 1, 1}));
  // Emphasis weights follow their tokens; 4 tokens need two windows of 3 + </s>.
  c = t5_tokenize_prompt(t, "(c:1.5) ab ab ab", 4);
  ASSERT_EQ(c.ids.size(), 8u);
  EXPECT_EQ(c.ids[3], kT5EosToken);
  EXPECT_EQ(c.ids[7], kT5PadToken);
  EXPECT_FLOAT_EQ(c.weights[0], 1.5f);
  EXPECT_FLOAT_EQ(c.weights[1], 1.0f);
}

TEST(T5Tokenizer, WrongFilesFailWithAMessage) {
  EXPECT_THROW(T5Tokenizer::from_json("{"), Error);
  try {
    T5Tokenizer::from_json(R"({"model": {"type": "BPE", "vocab": {}}})");
    FAIL() << "a BPE tokenizer was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Unigram"), std::string::npos) << e.what();
  }
  EXPECT_THROW(T5Tokenizer::from_json(R"({"model": {"type": "Unigram", "vocab": [["a"]]}})"),
               Error);
}

TEST(T5Tokenizer, MissingTokenizerSaysWhereToGetIt) {
  const char* old = std::getenv("SD_T5_TOKENIZER");
  const std::string saved = old ? old : "";
  const char* old_cache = std::getenv("XDG_CACHE_HOME");
  const std::string saved_cache = old_cache ? old_cache : "";
  const fs::path empty = fs::temp_directory_path() / "t5_tokenizer_test_empty";
  fs::create_directories(empty);
  unsetenv("SD_T5_TOKENIZER");
  setenv("XDG_CACHE_HOME", empty.c_str(), 1);
  try {
    find_t5_tokenizer("", empty.string(), (empty / "t5xxl.safetensors").string());
    FAIL() << "found a tokenizer in an empty folder";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SD_T5_TOKENIZER"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("tokenizer.json"), std::string::npos) << e.what();
  }
  EXPECT_THROW(find_t5_tokenizer((empty / "nope.json").string(), "", ""), Error);
  // Next to the T5 file.
  { std::ofstream(empty / "tokenizer.json") << kTinyJson; }
  EXPECT_EQ(find_t5_tokenizer("", "", (empty / "t5xxl.safetensors").string()),
            (empty / "tokenizer.json").string());
  fs::remove_all(empty);
  if (saved.empty())
    unsetenv("SD_T5_TOKENIZER");
  else
    setenv("SD_T5_TOKENIZER", saved.c_str(), 1);
  if (saved_cache.empty())
    unsetenv("XDG_CACHE_HOME");
  else
    setenv("XDG_CACHE_HOME", saved_cache.c_str(), 1);
}

// The synthetic 8,000-piece vocabulary of the shared data folder; ids from a plain
// reimplementation of the reference's Viterbi search over the same file.
TEST(T5Tokenizer, SyntheticVocabularyGivesTheReferenceIds) {
  const std::string shared = test::shared_dir();
  const std::string path = shared.empty() ? "" : shared + "/data/t5/tokenizer.json";
  if (path.empty() || !fs::exists(path)) GTEST_SKIP() << "T5 tokenizer not in the shared folder";
  const T5Tokenizer t = T5Tokenizer::from_file(path);
  EXPECT_EQ(t.vocab_size(), 8000);
  EXPECT_EQ(
      t.encode("a photograph of an astronaut riding a horse"),
      (std::vector<int>{31, 7, 7009, 1707, 34, 122, 97, 1089, 22, 681, 3889, 63, 31, 7, 3203}));
  EXPECT_EQ(t.encode("Hello, World! 123"),
            (std::vector<int>{243, 1052, 156, 12, 602, 226, 1570, 926, 292, 35}));
  EXPECT_EQ(t.encode("na\xC3\xAFve caf\xC3\xA9 \xE6\x9D\xB1\xE4\xBA\xAC"),
            (std::vector<int>{908, 22, 2, 1026, 7, 4326, 2, 7, 2, 2}));
  EXPECT_EQ(t.encode("tokenization"), (std::vector<int>{2916, 1904}));
}

}  // namespace
}  // namespace sd::models
