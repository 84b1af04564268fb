// A LoRA on SD3.5 Medium through the whole pipeline: a random LoRA in diffusers names
// (separate q, k, v onto the MMDiT's fused qkv, the second attention's too) and kohya
// names changes the image as merging it into the transformer file by hand does. A FLUX.1
// or a Stable Diffusion LoRA is refused, naming the file and the family it is made for.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "image_psnr.h"
#include "io/io_test_util.h"
#include "io/name_conversion.h"
#include "pipeline/lora_merge_test_util.h"
#include "pipeline/stable_diffusion.h"
#include "pipeline/tiny_sd3_test_util.h"
#include "tensor/error.h"
#include "test_support.h"
#include "weights/model_loader.h"

namespace sd::pipeline {
namespace {

using test::f32_bytes;
using test::LoraPair;

// A rank-2 pair whose factors are all `value`: enough to be read as a LoRA.
void add_pair(io::test::SafetensorsBuilder& lora, const std::string& stem, uint64_t in,
              uint64_t out) {
  const std::vector<float> down(2 * in, 0.1f), up(out * 2, 0.1f);
  lora.add(stem + ".lora_down.weight", "F32", {2, in}, f32_bytes(down));
  lora.add(stem + ".lora_up.weight", "F32", {out, 2}, f32_bytes(up));
}

class Sd3Lora : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string shared = sd::test::shared_dir();
    if (shared.empty()) GTEST_SKIP() << "needs ../shared/data/clip for the CLIP vocabulary";
    static const io::test::TempDir dir;
    static const test::TinySd3Files files = test::write_tiny_sd3(dir.file("sd35"), {true});
    files_ = files;
    dir_ = &dir;
    options_.diffusion_model = files_.dit;
    options_.clip_l = files_.clip_l;
    options_.clip_g = files_.clip_g;
    options_.t5xxl = files_.t5;
    options_.vae = files_.vae;
    options_.t5_tokenizer = dir.file("sd35") + "/tokenizer.json";
    options_.clip_vocab = shared + "/data/clip/bpe_simple_vocab_16e6.txt.gz";
    options_.threads = 2;
    options_.lora_mode = weights::ModelManagerOptions::LoraMode::Merge;
    request_.prompt = "a cat";
    request_.width = request_.height = 16;
    request_.steps = 2;
    request_.cfg_scale = 1.0f;
  }

  // The error generating with `lora` gives ("" if none), and that nothing was made.
  std::string lora_error(const std::string& lora) {
    StableDiffusion sd(options_);
    ImageRequest r = request_;
    r.loras = {{lora, 1.0f}};
    try {
      sd.generate(r);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  const io::test::TempDir* dir_ = nullptr;
  test::TinySd3Files files_;
  ModelOptions options_;
  ImageRequest request_;
};

TEST_F(Sd3Lora, ChangesTheImageAsMergingByHand) {
  test::DitWeights w = test::read_dit_weights(files_.dit);
  const std::map<std::string, Shape>& shapes = w.shapes;
  const int64_t h = shapes.at("context_embedder.weight")[1];
  const int64_t mlp = shapes.at("joint_blocks.0.x_block.mlp.fc1.weight")[1];
  const std::string d0 = "transformer.transformer_blocks.0.",
                    d1 = "transformer.transformer_blocks.1.";
  const std::vector<LoraPair> pairs = {
      {d0 + "attn.to_k.lora_A.weight", d0 + "attn.to_k.lora_B.weight",
       "joint_blocks.0.x_block.attn.qkv", h, h},
      {d1 + "attn.add_v_proj.lora_A.weight", d1 + "attn.add_v_proj.lora_B.weight",
       "joint_blocks.1.context_block.attn.qkv", 2 * h, h},
      {d0 + "attn2.to_q.lora_A.weight", d0 + "attn2.to_q.lora_B.weight",
       "joint_blocks.0.x_block.attn2.qkv", 0, h},
      {d0 + "ff_context.net.0.proj.lora_A.weight", d0 + "ff_context.net.0.proj.lora_B.weight",
       "joint_blocks.0.context_block.mlp.fc1", 0, mlp},
      {"lora_unet_joint_blocks_1_x_block_mlp_fc2.lora_down.weight",
       "lora_unet_joint_blocks_1_x_block_mlp_fc2.lora_up.weight", "joint_blocks.1.x_block.mlp.fc2",
       0, h},
      {"lora_unet_final_layer_adaLN_modulation_1.lora_down.weight",
       "lora_unet_final_layer_adaLN_modulation_1.lora_up.weight", "final_layer.adaLN_modulation.1",
       0, 2 * h},
  };
  const float multiplier = 0.8f;
  const std::string lora_path = dir_->file("sd3_lora.safetensors");
  const std::string merged_path = dir_->file("sd3_dit_merged.safetensors");
  test::write_lora_and_merged(w, pairs, multiplier, 0.5f, lora_path, merged_path);

  StableDiffusion sd(options_);
  const io::Image plain = sd.generate(request_)[0];
  ImageRequest with_lora = request_;
  with_lora.loras = {{lora_path, multiplier}};
  std::vector<std::string> warnings;
  with_lora.warn = [&](const std::string& text) { warnings.push_back(text); };
  const io::Image a = sd.generate(with_lora)[0];
  EXPECT_TRUE(warnings.empty()) << warnings.front();  // every key found its weight
  ModelOptions by_hand = options_;
  by_hand.diffusion_model = merged_path;
  const io::Image b = StableDiffusion(by_hand).generate(request_)[0];
  const double changed = sd::test::image_psnr(a, plain), same = sd::test::image_psnr(a, b);
  std::printf("LoRA vs none: %.1f dB; LoRA vs merged by hand: %.1f dB\n", changed, same);
  EXPECT_LT(changed, 40.0) << "the LoRA should change the image";
  EXPECT_GE(same, 50.0);
  ModelOptions at_runtime = options_;
  at_runtime.lora_mode = weights::ModelManagerOptions::LoraMode::AtRuntime;
  const double runtime_db =
      sd::test::image_psnr(StableDiffusion(at_runtime).generate(with_lora)[0], b);
  std::printf("LoRA added at run time vs merged by hand: %.1f dB\n", runtime_db);
  EXPECT_GE(runtime_db, 50.0);
}

TEST_F(Sd3Lora, ALoraForAnotherFamilyIsRefusedNamingFileAndFamily) {
  const struct {
    const char* file;
    const char* stem;
    const char* family;
  } cases[] = {
      {"flux_kohya.safetensors", "lora_unet_double_blocks_0_img_attn_qkv", "FLUX.1"},
      {"flux_diffusers.safetensors", "transformer.single_transformer_blocks.0.attn.to_q", "FLUX.1"},
      {"sd1.safetensors", "lora_unet_down_blocks_0_attentions_0_proj_in", "UNet"},
  };
  for (const auto& c : cases) {
    io::test::SafetensorsBuilder lora;
    add_pair(lora, c.stem, 16, 16);
    // CLIP-L's weights exist in every family: the LoRA changes them, still it is refused.
    add_pair(lora, "lora_te1_text_model_encoder_layers_0_self_attn_q_proj", 64, 64);
    const std::string path = dir_->file(c.file);
    io::test::write_file(path, lora.bytes());
    const std::string e = lora_error(path);
    EXPECT_NE(e.find(path), std::string::npos) << e;
    EXPECT_NE(e.find(c.family), std::string::npos) << e;
    EXPECT_NE(e.find("SD3.5 Medium"), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

TEST_F(Sd3Lora, ALoraThatNamesNoWeightIsRefused) {
  io::test::SafetensorsBuilder lora;
  add_pair(lora, "lora_unet_no_such_block", 16, 16);
  const std::string path = dir_->file("nothing.safetensors");
  io::test::write_file(path, lora.bytes());
  const std::string e = lora_error(path);
  EXPECT_NE(e.find(path), std::string::npos) << e;
  EXPECT_NE(e.find("changes no weight"), std::string::npos) << e;
}

// Text-encoder LoRAs find SD3's three encoders: CLIP-L (te1), CLIP-G (te2), T5-XXL (te3).
TEST_F(Sd3Lora, TextEncoderLorasChangeTheirEncoders) {
  StableDiffusion sd(options_);
  const io::Image plain = sd.generate(request_)[0];
  const struct {
    const char* stem;
    uint64_t in, out;
  } cases[] = {
      {"lora_te1_text_model_encoder_layers_0_mlp_fc2", 128, 64},
      {"lora_te2_text_model_encoder_layers_0_self_attn_out_proj", 128, 128},
      {"lora_te3_encoder_block_0_layer_1_DenseReluDense_wo", 48, 4096},
  };
  for (const auto& c : cases) {
    io::test::SafetensorsBuilder lora;
    add_pair(lora, c.stem, c.in, c.out);
    const std::string path = dir_->file(std::string(c.stem).substr(0, 8) + ".safetensors");
    io::test::write_file(path, lora.bytes());
    ImageRequest r = request_;
    r.loras = {{path, 1.0f}};
    std::vector<std::string> warnings;
    r.warn = [&](const std::string& text) { warnings.push_back(text); };
    EXPECT_NE(sd.generate(r)[0].pixels, plain.pixels) << c.stem;
    EXPECT_TRUE(warnings.empty()) << c.stem << ": " << warnings.front();
  }
}

}  // namespace
}  // namespace sd::pipeline
