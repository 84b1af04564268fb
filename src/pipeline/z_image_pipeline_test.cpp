// Z-Image through the whole pipeline: a tiny model as its three files and a tokenizer.json,
// written by the project's own code and loaded back through the real loader with the CLI's
// file roles; and the LLM conditioner's template and emphasis on Qwen's real tokenizer.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "backend/backend.h"
#include "io/gguf_writer.h"
#include "io/io_test_util.h"
#include "io/name_conversion.h"
#include "models/bpe_tokenizer.h"
#include "pipeline/llm_conditioner.h"
#include "pipeline/stable_diffusion.h"
#include "pipeline/tiny_z_image_test_util.h"
#include "tensor/error.h"
#include "test_support.h"
#include "weights/model_loader.h"

namespace sd::pipeline {
namespace {

class TinyZImage : public ::testing::Test {
 protected:
  void SetUp() override {
    static const io::test::TempDir dir;
    static const test::TinyZImageFiles files = test::write_tiny_z_image(dir.file("z_image"));
    files_ = files;
    temp_ = dir.file("");
    options_.diffusion_model = files_.dit;
    options_.llm = files_.llm;
    options_.vae = files_.vae;
    options_.threads = 2;
    options_.note = [this](const std::string& n) { notes_.push_back(n); };
    request_.prompt = "a (cat:1.2)";
    request_.width = request_.height = 16;
    request_.steps = 2;
    request_.cfg_scale = 1.0f;
    // The tokenizer is found next to the LLM file, not through the environment.
    const char* env = std::getenv("SD_QWEN_TOKENIZER");
    saved_env_ = env ? env : "";
    unsetenv("SD_QWEN_TOKENIZER");
  }
  void TearDown() override {
    if (!saved_env_.empty()) setenv("SD_QWEN_TOKENIZER", saved_env_.c_str(), 1);
  }
  std::string error_of(const ModelOptions& o) {
    try {
      StableDiffusion sd(o);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  test::TinyZImageFiles files_;
  std::string temp_, saved_env_;
  std::vector<std::string> notes_;
  ModelOptions options_;
  ImageRequest request_;
};

TEST_F(TinyZImage, IsDetectedAndGenerates) {
  StableDiffusion sd(options_);
  EXPECT_EQ(sd.version(), io::ModelVersion::ZImage);
  EXPECT_EQ(sd.prediction(), sampling::Prediction::Sd3Flow);
  EXPECT_EQ(sd.default_sample_method(), sampling::SampleMethod::Euler);
  const io::Image a = sd.generate(request_)[0];
  EXPECT_EQ(a.width, 16);
  EXPECT_EQ(a.height, 16);
  // The same request gives the same image; the prompt, its emphasis, the seed and the
  // guidance with a negative prompt each change it.
  EXPECT_EQ(sd.generate(request_)[0].pixels, a.pixels);
  ImageRequest r = request_;
  r.prompt = "a cat";
  EXPECT_NE(sd.generate(r)[0].pixels, a.pixels);
  r = request_;
  r.seed = 7;
  EXPECT_NE(sd.generate(r)[0].pixels, a.pixels);
  r = request_;
  r.cfg_scale = 3.0f;
  r.negative_prompt = "a dog";
  EXPECT_NE(sd.generate(r)[0].pixels, a.pixels);
}

TEST_F(TinyZImage, OddSizesPadTheImageTokens) {
  // 24x40 pixels: a 12x20 latent, 6x10 patches = 60 image tokens, padded to 64.
  request_.width = 24;
  request_.height = 40;
  StableDiffusion sd(options_);
  const io::Image image = sd.generate(request_)[0];
  EXPECT_EQ(image.width, 24);
  EXPECT_EQ(image.height, 40);
}

TEST_F(TinyZImage, MissingTokenizerSaysWhereToGetIt) {
  ModelOptions o = options_;
  o.llm_tokenizer = temp_ + "/no_such_tokenizer.json";
  const std::string e = error_of(o);
  EXPECT_NE(e.find("no_such_tokenizer.json"), std::string::npos) << e;
}

TEST_F(TinyZImage, ATokenizerOfAnotherModelIsRefused) {
  // More tokens than the LLM has embeddings: the tokenizer.json of a bigger vocabulary.
  std::string json = test::tiny_bpe_tokenizer_json();
  const std::string last = R"({"id": 261, "content": "<|im_end|>", "special": true})";
  json.replace(json.find(last), last.size(),
               last + R"(, {"id": 999, "content": "<|extra|>", "special": true})");
  const std::string path = temp_ + "/big_tokenizer.json";
  std::ofstream(path) << json;
  ModelOptions o = options_;
  o.llm_tokenizer = path;
  const std::string e = error_of(o);
  EXPECT_NE(e.find("does not belong to this"), std::string::npos) << e;
}

TEST_F(TinyZImage, AnLlmOfAnotherWidthIsNamedByItsFlag) {
  static const io::test::TempDir dir;
  models::LlmConfig wide = test::tiny_qwen3_config();
  wide.hidden = 48;
  const test::TinyZImageFiles other =
      test::write_tiny_z_image(dir.file("wide"), test::tiny_z_image_config(), wide);
  ModelOptions o = options_;
  o.llm = other.llm;
  const std::string e = error_of(o);
  EXPECT_NE(e.find("--llm"), std::string::npos) << e;
  EXPECT_NE(e.find("48"), std::string::npos) << e;
}

TEST_F(TinyZImage, AQwen25VlTextModelIsNotQwen3) {
  static const io::test::TempDir dir;
  models::LlmConfig vl = test::tiny_qwen3_config();
  vl.arch = models::LlmArch::Qwen2_5_VL;
  vl.qkv_bias = true;
  vl.qk_norm = false;
  const test::TinyZImageFiles other =
      test::write_tiny_z_image(dir.file("vl"), test::tiny_z_image_config(), vl);
  ModelOptions o = options_;
  o.llm = other.llm;
  const std::string e = error_of(o);
  EXPECT_NE(e.find("--llm file is not a Qwen3"), std::string::npos) << e;
}

TEST_F(TinyZImage, APromptPastTheLimitIsRefusedBeforeSampling) {
  StableDiffusion sd(options_);
  std::string prompt;
  for (int i = 0; i < kLlmMaxPromptTokens; ++i) prompt += " cat";
  request_.prompt = prompt;
  try {
    sd.generate(request_);
    ADD_FAILURE() << "a prompt of " << kLlmMaxPromptTokens << " words was encoded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shorten the prompt"), std::string::npos) << e.what();
  }
}

TEST_F(TinyZImage, ClipAndT5FilesAreNotRead) {
  StableDiffusion plain(options_);
  const io::Image a = plain.generate(request_)[0];
  ModelOptions o = options_;
  o.t5xxl = files_.llm;  // any file: it is only noted
  notes_.clear();
  StableDiffusion sd(o);
  EXPECT_EQ(sd.generate(request_)[0].pixels, a.pixels);
  bool warned = false;
  for (const std::string& n : notes_) warned = warned || n.find("not used") != std::string::npos;
  EXPECT_TRUE(warned);
}

// llama.cpp's name of a Hugging Face decoder name below the LLM root (the converter's
// table for Qwen3), for writing the GGUF a user would download.
std::string llama_cpp_name(const std::string& hf) {
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  const std::pair<const char*, const char*> parts[] = {
      {"input_layernorm", "attn_norm"},    {"post_attention_layernorm", "ffn_norm"},
      {"self_attn.q_proj", "attn_q"},      {"self_attn.k_proj", "attn_k"},
      {"self_attn.v_proj", "attn_v"},      {"self_attn.o_proj", "attn_output"},
      {"self_attn.q_norm", "attn_q_norm"}, {"self_attn.k_norm", "attn_k_norm"},
      {"mlp.gate_proj", "ffn_gate"},       {"mlp.up_proj", "ffn_up"},
      {"mlp.down_proj", "ffn_down"}};
  const std::string layers = "model.layers.";
  EXPECT_EQ(hf.rfind(layers, 0), 0u) << hf;
  const size_t dot = hf.find('.', layers.size());
  const std::string block = hf.substr(layers.size(), dot - layers.size());
  std::string rest = hf.substr(dot + 1);
  for (const auto& [from, to] : parts)
    if (rest.rfind(from, 0) == 0) rest = to + rest.substr(std::string(from).size());
  return "blk." + block + "." + rest;
}

// A Qwen3 GGUF as llama.cpp writes it: its names, and its tokenizer in the metadata (no
// tokenizer.json anywhere): the same image as the safetensors file with its tokenizer.json.
TEST_F(TinyZImage, AGgufLlmWithItsOwnTokenizerGivesTheSameImage) {
  const io::Image expected = StableDiffusion(options_).generate(request_)[0];
  static const io::test::TempDir dir;
  const std::string gguf = dir.file("qwen3-tiny.gguf");
  weights::ModelLoader loader;
  loader.add(files_.llm, io::FileRole::Llm);
  io::GgufWriter w;
  w.add("general.architecture", io::GgufValue::string("qwen3"));
  w.add("tokenizer.ggml.model", io::GgufValue::string("gpt2"));
  w.add("tokenizer.ggml.pre", io::GgufValue::string("qwen2"));
  const std::string g = test::byte_symbol(' ');
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(test::byte_symbol(b));
  for (const std::string& t : {g + "c", std::string("at"), g + "cat", g + "a",
                               std::string("<|im_start|>"), std::string("<|im_end|>")})
    tokens.push_back(t);
  std::vector<int32_t> types(tokens.size(), 1);
  types[260] = types[261] = 3;  // control tokens
  w.add("tokenizer.ggml.tokens", io::GgufValue::string_array(tokens));
  w.add("tokenizer.ggml.merges",
        io::GgufValue::string_array({g + " c", "a t", g + "c at", g + " a"}));
  w.add("tokenizer.ggml.token_type",
        io::GgufValue::packed_array(io::GgufType::I32, types.data(), types.size()));
  for (const auto& [name, source] : loader.tensors()) {
    const std::string hf = name.substr(io::kLlmRoot.size());
    std::vector<int64_t> ne(source.ne.begin(), source.ne.begin() + source.n_dims);
    w.add_tensor(llama_cpp_name(hf), source.stored, ne,
                 [&loader, name = name, type = source.stored, ne = source.ne](io::GgufSink& sink) {
                   std::vector<uint8_t> bytes(row_size(type, ne[0]) * ne[1] * ne[2] * ne[3]);
                   loader.read(name, type, bytes.data());
                   sink.write(bytes.data(), bytes.size());
                 });
  }
  w.write(gguf);
  ModelOptions o = options_;
  o.llm = gguf;
  EXPECT_EQ(StableDiffusion(o).generate(request_)[0].pixels, expected.pixels);
}

// Qwen's chat template around the prompt as sd.cpp sends it for Z-Image, on the real
// tokenizer: 16 ids for this prompt, template tokens kept, weight 1 but for the emphasis.
TEST(LlmConditioner, ZImageTemplateOnQwensTokenizer) {
  const std::string shared = sd::test::shared_dir();
  if (shared.empty()) GTEST_SKIP() << "needs ../shared/data/qwen/tokenizer.json";
  const models::BpeTokenizer qwen =
      models::BpeTokenizer::from_file(shared + "/data/qwen/tokenizer.json");
  LlmPromptFormat format;
  format.before = "<|im_start|>user\n";
  format.after = "<|im_end|>\n<|im_start|>assistant\n";
  const LlmTokens t =
      llm_tokenize_prompt(qwen, format, "a photograph of an astronaut riding a horse");
  EXPECT_EQ(t.ids, (std::vector<int>{151644, 872, 198, 64, 10300, 315, 458, 46633, 19837, 264,
                                     15223, 151645, 198, 151644, 77091, 198}));
  EXPECT_EQ(t.weights, std::vector<float>(16, 1.0f));
  // Emphasis: the bracket text is weighted and dropped; the pieces are tokenized apart.
  const LlmTokens e = llm_tokenize_prompt(qwen, format, "a (horse:1.5) BREAK [cat]");
  std::vector<int> horse = qwen.encode("horse");
  ASSERT_EQ(horse.size(), 1u);
  size_t at = 0;
  while (at < e.ids.size() && e.ids[at] != horse[0]) ++at;
  ASSERT_LT(at, e.ids.size());
  EXPECT_FLOAT_EQ(e.weights[at], 1.5f);
  EXPECT_FLOAT_EQ(e.weights[e.ids.size() - 6], 1.0f / 1.1f);  // "cat", before the template end
  EXPECT_EQ(qwen.decode(e.ids),
            "<|im_start|>user\na horse  cat<|im_end|>\n<|im_start|>assistant\n");
}

}  // namespace
}  // namespace sd::pipeline
