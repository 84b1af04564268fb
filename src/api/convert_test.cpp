#include "api/convert.h"
#include "weights/weight_type.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "io/io_test_util.h"
#include "tensor/error.h"
#include "tensor/quant/quant.h"

namespace sd::api {
namespace {

using io::test::Bytes;
using io::test::TempDir;

// A tensor of the test checkpoint: values in f32, stored as f32 or f16.
struct Source {
  std::string name;
  std::vector<uint64_t> shape;  // safetensors order: slowest first
  bool f16 = false;
  std::vector<float> values;  // exactly what the file holds, as f32
};

Bytes encode(const Source& s) {
  Bytes b;
  if (s.f16) {
    b.resize(s.values.size() * 2);
    quantize_row(DType::F16, s.values.data(), b.data(), static_cast<int64_t>(s.values.size()));
  } else {
    b.resize(s.values.size() * 4);
    std::memcpy(b.data(), s.values.data(), b.size());
  }
  return b;
}

Source make(std::string name, std::vector<uint64_t> shape, bool f16, uint32_t seed) {
  Source s{std::move(name), std::move(shape), f16, {}};
  size_t n = 1;
  for (uint64_t d : s.shape) n *= d;
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.5f);
  s.values.resize(n);
  for (float& v : s.values) v = dist(rng);
  if (f16) {  // round through f16 so `values` is what the file holds
    Bytes b = encode(s);
    dequantize_row(DType::F16, b.data(), s.values.data(), static_cast<int64_t>(n));
  }
  return s;
}

void write_safetensors(const std::string& path, const std::vector<Source>& sources) {
  io::test::SafetensorsBuilder b;
  for (const Source& s : sources) b.add(s.name, s.f16 ? "F16" : "F32", s.shape, encode(s));
  io::test::write_file(path, b.bytes());
}

// LDM names: a 2-D f32 weight, a 2-D f16 weight, a bias, a GroupNorm weight, a 3x3 conv
// (ne0 = 3), and a time embedding (kept by name).
std::vector<Source> checkpoint() {
  const std::string u = "model.diffusion_model.";
  return {
      make(u + "input_blocks.1.1.proj_in.weight", {8, 512}, false, 1),
      make(u + "input_blocks.1.1.proj_in.bias", {8}, false, 2),
      make(u + "input_blocks.1.1.norm.weight", {256}, false, 3),
      make(u + "middle_block.1.proj_out.weight", {4, 256}, true, 4),
      make(u + "input_blocks.0.0.weight", {4, 4, 3, 3}, false, 5),
      make(u + "time_embed.0.weight", {4, 256}, false, 6),
  };
}

struct Fixture {
  TempDir dir;
  std::vector<Source> sources = checkpoint();
  std::string input = dir.file("model.safetensors");
  std::string output = dir.file("out.gguf");
  Fixture() { write_safetensors(input, sources); }
};

// The bytes `type` gives for the source, as sd.cpp writes them (all-ones imatrix).
Bytes expected_bytes(const Source& s, DType type) {
  const auto ne0 = static_cast<int64_t>(s.shape.back());
  const auto rows = static_cast<int64_t>(s.values.size()) / ne0;
  if (type == (s.f16 ? DType::F16 : DType::F32)) return encode(s);
  Bytes out(row_size(type, ne0) * static_cast<size_t>(rows));
  const std::vector<float> ones(static_cast<size_t>(ne0), 1.0f);
  quantize_rows(type, s.values.data(), out.data(), rows, ne0, ones.data());
  return out;
}

void expect_tensor(const io::GgufFile& f, const Source& s, DType type) {
  const io::TensorInfo* t = f.find(s.name);
  ASSERT_NE(t, nullptr) << s.name;
  EXPECT_EQ(t->dtype, type) << s.name << ": " << dtype_name(t->dtype);
  for (size_t i = 0; i < s.shape.size(); ++i) {
    EXPECT_EQ(t->ne[i], static_cast<int64_t>(s.shape[s.shape.size() - 1 - i])) << s.name;
  }
  const Bytes want = expected_bytes(s, type);
  ASSERT_EQ(t->size, want.size()) << s.name;
  EXPECT_EQ(std::memcmp(f.data(*t), want.data(), want.size()), 0) << s.name << " bytes differ";
}

class ConvertTypes : public ::testing::TestWithParam<DType> {};

TEST_P(ConvertTypes, KeepsAndQuantizesAsSdCppDoes) {
  Fixture fx;
  const DType q = GetParam();
  ConvertOptions o;
  o.input = fx.input;
  o.output = fx.output;
  o.type = q;
  size_t calls = 0;
  ConvertProgress last;
  o.progress = [&](const ConvertProgress& p) {
    ++calls;
    last = p;
  };
  const ConvertResult r = convert_model(o);
  EXPECT_EQ(r.tensors, fx.sources.size());
  EXPECT_EQ(calls, fx.sources.size());
  EXPECT_EQ(last.index, last.count);
  EXPECT_EQ(last.bytes_written, last.bytes_total);

  const io::GgufFile f = io::GgufFile::open(fx.output);
  EXPECT_EQ(f.get_u64("general.quantization_version"), 2u);
  EXPECT_EQ(f.get_string("sd.convert.type"), std::string(dtype_name(q)));
  expect_tensor(f, fx.sources[0], q);           // 2-D f32 weight
  expect_tensor(f, fx.sources[1], DType::F32);  // bias: kept
  expect_tensor(f, fx.sources[2], q);           // 1-D norm with ne0 = 256: quantized
  expect_tensor(f, fx.sources[3], q);           // f16 weight
  expect_tensor(f, fx.sources[4], DType::F32);  // 3x3 conv: ne0 = 3
  expect_tensor(f, fx.sources[5], DType::F32);  // time_embed: kept by name
  EXPECT_FALSE(std::filesystem::exists(fx.output + ".tmp"));
}

INSTANTIATE_TEST_SUITE_P(Types, ConvertTypes, ::testing::Values(DType::Q8_0, DType::Q4_K),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Convert, WithoutTypeKeepsEverything) {
  Fixture fx;
  convert_model({fx.input, fx.output, "", std::nullopt, "", nullptr});
  const io::GgufFile f = io::GgufFile::open(fx.output);
  for (const Source& s : fx.sources) expect_tensor(f, s, s.f16 ? DType::F16 : DType::F32);
}

TEST(Convert, ReadsGgufInputFoundByMagic) {
  Fixture fx;
  // A kept-type GGUF under a misleading name, converted again, gives what the original does.
  const std::string mid = fx.dir.file("kept.safetensors");
  convert_model({fx.input, mid, "", std::nullopt, "", nullptr});
  convert_model({mid, fx.output, "", DType::Q4_K, "", nullptr});
  const io::GgufFile f = io::GgufFile::open(fx.output);
  expect_tensor(f, fx.sources[0], DType::Q4_K);
  expect_tensor(f, fx.sources[3], DType::Q4_K);
  expect_tensor(f, fx.sources[4], DType::F32);
}

TEST(Convert, FirstMatchingRuleWinsAndKeepRulesStillApply) {
  Fixture fx;
  ConvertOptions o{fx.input, fx.output, "", DType::Q8_0, "proj_in=q4_0,proj=F16,,norm=f32",
                   nullptr};
  convert_model(o);
  const io::GgufFile f = io::GgufFile::open(fx.output);
  expect_tensor(f, fx.sources[0], DType::Q4_0);  // proj_in (first rule; not 'proj')
  expect_tensor(f, fx.sources[1], DType::F32);   // proj_in.bias: a bias stays
  expect_tensor(f, fx.sources[2], DType::F32);   // norm=f32
  expect_tensor(f, fx.sources[3], DType::F16);   // proj_out matches 'proj'
  expect_tensor(f, fx.sources[5], DType::F32);   // time_embed: kept by name
}

TEST(Convert, VaeFileReplacesTheCheckpointsVae) {
  Fixture fx;
  std::vector<Source> model = fx.sources;
  model.push_back(make("first_stage_model.decoder.conv_in.weight", {2, 256}, false, 7));
  write_safetensors(fx.input, model);
  Source vae = make("decoder.conv_in.weight", {2, 256}, false, 8);
  const std::string vae_path = fx.dir.file("vae.safetensors");
  write_safetensors(vae_path, {vae});
  convert_model({fx.input, fx.output, vae_path, DType::F16, "", nullptr});
  const io::GgufFile f = io::GgufFile::open(fx.output);
  vae.name = "first_stage_model.decoder.conv_in.weight";
  expect_tensor(f, vae, DType::F16);
  EXPECT_EQ(f.tensors().size(), model.size());
}

TEST(Convert, DiffusersFolderGetsCanonicalNames) {
  TempDir dir;
  const auto root = dir.path() / "pipe";
  std::filesystem::create_directories(root / "unet");
  std::filesystem::create_directories(root / "vae");
  io::test::write_file((root / "model_index.json").string(),
                       Bytes{'{', '}'});  // content unread beyond JSON validity
  Source q =
      make("down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q.weight", {4, 256}, true, 9);
  Source conv = make("conv_in.weight", {4, 4, 3, 3}, true, 10);
  // Blocks of the second level, the middle and the decoder side map by position.
  Source res = make("down_blocks.1.resnets.0.conv1.weight", {8, 4, 3, 3}, true, 12);
  Source mid = make("mid_block.attentions.0.proj_in.weight", {8, 256}, false, 13);
  Source up = make("up_blocks.0.resnets.2.conv2.weight", {8, 8, 3, 3}, true, 14);
  Source time = make("time_embedding.linear_1.weight", {16, 256}, false, 15);
  write_safetensors((root / "unet" / "diffusion_pytorch_model.safetensors").string(),
                    {q, conv, res, mid, up, time});
  // A diffusers VAE attention Linear [C, C] becomes an LDM 1x1 conv [C, C, 1, 1].
  Source vq = make("encoder.mid_block.attentions.0.to_q.weight", {2, 256}, false, 11);
  write_safetensors((root / "vae" / "diffusion_pytorch_model.safetensors").string(), {vq});
  const std::string out = dir.file("out.gguf");
  convert_model({root.string(), out, "", DType::Q8_0, "", nullptr});
  const io::GgufFile f = io::GgufFile::open(out);
  ASSERT_EQ(f.tensors().size(), 7u);
  q.name = "model.diffusion_model.input_blocks.1.1.transformer_blocks.0.attn1.to_q.weight";
  expect_tensor(f, q, DType::Q8_0);
  conv.name = "model.diffusion_model.input_blocks.0.0.weight";
  expect_tensor(f, conv, DType::F16);
  res.name = "model.diffusion_model.input_blocks.4.0.in_layers.2.weight";
  expect_tensor(f, res, DType::F16);  // 3x3 convolutions keep their type, as in sd.cpp
  mid.name = "model.diffusion_model.middle_block.1.proj_in.weight";
  expect_tensor(f, mid, DType::Q8_0);
  up.name = "model.diffusion_model.output_blocks.2.0.out_layers.3.weight";
  expect_tensor(f, up, DType::F16);
  time.name = "model.diffusion_model.time_embed.0.weight";
  expect_tensor(f, time, DType::F32);  // sd.cpp keeps the embedders in their type
  vq.name = "first_stage_model.encoder.mid.attn_1.q.weight";
  vq.shape = {2, 256, 1, 1};
  expect_tensor(f, vq, DType::F32);  // now ne0 = 1: no block type holds it
}

TEST(Convert, ParsesTypeNames) {
  EXPECT_EQ(parse_convert_type("Q4_k"), DType::Q4_K);
  EXPECT_EQ(parse_convert_type("bf16"), DType::BF16);
  for (const char* bad : {"q9_9", "i32", "q8_K", ""}) {
    try {
      parse_convert_type(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("q4_K"), std::string::npos) << e.what();
    }
  }
}

void expect_fails(const ConvertOptions& o, const std::string& needle) {
  try {
    convert_model(o);
    ADD_FAILURE() << "expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(o.output)) << o.output;
  EXPECT_FALSE(std::filesystem::exists(o.output + ".tmp")) << o.output;
}

TEST(Convert, ErrorsLeaveNoOutput) {
  Fixture fx;
  expect_fails({fx.input, fx.output, "", DType::Q8_0, "proj=q9_9", nullptr}, "unknown type 'q9_9'");
  expect_fails({fx.input, fx.output, "", DType::Q8_0, "[proj=q8_0", nullptr}, "invalid regex");
  expect_fails({fx.input, fx.output, "", DType::Q8_0, "proj", nullptr}, "regex=type");
  expect_fails({fx.dir.file("missing.safetensors"), fx.output, "", DType::Q8_0, "", nullptr},
               "not found");
  expect_fails({fx.input, fx.output, fx.dir.file("nope.safetensors"), DType::Q8_0, "", nullptr},
               "not found");
  expect_fails({fx.input, fx.dir.file("no/such/dir/out.gguf"), "", DType::Q8_0, "", nullptr},
               "does not exist");
  // A file that is not a model fails in its reader, before anything is written.
  const std::string junk = fx.dir.file("junk.safetensors");
  io::test::write_file(junk, Bytes(64, 0xff));
  expect_fails({junk, fx.output, "", DType::Q8_0, "", nullptr}, "junk.safetensors");
}

TEST(Convert, KeepRules) {
  EXPECT_FALSE(weights::takes_weight_type("a.weight", 3, DType::F32, DType::Q8_0));
  EXPECT_TRUE(weights::takes_weight_type("a.weight", 3, DType::F32, DType::F16));
  EXPECT_FALSE(weights::takes_weight_type("a.bias", 256, DType::F32, DType::Q8_0));
  EXPECT_FALSE(weights::takes_weight_type("a.bias", 256, DType::F32, DType::F16));
  EXPECT_FALSE(weights::takes_weight_type("x.weight_scale", 256, DType::F32, DType::Q8_0));
  EXPECT_FALSE(
      weights::takes_weight_type("double_blocks.img_in.weight", 256, DType::F32, DType::Q8_0));
  EXPECT_FALSE(weights::takes_weight_type("model.diffusion_model.label_emb.0.0.weight", 256,
                                          DType::F32, DType::Q8_0));
  EXPECT_FALSE(weights::takes_weight_type("token_embedding.weight", 768, DType::F16, DType::Q8_0));
  // ESRGAN: the dense blocks' convs take the type, the convs around the trunk keep theirs.
  EXPECT_TRUE(weights::takes_weight_type("body.0.rdb1.conv1.weight", 3, DType::F32, DType::BF16));
  for (const char* kept : {"conv_first.weight", "conv_body.weight", "conv_up1.weight",
                           "conv_up2.weight", "conv_hr.weight", "conv_last.weight"})
    EXPECT_FALSE(weights::takes_weight_type(kept, 3, DType::F32, DType::BF16)) << kept;
  EXPECT_FALSE(weights::takes_weight_type("pos", 256, DType::I32, DType::Q8_0));
  EXPECT_TRUE(weights::takes_weight_type("a.weight", 320, DType::F32, DType::Q8_0));
  EXPECT_FALSE(weights::takes_weight_type("a.weight", 320, DType::F32, DType::Q4_K));
}

TEST(Convert, ZeroSizeAndScalarTensorsAreKept) {
  TempDir dir;
  const std::string input = dir.file("model.safetensors");
  const std::string output = dir.file("out.gguf");
  std::vector<Source> sources = checkpoint();
  sources.push_back(make("model.diffusion_model.empty.weight", {0}, false, 7));
  sources.push_back(make("model.diffusion_model.empty_rows.weight", {4, 0}, true, 8));
  sources.push_back(make("model.diffusion_model.no_rows.weight", {0, 256}, false, 9));
  sources.push_back(make("model.diffusion_model.scale", {}, false, 10));
  write_safetensors(input, sources);
  const ConvertResult r = convert_model({input, output, "", DType::Q8_0, "", nullptr});
  EXPECT_EQ(r.tensors, sources.size());
  const io::GgufFile f = io::GgufFile::open(output);
  for (const char* name :
       {"model.diffusion_model.empty.weight", "model.diffusion_model.empty_rows.weight",
        "model.diffusion_model.no_rows.weight"}) {
    const io::TensorInfo* t = f.find(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->size, 0u) << name;
    EXPECT_NE(t->dtype, DType::Q8_0) << name;
  }
  const io::TensorInfo* scalar = f.find("model.diffusion_model.scale");
  ASSERT_NE(scalar, nullptr);
  EXPECT_EQ(scalar->ne[0], 1);
  float value = 0;
  ASSERT_EQ(scalar->size, sizeof value);
  std::memcpy(&value, f.data(*scalar), sizeof value);
  EXPECT_EQ(value, sources.back().values[0]);
}

}  // namespace
}  // namespace sd::api
