#include "models/prompt_attention.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>

#include "tensor/error.h"
#include "test_support.h"

namespace sd::models {
namespace {

using Pieces = std::vector<PromptPiece>;

std::string describe(const Pieces& pieces) {
  std::string s;
  for (const PromptPiece& p : pieces) s += "['" + p.text + "', " + std::to_string(p.weight) + "] ";
  return s;
}

#define EXPECT_PIECES(text, ...)                             \
  do {                                                       \
    const Pieces got = parse_prompt_attention(text);         \
    const Pieces want = __VA_ARGS__;                         \
    EXPECT_EQ(got, want) << text << " -> " << describe(got); \
  } while (0)

const float k11 = 1.1f;
const float k11inv = 1 / 1.1f;

TEST(PromptAttention, PlainTextIsOnePiece) {
  EXPECT_PIECES("normal text", Pieces{{"normal text", 1.0f}});
  EXPECT_PIECES("", Pieces{{"", 1.0f}});
}

TEST(PromptAttention, RoundBracketsMultiplyByOnePointOne) {
  EXPECT_PIECES("an (important) word", Pieces{{"an ", 1.0f}, {"important", k11}, {" word", 1.0f}});
  EXPECT_PIECES("((x))", Pieces{{"x", k11 * k11}});
  EXPECT_PIECES("(unnecessary)(parens)", Pieces{{"unnecessaryparens", k11}});
}

TEST(PromptAttention, SquareBracketsDivideByOnePointOne) {
  EXPECT_PIECES("a [b] c", Pieces{{"a ", 1.0f}, {"b", k11inv}, {" c", 1.0f}});
}

TEST(PromptAttention, ExplicitWeightReplacesTheBracketFactor) {
  EXPECT_PIECES("(cat:1.3) dog", Pieces{{"cat", 1.3f}, {" dog", 1.0f}});
  EXPECT_PIECES("(cat:-0.5)", Pieces{{"cat", -0.5f}});
  EXPECT_PIECES("(cat:+.5)", Pieces{{"cat", 0.5f}});
  // std::stof reads the longest number prefix.
  EXPECT_PIECES("(cat:1.2.3)", Pieces{{"cat", 1.2f}});
  // Without an open bracket the weight is dropped.
  EXPECT_PIECES("cat:1.3) dog", Pieces{{"cat dog", 1.0f}});
  // A colon not followed by a number and ')' is text.
  EXPECT_PIECES("time: 5pm", Pieces{{"time: 5pm", 1.0f}});
}

TEST(PromptAttention, NestedExampleFromTheWebui) {
  // Float products in parse order, as sd.cpp computes them; the first '(' never closes.
  EXPECT_PIECES("a (((house:1.3)) [on] a (hill:0.5), sun, (((sky))).",
                Pieces{{"a ", 1.0f},
                       {"house", 1.3f * k11 * k11},
                       {" ", k11},
                       {"on", k11inv * k11},
                       {" a ", k11},
                       {"hill", 0.5f * k11},
                       {", sun, ", k11},
                       {"sky", k11 * k11 * k11 * k11},
                       {".", k11}});
}

TEST(PromptAttention, UnbalancedBrackets) {
  EXPECT_PIECES("(unbalanced", Pieces{{"unbalanced", k11}});
  EXPECT_PIECES("[a (b", Pieces{{"a ", k11inv}, {"b", k11inv * k11}});
  EXPECT_PIECES("a) b]", Pieces{{"a) b]", 1.0f}});
}

TEST(PromptAttention, EscapesAsSdCppHandlesThem) {
  // Only "\(" loses its backslash; the others stay as written.
  EXPECT_PIECES("\\(literal\\)", Pieces{{"(literal\\)", 1.0f}});
  EXPECT_PIECES("\\[x\\] \\\\ \\", Pieces{{"\\[x\\] \\\\ \\", 1.0f}});
  EXPECT_PIECES("(a \\(b\\))", Pieces{{"a (b\\)", k11}});
}

TEST(PromptAttention, BreakSeparatesPieces) {
  EXPECT_PIECES("a BREAK b", Pieces{{"a ", 1.0f}, {"BREAK", -1.0f}, {" b", 1.0f}});
  EXPECT_TRUE(parse_prompt_attention("a BREAK b")[1].is_break());
  // Not a word on its own: plain text.
  EXPECT_PIECES("BREAKFAST BREAK_", Pieces{{"BREAKFAST BREAK_", 1.0f}});
  EXPECT_PIECES("Bob", Pieces{{"Bob", 1.0f}});
  // Preceded by letters it still counts (each token restarts at a word boundary).
  EXPECT_PIECES("xBREAK", Pieces{{"x", 1.0f}, {"BREAK", -1.0f}});
  // Inside brackets its marker weight is scaled: it becomes weighted text.
  const Pieces in_brackets = parse_prompt_attention("(a BREAK)");
  ASSERT_EQ(in_brackets.size(), 2u) << describe(in_brackets);
  EXPECT_FALSE(in_brackets[1].is_break());
  EXPECT_EQ(in_brackets[1].weight, -1.0f * k11);
}

TEST(PromptAttention, BadWeightIsAnErrorNotACrash) {
  EXPECT_THROW(parse_prompt_attention("(x:.)"), Error);
  EXPECT_THROW(parse_prompt_attention("(x:" + std::string(60, '9') + ")"), Error);
}

std::optional<ClipTokenizer>& shared_tokenizer() {
  static std::optional<ClipTokenizer> t = []() -> std::optional<ClipTokenizer> {
    const std::string shared = test::shared_dir();
    const std::string p = shared + "/data/clip/" + kClipVocabFileName;
    if (shared.empty() || !std::filesystem::exists(p)) return std::nullopt;
    return ClipTokenizer::from_file(p);
  }();
  return t;
}

TEST(TokenizePrompt, WeightsFollowTheirTokens) {
  auto& tok = shared_tokenizer();
  if (!tok) GTEST_SKIP() << "CLIP vocabulary not in the shared data folder";
  const TokenChunks c =
      tokenize_prompt(*tok, "a (photograph:1.5) of [an astronaut]", kClipEosToken);
  ASSERT_EQ(c.ids.size(), 77u);
  const std::vector<int> head(c.ids.begin(), c.ids.begin() + 7);
  EXPECT_EQ(head, (std::vector<int>{kClipBosToken, 320, 8853, 539, 550, 18376, kClipEosToken}));
  EXPECT_EQ(c.weights[0], 1.0f);
  EXPECT_EQ(c.weights[1], 1.0f);
  EXPECT_EQ(c.weights[2], 1.5f);
  EXPECT_EQ(c.weights[3], 1.0f);
  EXPECT_EQ(c.weights[4], k11inv);
  EXPECT_EQ(c.weights[5], k11inv);
  EXPECT_EQ(c.weights[6], 1.0f);
}

TEST(TokenizePrompt, BreakPadsWithEosToTheNextWindow) {
  auto& tok = shared_tokenizer();
  if (!tok) GTEST_SKIP() << "CLIP vocabulary not in the shared data folder";
  const TokenChunks c = tokenize_prompt(*tok, "a horse BREAK a cat", 0);
  ASSERT_EQ(c.chunk_count(), 2);
  EXPECT_EQ(c.ids[1], 320);
  EXPECT_EQ(c.ids[2], 4558);
  for (int i = 3; i <= 76; ++i) EXPECT_EQ(c.ids[i], kClipEosToken) << i;  // EOS, not pad 0
  EXPECT_EQ(c.ids[77], kClipBosToken);
  EXPECT_EQ(c.ids[78], 320);
  EXPECT_EQ(c.ids[79], 2368);
  EXPECT_EQ(c.ids[80], kClipEosToken);
  EXPECT_EQ(c.ids[81], 0);
}

TEST(TokenizePrompt, LongPromptsSpanWindows) {
  auto& tok = shared_tokenizer();
  if (!tok) GTEST_SKIP() << "CLIP vocabulary not in the shared data folder";
  std::string prompt;
  for (int i = 0; i < 100; ++i) prompt += "horse ";
  const TokenChunks c = tokenize_prompt(*tok, prompt, kClipEosToken);
  ASSERT_EQ(c.chunk_count(), 2);
  EXPECT_EQ(c.ids[76], kClipEosToken);
  EXPECT_EQ(c.ids[75], 4558);
  EXPECT_EQ(c.ids[77], kClipBosToken);
  EXPECT_EQ(c.ids[77 + 25], 4558);  // the 100th horse
  EXPECT_EQ(c.ids[77 + 26], kClipEosToken);
}

}  // namespace
}  // namespace sd::models
