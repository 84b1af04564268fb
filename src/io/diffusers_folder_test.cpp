#include "io/diffusers_folder.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "io/model_version.h"
#include "io/safetensors.h"

namespace sd::io {
namespace {

namespace fs = std::filesystem;

// A tiny valid safetensors file holding `names`, each one f32 scalar-ish tensor.
void write_weights(const fs::path& path, const std::vector<std::string>& names) {
  fs::create_directories(path.parent_path());
  test::SafetensorsBuilder b;
  for (const std::string& n : names) b.add(n, "F32", {1}, test::Bytes(4, 0));
  test::write_file(path.string(), b.bytes());
}

void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  test::write_file(path.string(), test::Bytes(text.begin(), text.end()));
}

// An SD1.5-style pipeline folder.
void make_sd15(const fs::path& root) {
  write_text(
      root / "model_index.json",
      R"({"_class_name": "StableDiffusionPipeline", "unet": ["diffusers", "UNet2DConditionModel"]})");
  write_weights(root / "unet" / "diffusion_pytorch_model.safetensors", {"conv_in.weight"});
  // Only the half-precision variant: taken because it is all there is.
  write_weights(root / "vae" / "diffusion_pytorch_model.fp16.safetensors",
                {"encoder.conv_in.weight"});
  write_weights(root / "text_encoder" / "model.safetensors",
                {"text_model.final_layer_norm.weight"});
  write_text(root / "tokenizer" / "vocab.json", "{}");
}

TEST(DiffusersFolder, FindsEachPartWithItsLayout) {
  test::TempDir dir;
  make_sd15(dir.path());
  ASSERT_TRUE(is_diffusers_folder(dir.path().string()));
  DiffusersFolder f = open_diffusers_folder(dir.path().string());
  EXPECT_EQ(f.pipeline, "StableDiffusionPipeline");
  ASSERT_EQ(f.parts.size(), 3u);
  EXPECT_EQ(f.parts[0].name, "unet");
  EXPECT_EQ(f.parts[0].layout, SourceLayout::DiffusersUnet);
  EXPECT_EQ(f.parts[0].prefix, kUnetRoot);
  EXPECT_EQ(f.parts[0].files,
            std::vector<std::string>{dir.file("unet/diffusion_pytorch_model.safetensors")});
  const DiffusersPart* vae = f.find("vae");
  ASSERT_NE(vae, nullptr);
  EXPECT_EQ(vae->layout, SourceLayout::DiffusersVae);
  EXPECT_EQ(vae->files,
            std::vector<std::string>{dir.file("vae/diffusion_pytorch_model.fp16.safetensors")});
  const DiffusersPart* te = f.find("text_encoder");
  ASSERT_NE(te, nullptr);
  EXPECT_EQ(te->layout, SourceLayout::HfTransformers);
  EXPECT_EQ(te->prefix, kTextEncoderRoot);
  EXPECT_EQ(f.find("text_encoder_2"), nullptr);
  EXPECT_EQ(f.tokenizer, dir.file("tokenizer"));
  EXPECT_EQ(f.tokenizer_2, "");

  // The files open, and their names convert with the part's layout and prefix.
  SafetensorsFile st = SafetensorsFile::open(te->files[0]);
  EXPECT_EQ(to_canonical(st.tensors()[0].name, te->layout, te->prefix),
            "cond_stage_model.transformer.text_model.final_layer_norm.weight");
}

TEST(DiffusersFolder, VariantPreference) {
  test::TempDir dir;
  fs::path unet = dir.path() / "unet";
  write_weights(unet / "diffusion_pytorch_model.safetensors", {"conv_in.weight"});
  write_weights(unet / "diffusion_pytorch_model.fp16.safetensors", {"conv_in.weight"});
  write_weights(unet / "diffusion_pytorch_model.bin", {"conv_in.weight"});  // content unread
  EXPECT_EQ(open_diffusers_folder(dir.path().string()).parts[0].files[0],
            (unet / "diffusion_pytorch_model.safetensors").string());
  EXPECT_EQ(open_diffusers_folder(dir.path().string(), "fp16").parts[0].files[0],
            (unet / "diffusion_pytorch_model.fp16.safetensors").string());
  // A variant that is absent falls back on the full-precision file.
  EXPECT_EQ(open_diffusers_folder(dir.path().string(), "bf16").parts[0].files[0],
            (unet / "diffusion_pytorch_model.safetensors").string());
  // PyTorch files only when no safetensors exist.
  fs::remove(unet / "diffusion_pytorch_model.safetensors");
  fs::remove(unet / "diffusion_pytorch_model.fp16.safetensors");
  EXPECT_EQ(open_diffusers_folder(dir.path().string()).parts[0].files[0],
            (unet / "diffusion_pytorch_model.bin").string());
}

TEST(DiffusersFolder, ShardedWeights) {
  test::TempDir dir;
  fs::path unet = dir.path() / "unet";
  write_weights(unet / "diffusion_pytorch_model-00002-of-00002.safetensors", {"conv_out.weight"});
  write_weights(unet / "diffusion_pytorch_model-00001-of-00002.safetensors", {"conv_in.weight"});
  write_text(unet / "diffusion_pytorch_model.safetensors.index.json",
             R"({"metadata": {"total_size": 8}, "weight_map": {
                  "conv_out.weight": "diffusion_pytorch_model-00002-of-00002.safetensors",
                  "conv_in.weight": "diffusion_pytorch_model-00001-of-00002.safetensors",
                  "conv_in.bias": "diffusion_pytorch_model-00001-of-00002.safetensors"}})");
  DiffusersFolder f = open_diffusers_folder(dir.path().string());
  EXPECT_EQ(f.parts[0].files,
            (std::vector<std::string>{
                (unet / "diffusion_pytorch_model-00001-of-00002.safetensors").string(),
                (unet / "diffusion_pytorch_model-00002-of-00002.safetensors").string()}));
}

TEST(DiffusersFolder, BadShardIndexes) {
  test::TempDir dir;
  std::string index = dir.file("model.safetensors.index.json");
  write_text(index, R"({"weight_map": {"a": "missing.safetensors"}})");
  test::expect_error([&] { read_shard_index(index); },
                     {index, "names shard 'missing.safetensors', which is missing"});
  write_text(index, R"({"weight_map": {"a": "../outside.safetensors"}})");
  test::expect_error([&] { read_shard_index(index); },
                     {"'../outside.safetensors'", "not a file name"});
  write_text(index, R"({"weight_map": {"a": 3}})");
  test::expect_error([&] { read_shard_index(index); }, {"maps 'a' to a non-string"});
  write_text(index, R"({"weight_map": {}})");
  test::expect_error([&] { read_shard_index(index); }, {"lists no tensors"});
  write_text(index, R"({"metadata": {}})");
  test::expect_error([&] { read_shard_index(index); }, {"no \"weight_map\""});
  write_text(index, R"({"weight_map": {"a": )");
  test::expect_error([&] { read_shard_index(index); }, {index, "not valid JSON"});
  write_text(index, "[1, 2]");
  test::expect_error([&] { read_shard_index(index); }, {"not a JSON object"});
}

TEST(DiffusersFolder, SdxlAndRefiner) {
  test::TempDir dir;
  fs::path root = dir.path();
  write_text(root / "model_index.json", R"({"_class_name": "StableDiffusionXLPipeline"})");
  write_weights(root / "unet" / "diffusion_pytorch_model.safetensors", {"conv_in.weight"});
  write_weights(root / "text_encoder" / "model.safetensors", {"text_model.a"});
  write_weights(root / "text_encoder_2" / "model.fp16.safetensors", {"text_projection.weight"});
  fs::create_directories(root / "tokenizer_2");
  DiffusersFolder f = open_diffusers_folder(root.string(), "fp16");
  EXPECT_EQ(f.parts[0].layout, SourceLayout::DiffusersUnetXl);
  const DiffusersPart* te2 = f.find("text_encoder_2");
  ASSERT_NE(te2, nullptr);
  EXPECT_EQ(te2->prefix, kTextEncoder2Root);
  EXPECT_EQ(f.tokenizer_2, (root / "tokenizer_2").string());

  // The refiner ships only text_encoder_2 and says so in its UNet config.
  test::TempDir refiner_dir;
  fs::path r = refiner_dir.path();
  write_weights(r / "unet" / "diffusion_pytorch_model.safetensors", {"conv_in.weight"});
  write_text(r / "unet" / "config.json",
             R"({"addition_embed_type": "text_time", "cross_attention_dim": 1280})");
  write_weights(r / "text_encoder_2" / "model.safetensors", {"text_model.a"});
  DiffusersFolder rf = open_diffusers_folder(r.string());
  EXPECT_EQ(rf.parts[0].layout, SourceLayout::DiffusersUnetXl);
  ASSERT_NE(rf.find("text_encoder_2"), nullptr);
  EXPECT_EQ(rf.find("text_encoder_2")->prefix, kTextEncoderRoot);
}

TEST(DiffusersFolder, ClearErrors) {
  test::TempDir dir;
  fs::path root = dir.path();
  write_text(root / "model_index.json", R"({"_class_name": "StableDiffusionPipeline"})");
  write_weights(root / "vae" / "diffusion_pytorch_model.safetensors", {"encoder.conv_in.weight"});
  test::expect_error([&] { open_diffusers_folder(root.string()); },
                     {root.string(), "has no unet/", "model_index.json, vae"});

  fs::create_directories(root / "transformer");
  test::expect_error([&] { open_diffusers_folder(root.string()); },
                     {"transformer/", "only UNet pipelines"});

  fs::create_directories(root / "unet");
  write_text(root / "unet" / "config.json", "{}");
  test::expect_error([&] { open_diffusers_folder(root.string()); },
                     {(root / "unet").string(), "has no weights",
                      "diffusion_pytorch_model.safetensors", "it holds config.json"});

  write_weights(root / "unet" / "diffusion_pytorch_model.safetensors", {"conv_in.weight"});
  write_text(root / "model_index.json", "{\"_class_name\": ");
  test::expect_error([&] { open_diffusers_folder(root.string()); },
                     {"model_index.json", "not valid JSON"});

  test::expect_error([&] { open_diffusers_folder(dir.file("nope")); }, {"nope", "is not a folder"});
  EXPECT_FALSE(is_diffusers_folder(dir.file("nope")));
}

TEST(DiffusersFolder, InpaintUnetDetectedThroughConversion) {
  test::TempDir dir;
  fs::path unet = dir.path() / "unet" / "diffusion_pytorch_model.safetensors";
  fs::create_directories(unet.parent_path());
  test::SafetensorsBuilder b;
  b.add("conv_in.weight", "F16", {320, 9, 3, 3}, test::Bytes(320 * 9 * 9 * 2, 0));
  b.add("down_blocks.0.attentions.0.transformer_blocks.0.attn2.to_k.weight", "F16", {320, 768},
        test::Bytes(320 * 768 * 2, 0));
  test::write_file(unet.string(), b.bytes());

  DiffusersFolder f = open_diffusers_folder(dir.path().string());
  const DiffusersPart& part = f.parts[0];
  std::vector<TensorInfo> tensors = SafetensorsFile::open(part.files[0]).tensors();
  for (TensorInfo& t : tensors) t.name = to_canonical(t.name, part.layout, part.prefix);
  EXPECT_EQ(detect_version(tensors), ModelVersion::SD1Inpaint);
}

}  // namespace
}  // namespace sd::io
