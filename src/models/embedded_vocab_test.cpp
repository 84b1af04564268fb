#include "models/embedded_vocab.h"

#include <gtest/gtest.h>

#include "models/bpe_tokenizer.h"
#include "models/clip_tokenizer.h"
#include "test_support.h"

namespace sd::models {
namespace {

// The built-in vocabularies tokenize as the files they were made from.
TEST(EmbeddedVocab, ClipMergesAreOpenAisList) {
  const ClipTokenizer clip = ClipTokenizer::from_merges(embedded_clip_merges());
  EXPECT_EQ(clip.vocab_size(), kClipVocabSize);
  const std::string shared = sd::test::shared_dir();
  if (shared.empty()) return;
  const ClipTokenizer file =
      ClipTokenizer::from_file(shared + "/data/clip/bpe_simple_vocab_16e6.txt.gz");
  for (const char* text :
       {"a photograph of an astronaut riding a horse", "Ünïcödé, emoji 😀 and digits 12345",
        "hello-world's   spaces\tand\nlines"})
    EXPECT_EQ(clip.encode(text), file.encode(text)) << text;
}

TEST(EmbeddedVocab, QwenTokenizerGivesQwensIds) {
  const BpeTokenizer qwen = BpeTokenizer::from_json(embedded_qwen_tokenizer_json());
  EXPECT_EQ(qwen.encode("a photograph of an astronaut riding a horse"),
            (std::vector<int>{64, 10300, 315, 458, 46633, 19837, 264, 15223}));
  EXPECT_EQ(qwen.token_id("<|im_start|>"), 151644);
}

}  // namespace
}  // namespace sd::models
