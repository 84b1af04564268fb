// What SD3.5 Medium's LoRAs do beyond the family conformance suite (api/
// family_conformance_test.cpp, which merges one by hand and refuses other families'): a
// LoRA that names no weight is refused, and text-encoder LoRAs reach all three encoders.
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
