// SDXL end to end on a tiny random-weight model with SDXL's layout, written by the project's
// own code: detection, dimensions read from the file, two text encoders, the vector
// conditioning and the VAE.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "io/io_test_util.h"
#include "nn/random_weights.h"
#include "pipeline/stable_diffusion.h"
#include "pipeline/text_conditioner.h"
#include "pipeline/tiny_model_test_util.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::pipeline {
namespace {

class TinySdxl : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string shared = sd::test::shared_dir();
    if (shared.empty()) GTEST_SKIP() << "needs ../shared/data/clip for the vocabulary";
    options_.model = test::write_tiny_sdxl_checkpoint();  // no architecture: detected
    options_.clip_vocab = shared + "/data/clip/bpe_simple_vocab_16e6.txt.gz";
    options_.threads = 2;
    request_.prompt = "a cat";
    request_.width = request_.height = 64;
    request_.steps = 2;
    request_.seed = 5;
  }
  ModelOptions options_;
  ImageRequest request_;
};

TEST_F(TinySdxl, IsDetectedAndGeneratesDeterministically) {
  StableDiffusion sd(options_);
  EXPECT_EQ(sd.version(), io::ModelVersion::SDXL);
  EXPECT_EQ(sd.prediction(), sampling::Prediction::Eps);
  const std::vector<io::Image> a = sd.generate(request_);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].width, 64);
  EXPECT_EQ(a[0].height, 64);
  EXPECT_EQ(sd.generate(request_)[0].pixels, a[0].pixels);

  // The prompt reaches the image through both encoders and the vector.
  ImageRequest other = request_;
  other.prompt = "a dog";
  EXPECT_NE(sd.generate(other)[0].pixels, a[0].pixels);
  // So do the sizes (through the vector) and a negative prompt (no longer a zero context).
  other = request_;
  other.negative_prompt = "blurry";
  EXPECT_NE(sd.generate(other)[0].pixels, a[0].pixels);
}

TEST_F(TinySdxl, LongPromptsAndEmphasisRunInWindows) {
  StableDiffusion sd(options_);
  ImageRequest r = request_;
  std::string long_prompt;  // 90 tokens: two 77-token windows
  for (int i = 0; i < 90; ++i) long_prompt += "cat ";
  r.prompt = long_prompt;
  const std::vector<uint8_t> base = sd.generate(r)[0].pixels;
  EXPECT_EQ(sd.generate(r)[0].pixels, base) << "same prompt, same image";
  // A word only the second window holds changes the image: that window is encoded.
  r.prompt = long_prompt + "dog";
  const std::vector<uint8_t> second_window = sd.generate(r)[0].pixels;
  EXPECT_NE(second_window, base);
  // Emphasis weights the tokens, and BREAK starts a new window.
  r.prompt = "(" + long_prompt + ":1.3)";
  EXPECT_NE(sd.generate(r)[0].pixels, base);
  r.prompt = "cat BREAK " + long_prompt;
  const std::vector<uint8_t> with_break = sd.generate(r)[0].pixels;
  r.prompt = "cat " + long_prompt;
  EXPECT_NE(with_break, sd.generate(r)[0].pixels);
}

// Each SDXL variant is detected from its tensors and generates from what the file states.
TEST_F(TinySdxl, InpaintingModelTakesTheMaskAndTheMaskedImage) {
  ModelOptions o = options_;
  o.model = test::write_tiny_sdxl_variant(test::TinySdxlVariant::Inpaint);
  StableDiffusion sd(o);
  EXPECT_EQ(sd.version(), io::ModelVersion::SDXLInpaint);
  io::Image init{64, 64, 3, std::vector<uint8_t>(64 * 64 * 3)};
  io::Image mask{64, 64, 1, std::vector<uint8_t>(64 * 64)};
  for (size_t i = 0; i < init.pixels.size(); ++i) init.pixels[i] = static_cast<uint8_t>(i * 7);
  for (int y = 16; y < 48; ++y)
    for (int x = 16; x < 48; ++x) mask.pixels[static_cast<size_t>(y * 64 + x)] = 255;
  ImageRequest r = request_;
  r.init_image = &init;
  r.mask = &mask;
  r.strength = 1.0f;
  const std::vector<uint8_t> a = sd.generate(r)[0].pixels;
  // The kept region feeds the UNet: another init image changes the result.
  for (uint8_t& p : init.pixels) p = static_cast<uint8_t>(255 - p);
  EXPECT_NE(sd.generate(r)[0].pixels, a);
}

TEST_F(TinySdxl, RefinerRunsTextToImageAndImageToImage) {
  ModelOptions o = options_;
  o.model = test::write_tiny_sdxl_variant(test::TinySdxlVariant::Refiner);
  StableDiffusion sd(o);
  EXPECT_EQ(sd.version(), io::ModelVersion::SDXLRefiner);
  const std::vector<io::Image> a = sd.generate(request_);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].width, 64);
  ImageRequest other = request_;
  other.prompt = "a dog";  // through the context and the pooled vector
  EXPECT_NE(sd.generate(other)[0].pixels, a[0].pixels);
  // Image to image, as the refiner is used after a base model.
  ImageRequest refine = request_;
  refine.init_image = &a[0];
  refine.strength = 0.3f;
  const std::vector<io::Image> b = sd.generate(refine);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_NE(b[0].pixels, a[0].pixels);
}

TEST_F(TinySdxl, SegmindDistilledUnetsRunFromTheirBlocks) {
  for (test::TinySdxlVariant v : {test::TinySdxlVariant::Ssd1b, test::TinySdxlVariant::Vega}) {
    ModelOptions o = options_;
    o.model = test::write_tiny_sdxl_variant(v);
    StableDiffusion sd(o);
    EXPECT_EQ(sd.version(), test::tiny_sdxl_variant_architecture(v).version);
    const std::vector<io::Image> a = sd.generate(request_);
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].width, 64);
  }
}

// SDXL-Turbo's settings (one guidance-free pass, sgm_uniform, lcm), CosXL's EDM v
// prediction and NitroFusion's timestep shift each change the image and run deterministically.
TEST_F(TinySdxl, TurboCosxlAndTimestepShiftSettingsRun) {
  StableDiffusion sd(options_);
  const std::vector<uint8_t> plain = sd.generate(request_)[0].pixels;
  ImageRequest turbo = request_;
  turbo.cfg_scale = 1.0f;
  turbo.steps = 1;
  turbo.scheduler = sampling::Scheduler::SgmUniform;
  const std::vector<uint8_t> t = sd.generate(turbo)[0].pixels;
  EXPECT_NE(t, plain);
  turbo.negative_prompt = "blurry";  // cfg 1 never reads the negative prompt
  EXPECT_EQ(sd.generate(turbo)[0].pixels, t);
  turbo.method = sampling::SampleMethod::Lcm;
  turbo.steps = 2;
  turbo.scheduler = sampling::Scheduler::Lcm;
  EXPECT_NE(sd.generate(turbo)[0].pixels, t);

  ImageRequest shifted = request_;
  shifted.timestep_shift = 250;
  EXPECT_NE(sd.generate(shifted)[0].pixels, plain);

  ModelOptions cosxl = options_;
  cosxl.prediction = sampling::Prediction::EdmV;
  StableDiffusion edm(cosxl);
  EXPECT_EQ(edm.prediction(), sampling::Prediction::EdmV);
  const std::vector<uint8_t> e = edm.generate(request_)[0].pixels;
  EXPECT_NE(e, plain);
  EXPECT_EQ(edm.generate(request_)[0].pixels, e);
}

// TAESDXL has TAESD's layout on SDXL's latent space: a --taesd file decodes the tiny SDXL's
// latents.
TEST_F(TinySdxl, TinyAutoencoderDecodes) {
  static const io::test::TempDir dir;
  const std::string taesd = dir.file("taesdxl.safetensors");
  test::write_tiny_taesd(taesd, 4, true, 17);
  const std::vector<uint8_t> vae = StableDiffusion(options_).generate(request_)[0].pixels;
  ModelOptions o = options_;
  o.taesd = taesd;
  const std::vector<uint8_t> t = StableDiffusion(o).generate(request_)[0].pixels;
  ASSERT_EQ(t.size(), vae.size());
  EXPECT_NE(t, vae);
}

// A tiny autoencoder of another latent space (16 channels, FLUX.1's) fails at load, naming
// --tae and the one SDXL needs, not the VAE.
TEST_F(TinySdxl, ATinyAutoencoderOfAnotherLatentSpaceNamesTae) {
  static const io::test::TempDir dir;
  const std::string taef1 = dir.file("taef1.safetensors");
  test::write_tiny_taesd(taef1, 16, false, 18);
  ModelOptions o = options_;
  o.taesd = taef1;
  try {
    StableDiffusion sd(o);
    FAIL() << "a 16-channel tiny autoencoder was accepted for SDXL's latents";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("tiny autoencoder's weights (--tae)"), std::string::npos) << m;
    EXPECT_NE(m.find("taesdxl for SDXL"), std::string::npos) << m;
    EXPECT_EQ(m.find("--vae"), std::string::npos) << m;
  }
}

// --vae-tiling decodes SDXL's latents in overlapping tiles, blended.
TEST_F(TinySdxl, TiledDecoding) {
  StableDiffusion sd(options_);
  const std::vector<uint8_t> whole = sd.generate(request_)[0].pixels;
  ImageRequest tiled = request_;
  tiled.vae_tiling = models::TilingParams{};
  tiled.vae_tiling->tile_size_x = tiled.vae_tiling->tile_size_y = 4;
  const std::vector<uint8_t> t = sd.generate(tiled)[0].pixels;
  ASSERT_EQ(t.size(), whole.size());
  EXPECT_NE(t, whole);
}

// A LoRA factor pair in engine order: up [rank, out], down [in, rank].
void add_lora_pair(nn::RandomWeights& w, const std::string& stem, int64_t out, int64_t in,
                   const char* up = ".lora_up.weight", const char* down = ".lora_down.weight") {
  constexpr int64_t kRank = 2;
  std::vector<float> u(static_cast<size_t>(out * kRank)), d(static_cast<size_t>(in * kRank));
  for (size_t i = 0; i < u.size(); ++i) u[i] = 0.05f * static_cast<float>(i % 7) - 0.15f;
  for (size_t i = 0; i < d.size(); ++i) d[i] = 0.04f * static_cast<float>(i % 5) - 0.08f;
  w.set(stem + up, make_shape({kRank, out}), u);
  w.set(stem + down, make_shape({in, kRank}), d);
}

// kohya's names for both text encoders and the UNet, and PEFT's for the second encoder,
// all reach the tiny SDXL's weights and change the image.
TEST_F(TinySdxl, LoraReachesBothTextEncodersAndTheUnet) {
  static const io::test::TempDir dir;
  const Architecture a = test::tiny_sdxl_architecture();
  const int64_t l = a.text.hidden, g = a.text2->hidden, ctx = a.unet.context_dim;
  const int64_t level1 = a.unet.model_channels * a.unet.channel_mult[1];
  struct Case {
    std::string name;
    std::function<void(nn::RandomWeights&)> keys;
  };
  const Case cases[] = {
      {"te1",
       [&](nn::RandomWeights& w) {
         add_lora_pair(w, "lora_te1_text_model_encoder_layers_0_self_attn_q_proj", l, l);
       }},
      {"te2",
       [&](nn::RandomWeights& w) {
         add_lora_pair(w, "lora_te2_text_model_encoder_layers_0_mlp_fc1", a.text2->intermediate, g);
       }},
      {"te2_peft",
       [&](nn::RandomWeights& w) {
         add_lora_pair(w, "text_encoder_2.text_model.encoder.layers.0.self_attn.k_proj", g, g,
                       ".lora_B.weight", ".lora_A.weight");
       }},
      {"unet",
       [&](nn::RandomWeights& w) {
         add_lora_pair(w, "lora_unet_input_blocks_3_1_transformer_blocks_0_attn2_to_k", level1,
                       ctx);
       }},
  };
  StableDiffusion sd(options_);
  const std::vector<uint8_t> plain = sd.generate(request_)[0].pixels;
  for (const Case& c : cases) {
    nn::RandomWeights w;
    c.keys(w);
    const std::string path = dir.file(c.name + ".safetensors");
    w.save_safetensors(path);
    ImageRequest r = request_;
    r.loras = {{path, 1.0f}};
    std::vector<std::string> warnings;
    r.warn = [&](const std::string& text) { warnings.push_back(text); };
    EXPECT_NE(sd.generate(r)[0].pixels, plain) << c.name;
    EXPECT_TRUE(warnings.empty()) << c.name << ": " << warnings.front();
  }
  // Without it again: the weights are back as stored.
  EXPECT_EQ(sd.generate(request_)[0].pixels, plain);
}

// An SD 1.x LoRA's UNet factors are 768 wide where SDXL's cross-attention reads 2048 (here
// the tiny model's width): one line naming the file and the key, before any sampling.
TEST_F(TinySdxl, LoraOfAnotherFamilyIsAOneLineError) {
  static const io::test::TempDir dir;
  const Architecture a = test::tiny_sdxl_architecture();
  const int64_t level1 = a.unet.model_channels * a.unet.channel_mult[1];
  nn::RandomWeights w;
  add_lora_pair(w, "lora_unet_input_blocks_3_1_transformer_blocks_0_attn2_to_k", level1, 768);
  const std::string path = dir.file("sd15_style.safetensors");
  w.save_safetensors(path);
  StableDiffusion sd(options_);
  ImageRequest r = request_;
  r.loras = {{path, 1.0f}};
  int steps = 0;
  r.progress = [&](int, int, double) { ++steps; };
  try {
    sd.generate(r);
    FAIL() << "an SD1 LoRA merged into SDXL";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find("attn2_to_k"), std::string::npos) << what;
    EXPECT_NE(what.find("another model"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  EXPECT_EQ(steps, 0);
}

// SDXL textual inversions ship clip_l and clip_g vectors in one file: each encoder reads
// its own rows. A file with CLIP-L's vectors alone (an SD 1.x embedding) is skipped, as
// sd.cpp skips a file of another encoder.
TEST_F(TinySdxl, EmbeddingsGiveEachEncoderItsVectors) {
  static const io::test::TempDir dir;
  const Architecture a = test::tiny_sdxl_architecture();
  const std::string pair_dir = dir.file("pair"), sd1_dir = dir.file("sd1");
  std::filesystem::create_directories(pair_dir);
  std::filesystem::create_directories(sd1_dir);
  auto rows = [](int64_t n, float scale) {
    std::vector<float> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = scale * static_cast<float>(i % 13) - 0.2f;
    return v;
  };
  {
    nn::RandomWeights w;
    w.set("clip_l", make_shape({a.text.hidden, 2}), rows(a.text.hidden * 2, 0.03f));
    w.set("clip_g", make_shape({a.text2->hidden, 2}), rows(a.text2->hidden * 2, 0.02f));
    w.save_safetensors(pair_dir + "/mystyle.safetensors");
    nn::RandomWeights l;
    l.set("emb_params", make_shape({a.text.hidden, 2}), rows(a.text.hidden * 2, 0.03f));
    l.save_safetensors(sd1_dir + "/mystyle.safetensors");
  }
  ImageRequest r = request_;
  r.prompt = "a mystyle cat";
  const std::vector<uint8_t> as_text = StableDiffusion(options_).generate(r)[0].pixels;
  ModelOptions o = options_;
  o.embeddings_dir = pair_dir;
  const std::vector<uint8_t> embedded = StableDiffusion(o).generate(r)[0].pixels;
  EXPECT_NE(embedded, as_text);
  o.embeddings_dir = sd1_dir;
  EXPECT_NE(StableDiffusion(o).generate(r)[0].pixels, embedded);
}

// FLUX.1's 16-channel autoencoder given to SDXL: one line naming the file, before loading.
TEST_F(TinySdxl, VaeOfAnotherFamilyIsAOneLineError) {
  static const io::test::TempDir dir;
  const test::TinyFluxFiles flux = test::write_tiny_flux(dir.file("flux"));
  ModelOptions o = options_;
  o.vae = flux.vae;
  try {
    StableDiffusion sd(o);
    FAIL() << "a 16-channel VAE loaded for SDXL";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(flux.vae + ": ", 0), 0u) << what;
    EXPECT_NE(what.find("16-channel"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

TEST(SdxlVector, RefinerEndsWithTheAestheticScore) {
  const std::vector<float> pooled(4, 0.5f);
  const std::vector<float> v = sdxl_refiner_vector(pooled, 512, 768, 6.0f);
  ASSERT_EQ(v.size(), 4u + 5 * 256);
  // Original size and crop as the base's vector; then the score instead of the target size.
  const std::vector<float> base = sdxl_vector(pooled, 512, 768);
  for (size_t i = 0; i < 4 + 4 * 256; ++i) EXPECT_EQ(v[i], base[i]) << i;
  EXPECT_FLOAT_EQ(v[4 + 1024], std::cos(6.0f));
  EXPECT_FLOAT_EQ(v[4 + 1024 + 128], std::sin(6.0f));
}

TEST(SdxlVector, PooledThenSinusoidalSizeEmbeddings) {
  const std::vector<float> pooled(4, 0.5f);
  const std::vector<float> v = sdxl_vector(pooled, 512, 768);
  ASSERT_EQ(v.size(), 4u + 6 * 256);
  EXPECT_EQ(v[0], 0.5f);
  // Original size (height, width): cos half first, frequency 1 at index 0.
  EXPECT_FLOAT_EQ(v[4], std::cos(768.0f));
  EXPECT_FLOAT_EQ(v[4 + 128], std::sin(768.0f));
  EXPECT_FLOAT_EQ(v[4 + 256], std::cos(512.0f));
  // Crop (0, 0): cos 1, sin 0.
  EXPECT_EQ(v[4 + 512], 1.0f);
  EXPECT_EQ(v[4 + 512 + 128], 0.0f);
  // Target size equals the original size.
  for (int i = 0; i < 512; ++i) EXPECT_EQ(v[4 + 1024 + i], v[4 + i]);
}

}  // namespace
}  // namespace sd::pipeline
