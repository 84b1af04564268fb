// A LoRA on FLUX.1 through the whole pipeline: a random LoRA in diffusers names (separate
// q, k, v and proj_mlp onto BFL's fused weights) and kohya names changes the image as
// merging it into the transformer file by hand does. A LoRA for another family is refused.
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
#include "pipeline/tiny_model_test_util.h"
#include "tensor/error.h"
#include "test_support.h"
#include "weights/model_loader.h"

namespace sd::pipeline {
namespace {

using test::f32_bytes;
using test::LoraPair;

class FluxLoraPipeline : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string shared = sd::test::shared_dir();
    if (shared.empty()) GTEST_SKIP() << "needs ../shared/data/clip for the CLIP vocabulary";
    // One tiny model for the suite; each test writes its LoRAs beside it.
    static const io::test::TempDir dir;
    static const test::TinyFluxFiles files = test::write_tiny_flux(dir.file("flux"));
    files_ = files;
    dir_ = &dir;
    options_.diffusion_model = files_.dit;
    options_.t5xxl = files_.t5;
    options_.clip_l = files_.clip_l;
    options_.vae = files_.vae;
    options_.t5_tokenizer = files_.dir + "/tokenizer.json";
    options_.clip_vocab = shared + "/data/clip/bpe_simple_vocab_16e6.txt.gz";
    options_.threads = 2;
    // Merged in f32: the hand-merged file is f32 too.
    options_.lora_mode = weights::ModelManagerOptions::LoraMode::Merge;
    request_.prompt = "a cat";
    request_.width = request_.height = 16;
    request_.steps = 2;
    request_.cfg_scale = 1.0f;
  }

  const io::test::TempDir* dir_ = nullptr;
  test::TinyFluxFiles files_;
  ModelOptions options_;
  ImageRequest request_;
};

TEST_F(FluxLoraPipeline, ChangesTheImageAsMergingByHand) {
  // The transformer's weights, as the engine reads them.
  test::DitWeights w = test::read_dit_weights(files_.dit);
  const std::map<std::string, Shape>& shapes = w.shapes;
  const int64_t h = shapes.at("img_in.weight")[1];
  const int64_t l1_out = shapes.at("single_blocks.0.linear1.weight")[1];
  const std::string d = "transformer.transformer_blocks.0.attn.";
  const std::string s = "transformer.single_transformer_blocks.0.";
  const std::vector<LoraPair> pairs = {
      {d + "to_k.lora_A.weight", d + "to_k.lora_B.weight", "double_blocks.0.img_attn.qkv", h, h},
      {d + "add_v_proj.lora_A.weight", d + "add_v_proj.lora_B.weight",
       "double_blocks.0.txt_attn.qkv", 2 * h, h},
      {s + "proj_mlp.lora_A.weight", s + "proj_mlp.lora_B.weight", "single_blocks.0.linear1", 3 * h,
       l1_out - 3 * h},
      {"lora_unet_single_blocks_0_linear2.lora_down.weight",
       "lora_unet_single_blocks_0_linear2.lora_up.weight", "single_blocks.0.linear2", 0, h},
  };
  const float multiplier = 0.8f;
  const std::string lora_path = dir_->file("flux_lora.safetensors");
  const std::string merged_path = dir_->file("flux_dit_merged.safetensors");
  test::write_lora_and_merged(w, pairs, multiplier, 0.3f, lora_path, merged_path);

  StableDiffusion sd(options_);
  const io::Image plain = sd.generate(request_)[0];
  ImageRequest with_lora = request_;
  with_lora.loras = {{lora_path, multiplier}};
  const io::Image a = sd.generate(with_lora)[0];
  ModelOptions by_hand = options_;
  by_hand.diffusion_model = merged_path;
  const io::Image b = StableDiffusion(by_hand).generate(request_)[0];
  const double changed = sd::test::image_psnr(a, plain), same = sd::test::image_psnr(a, b);
  std::printf("LoRA vs none: %.1f dB; LoRA vs merged by hand: %.1f dB\n", changed, same);
  EXPECT_LT(changed, 40.0) << "the LoRA should change the image";
  EXPECT_GE(same, 50.0);
  // Added in each graph instead (the mode quantized weights get): the same change.
  ModelOptions at_runtime = options_;
  at_runtime.lora_mode = weights::ModelManagerOptions::LoraMode::AtRuntime;
  const double runtime_db =
      sd::test::image_psnr(StableDiffusion(at_runtime).generate(with_lora)[0], b);
  std::printf("LoRA added at run time vs merged by hand: %.1f dB\n", runtime_db);
  EXPECT_GE(runtime_db, 50.0);
}

// A LoRA for another family's diffusion network is refused before anything is generated,
// naming the file, the family it is for and this model: a Stable Diffusion UNet LoRA and an
// SD3 one.
TEST_F(FluxLoraPipeline, ALoraForAnotherFamilyIsRefused) {
  const struct {
    const char* file;
    const char* stem;
    const char* family;
  } cases[] = {
      {"sd1_lora.safetensors", "lora_unet_down_blocks_0_attentions_0_proj_in", "UNet"},
      {"sd3_lora.safetensors", "lora_unet_joint_blocks_0_x_block_attn_qkv", "SD3"},
  };
  for (const auto& c : cases) {
    io::test::SafetensorsBuilder lora;
    const std::vector<float> v = test::lora_values(16, 1, 0.3f);
    lora.add(std::string(c.stem) + ".lora_down.weight", "F32", {2, 8}, f32_bytes(v));
    lora.add(std::string(c.stem) + ".lora_up.weight", "F32", {8, 2}, f32_bytes(v));
    const std::string path = dir_->file(c.file);
    io::test::write_file(path, lora.bytes());
    StableDiffusion sd(options_);
    ImageRequest r = request_;
    r.loras = {{path, 1.0f}};
    std::string error;
    try {
      sd.generate(r);
    } catch (const Error& e) {
      error = e.what();
    }
    EXPECT_NE(error.find(path), std::string::npos) << error;
    EXPECT_NE(error.find(c.family), std::string::npos) << error;
    EXPECT_NE(error.find("this Flux model"), std::string::npos) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace sd::pipeline
