// Quantized FLUX.1: the transformer (and T5) converted to GGUF block types by `-M convert`,
// loaded back through the CLI's file roles and run with matmuls from the quantized blocks.
// The image must stay close to the f16 files' (a bound per type, from its bits per weight)
// and the weights must stay in their block type in memory (fewer resident bytes).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>

#include "api/convert.h"
#include "image_psnr.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "io/io_test_util.h"
#include "pipeline/stable_diffusion.h"
#include "pipeline/tiny_model_test_util.h"
#include "test_support.h"

namespace sd::api {
namespace {

// 256-wide so the 256-element K-quant blocks fit every block weight.
models::FluxConfig k_quant_sized_flux() {
  models::FluxConfig c = pipeline::test::tiny_flux_config();
  c.hidden = 256;
  c.heads = 2;
  c.mlp_hidden = 256;
  return c;
}

class QuantizedFlux : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new io::test::TempDir;
    files_ = new pipeline::test::TinyFluxFiles(
        pipeline::test::write_tiny_flux(dir_->file("flux"), 32, true, k_quant_sized_flux()));
  }
  static void TearDownTestSuite() {
    delete files_;
    delete dir_;
  }
  void SetUp() override {
    const std::string shared = sd::test::shared_dir();
    if (shared.empty()) GTEST_SKIP() << "needs ../shared/data/clip for the CLIP vocabulary";
    options_.diffusion_model = files_->dit;
    options_.t5xxl = files_->t5;
    options_.clip_l = files_->clip_l;
    options_.vae = files_->vae;
    options_.t5_tokenizer = files_->dir + "/tokenizer.json";
    options_.clip_vocab = shared + "/data/clip/bpe_simple_vocab_16e6.txt.gz";
    options_.threads = 2;
    request_.prompt = "a cat";
    request_.width = request_.height = 32;
    request_.steps = 2;
    request_.cfg_scale = 1.0f;
  }

  // `-M convert -m FILE` (names as stored), or with the part's flag (`--diffusion-model`,
  // `--t5xxl`: names under the part's root) when `part` names the ConvertParts field.
  std::string convert(const std::string& input, DType type,
                      std::string ConvertParts::*part = nullptr) {
    const std::string out =
        dir_->file(std::filesystem::path(input).stem().string() + "_" +
                   std::string(dtype_name(type)) + (part ? "_part" : "") + ".gguf");
    if (std::filesystem::exists(out)) return out;
    ConvertParts parts;
    if (part) parts.*part = input;
    convert_model({part ? "" : input, out, "", type, "", nullptr}, parts);
    return out;
  }

  static io::test::TempDir* dir_;
  static pipeline::test::TinyFluxFiles* files_;
  pipeline::ModelOptions options_;
  pipeline::ImageRequest request_;
};
io::test::TempDir* QuantizedFlux::dir_ = nullptr;
pipeline::test::TinyFluxFiles* QuantizedFlux::files_ = nullptr;

struct TypeBound {
  DType type;
  double min_psnr_db;  // against the f16 files' image
};

class QuantizedFluxTypes : public QuantizedFlux, public ::testing::WithParamInterface<TypeBound> {};

TEST_P(QuantizedFluxTypes, RunsFromTheBlocksCloseToF16) {
  const TypeBound tb = GetParam();
  pipeline::StableDiffusion f16_model(options_);
  const io::Image f16 = f16_model.generate(request_)[0];
  const size_t f16_bytes = f16_model.resident_weight_bytes();

  pipeline::ModelOptions q = options_;
  q.diffusion_model = convert(files_->dit, tb.type);
  // The block weights are stored quantized; the embedders, final layer, norms and biases
  // are kept as sd.cpp keeps them.
  const io::GgufFile gguf = io::GgufFile::open(q.diffusion_model);
  size_t quantized = 0;
  for (const io::TensorInfo& t : gguf.tensors()) quantized += t.dtype == tb.type;
  EXPECT_GT(quantized, 10u);

  pipeline::StableDiffusion sd(q);
  EXPECT_EQ(sd.version(), io::ModelVersion::Flux);
  const io::Image a = sd.generate(request_)[0];
  EXPECT_EQ(sd.generate(request_)[0].pixels, a.pixels) << "same seed, same image";
  std::printf("resident weights: %zu bytes, with the f16 transformer %zu\n",
              sd.resident_weight_bytes(), f16_bytes);
  EXPECT_LT(sd.resident_weight_bytes(), f16_bytes) << "quantized weights must stay in their blocks";
  const double db = sd::test::image_psnr(a, f16);
  std::printf("%s transformer: PSNR %.2f dB against f16\n",
              std::string(dtype_name(tb.type)).c_str(), db);
  EXPECT_GE(db, tb.min_psnr_db);
  EXPECT_LT(db, 99.0) << "quantization should change something";
}

INSTANTIATE_TEST_SUITE_P(Types, QuantizedFluxTypes,
                         // Measured: 55, 48, 43, 39 and 37 dB; each bound leaves ~8 dB.
                         ::testing::Values(TypeBound{DType::Q8_0, 46.0},
                                           TypeBound{DType::Q6_K, 40.0},
                                           TypeBound{DType::Q5_K, 35.0},
                                           TypeBound{DType::Q4_K, 31.0},
                                           TypeBound{DType::Q4_0, 29.0}),
                         [](const auto& info) { return std::string(dtype_name(info.param.type)); });

TEST_F(QuantizedFlux, Q8T5AndTransformerTogether) {
  const io::Image f16 = pipeline::StableDiffusion(options_).generate(request_)[0];
  pipeline::ModelOptions q = options_;
  q.diffusion_model = convert(files_->dit, DType::Q8_0, &ConvertParts::diffusion_model);
  q.t5xxl = convert(files_->t5, DType::Q8_0, &ConvertParts::t5xxl);
  const io::GgufFile t5 = io::GgufFile::open(q.t5xxl);
  for (const io::TensorInfo& t : t5.tensors())
    EXPECT_EQ(t.name.rfind("text_encoders.t5xxl.transformer.", 0), 0u) << t.name;  // sd.cpp's
  const double db = sd::test::image_psnr(pipeline::StableDiffusion(q).generate(request_)[0], f16);
  std::printf("q8_0 transformer and T5: PSNR %.2f dB against f16\n", db);
  EXPECT_GE(db, 46.0);  // measured 54 dB
}

// The llama.cpp spelling of a Hugging Face T5 encoder name (what T5 GGUF files published
// for FLUX.1 hold); the loader maps them back (io/t5_gguf_names.h).
std::string llama_cpp_t5_name(std::string name) {
  const std::pair<const char*, const char*> renames[] = {
      {"shared.", "token_embd."},
      {"encoder.final_layer_norm.", "enc.output_norm."},
      {"encoder.block.", "enc.blk."},
      {"layer.0.SelfAttention.relative_attention_bias.", "attn_rel_b."},
      {"layer.0.SelfAttention.q.", "attn_q."},
      {"layer.0.SelfAttention.k.", "attn_k."},
      {"layer.0.SelfAttention.v.", "attn_v."},
      {"layer.0.SelfAttention.o.", "attn_o."},
      {"layer.0.layer_norm.", "attn_norm."},
      {"layer.1.layer_norm.", "ffn_norm."},
      {"layer.1.DenseReluDense.wi_0.", "ffn_gate."},
      {"layer.1.DenseReluDense.wi_1.", "ffn_up."},
      {"layer.1.DenseReluDense.wo.", "ffn_down."},
  };
  for (const auto& [from, to] : renames) {
    const size_t at = name.find(from);
    if (at != std::string::npos) name.replace(at, std::string(from).size(), to);
  }
  return name;
}

TEST_F(QuantizedFlux, T5InLlamaCppNamesGivesTheSameImage) {
  const std::string q8 = convert(files_->t5, DType::Q8_0, &ConvertParts::t5xxl);
  const io::GgufFile in = io::GgufFile::open(q8);
  io::GgufWriter writer;
  size_t renamed = 0;
  for (const io::TensorInfo& t : in.tensors()) {
    const std::string name = llama_cpp_t5_name(t.name);
    renamed += name != t.name;
    const io::TensorInfo* info = &t;
    writer.add_tensor(name, t.dtype, std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims),
                      [&in, info](io::GgufSink& sink) { sink.write(in.data(*info), info->size); });
  }
  EXPECT_EQ(renamed, in.tensors().size());
  const std::string llama = dir_->file("t5_llama_names.gguf");
  writer.write(llama);

  pipeline::ModelOptions a = options_, b = options_;
  a.t5xxl = q8;
  b.t5xxl = llama;
  EXPECT_EQ(pipeline::StableDiffusion(b).generate(request_)[0].pixels,
            pipeline::StableDiffusion(a).generate(request_)[0].pixels);
}

// Every root sd.cpp reads T5 under gives the same image: the converted file's own
// text_encoders.t5xxl.transformer., no root (a --t5xxl file's Hugging Face names), the
// shorter text_encoders.t5xxl., and llama.cpp's names under the root.
TEST_F(QuantizedFlux, EveryT5RootGivesTheSameImage) {
  const std::string q8 = convert(files_->t5, DType::Q8_0, &ConvertParts::t5xxl);
  const io::GgufFile in = io::GgufFile::open(q8);
  const std::string root = "text_encoders.t5xxl.transformer.";
  const std::pair<const char*, std::function<std::string(const std::string&)>> spellings[] = {
      {"bare", [&](const std::string& n) { return n.substr(root.size()); }},
      {"short",
       [&](const std::string& n) { return "text_encoders.t5xxl." + n.substr(root.size()); }},
      {"llama", [](const std::string& n) { return llama_cpp_t5_name(n); }},
  };
  pipeline::ModelOptions o = options_;
  o.t5xxl = q8;
  const std::vector<uint8_t> want = pipeline::StableDiffusion(o).generate(request_)[0].pixels;
  for (const auto& [label, spell] : spellings) {
    io::GgufWriter writer;
    for (const io::TensorInfo& t : in.tensors()) {
      ASSERT_EQ(t.name.rfind(root, 0), 0u) << t.name;
      const io::TensorInfo* info = &t;
      writer.add_tensor(
          spell(t.name), t.dtype, std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims),
          [&in, info](io::GgufSink& sink) { sink.write(in.data(*info), info->size); });
    }
    o.t5xxl = dir_->file(std::string("t5_") + label + ".gguf");
    writer.write(o.t5xxl);
    EXPECT_EQ(pipeline::StableDiffusion(o).generate(request_)[0].pixels, want) << label;
  }
}

}  // namespace
}  // namespace sd::api
