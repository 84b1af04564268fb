#include "pipeline/text_conditioner.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "backend/registry.h"
#include "io/io_test_util.h"
#include "models/prompt_attention.h"
#include "nn/random_weights.h"
#include "tensor/error.h"
#include "test_support.h"
#include "weights/model_loader.h"

namespace sd::pipeline {
namespace {

namespace fs = std::filesystem;
using models::ClipTextConfig;
using models::ClipTokenizer;

using sd::test::cpu_backend;

std::shared_ptr<const ClipTokenizer> shared_tokenizer() {
  static std::shared_ptr<const ClipTokenizer> t = []() -> std::shared_ptr<const ClipTokenizer> {
    const std::string shared = sd::test::shared_dir();
    const std::string p = shared + "/data/clip/" + models::kClipVocabFileName;
    if (shared.empty() || !fs::exists(p)) return nullptr;
    return std::make_shared<const ClipTokenizer>(ClipTokenizer::from_file(p));
  }();
  return t;
}

#define REQUIRE_TOKENIZER()            \
  const auto tok = shared_tokenizer(); \
  if (!tok) GTEST_SKIP() << "CLIP vocabulary not in the shared data folder"

// Full vocabulary (the real tokenizer's ids), tiny transformer.
ClipTextConfig tiny_config() {
  ClipTextConfig c;
  c.hidden = 8;
  c.intermediate = 16;
  c.heads = 2;
  c.layers = 2;
  return c;
}

// One window through the encoder, without the conditioner.
std::vector<float> encode_window(nn::Weights& w, const ClipTextConfig& c, const int* ids,
                                 const std::vector<float>* custom = nullptr) {
  nn::GraphRunner runner(cpu_backend());
  nn::GraphCall call;
  const std::vector<float> mask = models::clip_causal_mask(77);
  Tensor* t_ids = call.input("ids", DType::I32, make_shape({77, 1}), ids);
  Tensor* t_mask = call.input_f32("mask", make_shape({77, 77}), mask.data());
  Tensor* t_custom = nullptr;
  if (custom)
    t_custom = call.input_f32(
        "custom", make_shape({c.hidden, static_cast<int64_t>(custom->size()) / c.hidden}),
        custom->data());
  nn::Scope scope(call.ctx(), w, TextConditioner::kScope);
  return runner.run(call, models::clip_text_forward(scope, c, t_ids, t_mask, 0, t_custom));
}

TEST(ApplyTokenWeights, ScalesTokensThenRestoresTheMean) {
  // dim 2, 3 tokens.
  std::vector<float> h = {1, 2, 3, 4, 5, 6};
  apply_token_weights(h, 2, {1.0f, 2.0f, 0.5f});
  // Scaled: 1 2 6 8 2.5 3 (mean 22.5/6 = 3.75); original mean 3.5.
  const float r = 3.5f / 3.75f;
  const std::vector<float> want = {1 * r, 2 * r, 6 * r, 8 * r, 2.5f * r, 3 * r};
  EXPECT_EQ(h, want);
  std::vector<float> same = {1, 2, 3, 4, 5, 6};
  apply_token_weights(same, 2, {1.0f, 1.0f, 1.0f});
  EXPECT_EQ(same, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  // A zero new mean leaves the scaled values as they are.
  std::vector<float> zero = {1, -1, 1, -1};
  apply_token_weights(zero, 2, {2.0f, 3.0f});
  EXPECT_EQ(zero, (std::vector<float>{2, -2, 3, -3}));
  EXPECT_THROW(apply_token_weights(zero, 3, {1.0f}), Error);
}

TEST(TextConditioner, OneWindowMatchesTheEncoder) {
  REQUIRE_TOKENIZER();
  nn::RandomWeights w;
  const ClipTextConfig c = tiny_config();
  TextConditioner cond(tok, c, w, cpu_backend());
  const Conditioning out = cond.encode("a photograph of an astronaut riding a horse");
  EXPECT_EQ(out.dim, 8);
  EXPECT_EQ(out.tokens, 77);
  const models::TokenChunks chunks = cond.tokenize("a photograph of an astronaut riding a horse");
  ASSERT_EQ(chunks.ids.size(), 77u);
  EXPECT_EQ(chunks.ids[8], 4558);
  EXPECT_EQ(chunks.ids[10], models::kClipEosToken);  // SD1 pads with EOS
  EXPECT_EQ(out.context, encode_window(w, c, chunks.ids.data()));
}

TEST(TextConditioner, WeightsScaleTheirTokens) {
  REQUIRE_TOKENIZER();
  nn::RandomWeights w;
  const ClipTextConfig c = tiny_config();
  TextConditioner cond(tok, c, w, cpu_backend());
  const Conditioning plain = cond.encode("a photograph");
  const Conditioning weighted = cond.encode("a (photograph:1.5)");
  std::vector<float> want = plain.context;
  std::vector<float> weights(77, 1.0f);
  weights[2] = 1.5f;
  apply_token_weights(want, 8, weights);
  EXPECT_EQ(weighted.context, want);
  EXPECT_NE(weighted.context, plain.context);
}

TEST(TextConditioner, LongPromptsConcatenateWindows) {
  REQUIRE_TOKENIZER();
  nn::RandomWeights w;
  const ClipTextConfig c = tiny_config();
  TextConditioner cond(tok, c, w, cpu_backend());
  std::string prompt;
  for (int i = 0; i < 80; ++i) prompt += "horse ";
  const Conditioning out = cond.encode(prompt);
  EXPECT_EQ(out.tokens, 154);
  ASSERT_EQ(out.context.size(), 154u * 8u);
  const models::TokenChunks chunks = cond.tokenize(prompt);
  const std::vector<float> second = encode_window(w, c, chunks.ids.data() + 77);
  EXPECT_EQ(std::vector<float>(out.context.begin() + 77 * 8, out.context.end()), second);
}

TEST(TextConditioner, OpenClipPadsWithZero) {
  REQUIRE_TOKENIZER();
  nn::RandomWeights w;
  ClipTextConfig c = tiny_config();
  c.pad_token = ClipTextConfig::vit_h14().pad_token;
  TextConditioner cond(tok, c, w, cpu_backend());
  const models::TokenChunks chunks = cond.tokenize("a horse");
  EXPECT_EQ(chunks.ids[3], models::kClipEosToken);
  EXPECT_EQ(chunks.ids[4], 0);
}

TEST(TextConditioner, TextualInversionWordsUseTheirVectors) {
  REQUIRE_TOKENIZER();
  const ClipTextConfig c = tiny_config();
  const io::test::TempDir temp;
  const fs::path dir = temp.path();
  std::vector<float> vectors(2 * 8);
  for (size_t i = 0; i < vectors.size(); ++i) vectors[i] = 0.1f * static_cast<float>(i) - 0.5f;
  {
    nn::RandomWeights file;
    file.set("string_to_token", make_shape({1}), {265.0f});
    file.set("emb_params", make_shape({8, 2}), vectors);
    file.save_safetensors((dir / "MyStyle.safetensors").string());
    nn::RandomWeights other;  // another encoder's width: not usable here
    other.set("emb_params", make_shape({12, 1}), std::vector<float>(12, 1.0f));
    other.save_safetensors((dir / "qqzzx.safetensors").string());
  }
  nn::RandomWeights w;
  TextConditioner cond(tok, c, w, cpu_backend(), dir.string());
  const models::TokenChunks chunks = cond.tokenize("a mystyle horse, qqzzx");
  // BOS a <2 vectors> horse , <qqzzx: no vocabulary entry -> 0> EOS
  const std::vector<int> head(chunks.ids.begin(), chunks.ids.begin() + 8);
  EXPECT_EQ(head, (std::vector<int>{models::kClipBosToken, 320, 49408, 49409, 4558, 267, 0,
                                    models::kClipEosToken}));
  const Conditioning out = cond.encode("a MyStyle horse");
  const models::TokenChunks ids = cond.tokenize("a MyStyle horse");
  EXPECT_EQ(out.context, encode_window(w, c, ids.ids.data(), &vectors));
}

// Records the parameters a graph asks for, without data.
class ParamRecorder final : public nn::Weights {
 public:
  Tensor* get(Context& ctx, const std::string& name, const Shape& ne) override {
    shapes[name] = ne;
    Tensor* t = ctx.new_tensor(DType::F16, ne, name);
    t->flags |= kFlagParam;
    return t;
  }
  bool contains(const std::string&) const override { return true; }
  std::map<std::string, Shape> shapes;
};

// The parameters the encoder asks for, read through the model loader (which renames SD2's
// OpenCLIP tensors), must exist with the asked shapes. Set SD_TEST_SD15_MODEL /
// SD_TEST_SD2_MODEL to single-file checkpoints to run.
void expect_checkpoint_has_encoder(const char* env, const ClipTextConfig& config) {
  const char* path = std::getenv(env);
  if (!path || !*path) GTEST_SKIP() << env << " not set";
  weights::ModelLoader loader;
  loader.add(path);
  ParamRecorder rec;
  Context ctx;
  Tensor* ids = ctx.new_tensor(DType::I32, {77, 1});
  Tensor* mask = ctx.new_tensor(DType::F32, {77, 77});
  models::clip_text_forward(nn::Scope(ctx, rec, TextConditioner::kScope), config, ids, mask, 0);
  for (const auto& [name, ne] : rec.shapes) {
    ASSERT_TRUE(loader.contains(name)) << name << " is not in " << path;
    EXPECT_EQ(loader.find(name).ne, ne) << name;
  }
}

TEST(TextConditioner, VitL14ParametersExistInAnSd15Checkpoint) {
  expect_checkpoint_has_encoder("SD_TEST_SD15_MODEL", ClipTextConfig::vit_l14());
}

TEST(TextConditioner, VitH14ParametersExistInAnSd2Checkpoint) {
  expect_checkpoint_has_encoder("SD_TEST_SD2_MODEL", ClipTextConfig::vit_h14());
}

}  // namespace
}  // namespace sd::pipeline
