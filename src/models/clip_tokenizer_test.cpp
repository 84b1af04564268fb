#include "models/clip_tokenizer.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include "io/io_test_util.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::models {
namespace {

namespace fs = std::filesystem;

std::string vocab_path() {
  const std::string shared = test::shared_dir();
  if (shared.empty()) return "";
  const std::string p = shared + "/data/clip/" + kClipVocabFileName;
  return fs::exists(p) ? p : "";
}

// Loaded once: the merge list is 1.8 MB of text.
const ClipTokenizer* tokenizer() {
  static const std::optional<ClipTokenizer> t = []() -> std::optional<ClipTokenizer> {
    const std::string p = vocab_path();
    if (p.empty()) return std::nullopt;
    return ClipTokenizer::from_file(p);
  }();
  return t ? &*t : nullptr;
}

#define REQUIRE_VOCAB()                   \
  const ClipTokenizer* tok = tokenizer(); \
  if (!tok) GTEST_SKIP() << "CLIP vocabulary not in the shared data folder"

using Ids = std::vector<int>;

TEST(ClipTokenizer, VocabularyHasClipsLayout) {
  REQUIRE_VOCAB();
  EXPECT_EQ(tok->vocab_size(), kClipVocabSize);
  EXPECT_EQ(tok->token_text(kClipBosToken), "<|startoftext|>");
  EXPECT_EQ(tok->token_text(kClipEosToken), "<|endoftext|>");
  EXPECT_EQ(tok->token_text(0), "!");        // first printable byte
  EXPECT_EQ(tok->token_text(256), "!</w>");  // the same, ending a word
  EXPECT_EQ(tok->token_text(512), "in");     // first merge: "i n"
  EXPECT_EQ(tok->token_id("photograph</w>"), 8853);
  EXPECT_EQ(tok->token_id("no such token"), -1);
}

TEST(ClipTokenizer, EncodesTheAstronautPrompt) {
  REQUIRE_VOCAB();
  EXPECT_EQ(tok->encode("a photograph of an astronaut riding a horse"),
            (Ids{320, 8853, 539, 550, 18376, 6765, 320, 4558}));
}

TEST(ClipTokenizer, SplitsContractionsAndPunctuation) {
  REQUIRE_VOCAB();
  // it 's a cat 's toy , isn 't it ?!
  EXPECT_EQ(tok->encode("It's a cat's TOY, isn't it?!"),
            (Ids{585, 568, 320, 2368, 568, 5988, 267, 2923, 713, 585, 2835}));
  // A contraction is taken wherever an apostrophe starts one: don 't 's we 'll
  EXPECT_EQ(tok->encode("don't'S we'll"), (Ids{847, 713, 568, 649, 1342}));
  EXPECT_EQ(tok->encode("a red-haired (girl)"), (Ids{320, 736, 268, 27202, 263, 1611, 264}));
}

TEST(ClipTokenizer, EncodesEachDigitAlone) {
  REQUIRE_VOCAB();
  // in 2 0 2 4 : 3 . 1 4
  EXPECT_EQ(tok->encode("in 2024: 3.14"), (Ids{530, 273, 271, 273, 275, 281, 274, 269, 272, 275}));
}

TEST(ClipTokenizer, NonAsciiLettersSplitLikePunctuation) {
  REQUIRE_VOCAB();
  // sd.cpp's ASCII letter class: "café" is "caf" + "é" (bytes C3 A9 -> "Ã©").
  EXPECT_EQ(tok->encode("café naïve"), (Ids{20867, 4166, 1272, 127, 363, 563}));
  EXPECT_EQ(tok->encode("日本"), (Ids{39121, 19277, 361}));
  EXPECT_EQ(tok->encode("emoji 😀"), (Ids{16327, 7334}));
}

TEST(ClipTokenizer, NormalizesWhitespaceAndCase) {
  REQUIRE_VOCAB();
  EXPECT_EQ(tok->encode("  Hello \t\n WORLD  "), tok->encode("hello world"));
  EXPECT_EQ(tok->encode("hello world"), (Ids{3306, 1002}));
  EXPECT_EQ(clip_normalize("  A\t\tB \n"), "a b");
  EXPECT_TRUE(tok->encode("").empty());
  EXPECT_TRUE(tok->encode(" \n\t ").empty());
}

TEST(ClipTokenizer, PreTokenizerFollowsClipsPattern) {
  using W = std::vector<std::string>;
  EXPECT_EQ(clip_pre_tokenize("it's 42!?"), (W{"it", "'s", "4", "2", "!?"}));
  EXPECT_EQ(clip_pre_tokenize("'x '''s"), (W{"'", "x", "'''", "s"}));
  EXPECT_EQ(clip_pre_tokenize("a_b"), (W{"a", "_", "b"}));
}

TEST(ClipTokenizer, SpecialTokensInTextAreRecognized) {
  REQUIRE_VOCAB();
  EXPECT_EQ(tok->encode("a<|endoftext|>b"), (Ids{320, kClipEosToken, 321}));
  EXPECT_EQ(tok->encode("<|STARTOFTEXT|>"), (Ids{kClipBosToken}));  // lowercased first
}

TEST(ClipTokenizer, SpecialWordsBecomeTheirIds) {
  REQUIRE_VOCAB();
  ClipTokenizer::SpecialWords special;
  special.words = {"mystyle"};
  special.ids_of = [](const std::string& w) { return w == "mystyle" ? Ids{50000, 50001} : Ids{}; };
  // Matched case-blind and inside words, as sd.cpp does.
  EXPECT_EQ(tok->encode("a MyStyle horse", &special), (Ids{320, 50000, 50001, 4558}));
  EXPECT_EQ(tok->encode("xmystyle", &special), (Ids{343, 50000, 50001}));
  // A word without vectors is looked up as a vocabulary entry ("in": the first merge),
  // else it reads as id 0.
  special.words = {"in", "zzqqzzqq"};
  EXPECT_EQ(tok->encode("in zzqqzzqq", &special), (Ids{512, 0}));
}

TEST(ClipTokenizer, BpeMergesByRank) {
  REQUIRE_VOCAB();
  EXPECT_EQ(tok->bpe("astronaut"), (std::vector<std::string>{"astronaut</w>"}));
  EXPECT_EQ(tok->bpe("x"), (std::vector<std::string>{"x</w>"}));
  // A space byte maps to "Ġ" (U+0120), never a space: merge keys stay unambiguous.
  EXPECT_EQ(tok->bpe(" ").at(0), "\xC4\xA0</w>");
}

TEST(ClipTokenizer, ReadsAPlainMergesFileLikeTheGzipOne) {
  REQUIRE_VOCAB();
  // A diffusers tokenizer/merges.txt is the same list, uncompressed.
  gzFile in = gzopen(vocab_path().c_str(), "rb");
  ASSERT_TRUE(in);
  std::string text(4 << 20, '\0');
  const int n = gzread(in, text.data(), static_cast<unsigned>(text.size()));
  gzclose(in);
  ASSERT_GT(n, 0);
  text.resize(static_cast<size_t>(n));
  const io::test::TempDir temp;
  const fs::path dir = temp.path();
  const fs::path merges = dir / "merges.txt";
  std::ofstream(merges, std::ios::binary) << text;
  const ClipTokenizer plain = ClipTokenizer::from_file(merges.string());
  EXPECT_EQ(plain.encode("a photograph of an astronaut"),
            tok->encode("a photograph of an astronaut"));
}

TEST(ClipTokenizer, ShortMergeListIsAnError) {
  try {
    ClipTokenizer::from_merges("#version: 0.2\ni n\nt h\n");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("only 2 merges"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ClipTokenizer::from_merges("#version: 0.2\nnospace\n"), Error);
  EXPECT_THROW(ClipTokenizer::from_file("/no/such/dir/bpe.txt.gz"), Error);
}

TEST(ClipTokenChunks, ShortPromptFillsOneWindow) {
  const TokenChunks c = pad_to_chunks({320, 4558}, {1.0f, 1.5f}, kClipEosToken);
  ASSERT_EQ(c.ids.size(), 77u);
  ASSERT_EQ(c.weights.size(), 77u);
  EXPECT_EQ(c.chunk_count(), 1);
  EXPECT_EQ(c.ids[0], kClipBosToken);
  EXPECT_EQ(c.ids[1], 320);
  EXPECT_EQ(c.ids[2], 4558);
  EXPECT_EQ(c.ids[3], kClipEosToken);
  EXPECT_EQ(c.ids[76], kClipEosToken);
  EXPECT_EQ(c.weights[2], 1.5f);
  EXPECT_EQ(c.weights[3], 1.0f);
  // OpenCLIP (SD2) pads with 0 after the EOS.
  const TokenChunks z = pad_to_chunks({320}, {1.0f}, 0);
  EXPECT_EQ(z.ids[2], kClipEosToken);
  EXPECT_EQ(z.ids[3], 0);
  EXPECT_EQ(z.ids[76], 0);
}

TEST(ClipTokenChunks, SeventySixTokensTakeTwoWindows) {
  std::vector<int> ids(76);
  for (int i = 0; i < 76; ++i) ids[i] = 1000 + i;
  const std::vector<float> w(76, 2.0f);
  const TokenChunks one =
      pad_to_chunks({ids.begin(), ids.begin() + 75}, {w.begin(), w.end() - 1}, 0);
  EXPECT_EQ(one.chunk_count(), 1);
  EXPECT_EQ(one.ids[75], 1074);
  EXPECT_EQ(one.ids[76], kClipEosToken);

  const TokenChunks two = pad_to_chunks(ids, w, 0);
  ASSERT_EQ(two.chunk_count(), 2);
  EXPECT_EQ(two.ids[0], kClipBosToken);
  EXPECT_EQ(two.ids[75], 1074);
  EXPECT_EQ(two.ids[76], kClipEosToken);
  EXPECT_EQ(two.ids[77], kClipBosToken);
  EXPECT_EQ(two.ids[78], 1075);
  EXPECT_EQ(two.weights[78], 2.0f);
  EXPECT_EQ(two.ids[79], kClipEosToken);
  EXPECT_EQ(two.ids[80], 0);
  EXPECT_EQ(two.weights[80], 1.0f);
}

TEST(ClipTokenChunks, EmptyPromptIsBosEosAndPadding) {
  const TokenChunks c = pad_to_chunks({}, {}, kClipEosToken);
  ASSERT_EQ(c.ids.size(), 77u);
  EXPECT_EQ(c.ids[0], kClipBosToken);
  for (int i = 1; i < 77; ++i) EXPECT_EQ(c.ids[i], kClipEosToken);
}

// Sets or clears an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      setenv(name, value->c_str(), 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(FindClipVocab, FollowsTheLookupOrder) {
  const io::test::TempDir temp;
  const fs::path root = temp.path();
  fs::create_directories(root / "model" / "tokenizer");
  fs::create_directories(root / "cache" / "sd-engine");
  const std::string merges = (root / "model" / "tokenizer" / "merges.txt").string();
  const std::string cached = (root / "cache" / "sd-engine" / kClipVocabFileName).string();
  const std::string flagged = (root / "flag.txt.gz").string();
  for (const std::string& p : {merges, cached, flagged}) std::ofstream(p) << "x";
  const std::string cache = (root / "cache").string();
  ScopedEnv xdg("XDG_CACHE_HOME", &cache);
  ScopedEnv env("SD_CLIP_VOCAB", nullptr);

  EXPECT_EQ(find_clip_vocab(flagged, (root / "model").string()), flagged);
  EXPECT_EQ(find_clip_vocab("", (root / "model").string()), merges);
  EXPECT_EQ(find_clip_vocab("", ""), cached);
  {
    ScopedEnv set("SD_CLIP_VOCAB", &flagged);
    EXPECT_EQ(find_clip_vocab("", (root / "model").string()), flagged);
  }
  EXPECT_THROW(find_clip_vocab((root / "missing.gz").string(), ""), Error);
  fs::remove(cached);
  EXPECT_EQ(find_clip_vocab("", (root / "elsewhere").string()), "");  // the built-in one then
}

}  // namespace
}  // namespace sd::models
