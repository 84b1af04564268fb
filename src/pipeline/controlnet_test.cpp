// ControlNet through the whole pipeline on the tiny SD 1.x and SDXL models: a tiny
// random-weight ControlNet written by test code, loaded back through the real loader.
#include <gtest/gtest.h>

#include <cstring>

#include "io/io_test_util.h"
#include "pipeline/controlnet_runner.h"
#include "pipeline/stable_diffusion.h"
#include "pipeline/tiny_controlnet_test_util.h"
#include "pipeline/tiny_model_test_util.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::pipeline {
namespace {

// A control image: a bright square on a dark ground, with a gradient so no two rows match.
io::Image control_image(int w, int h) {
  io::Image img;
  img.width = w;
  img.height = h;
  img.channels = 3;
  img.pixels.resize(static_cast<size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c) {
        const bool inside = x >= w / 4 && x < 3 * w / 4 && y >= h / 4 && y < 3 * h / 4;
        img.pixels[(static_cast<size_t>(y) * w + x) * 3 + c] =
            static_cast<uint8_t>(inside ? 220 - c * 20 : (x + y) % 64);
      }
  return img;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class TinyControlNet : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string shared = sd::test::shared_dir();
    if (shared.empty()) GTEST_SKIP() << "needs ../shared/data/clip for the vocabulary";
    options_.architecture = test::tiny_architecture();
    options_.model = test::write_tiny_checkpoint(*options_.architecture);
    options_.clip_vocab = shared + "/data/clip/bpe_simple_vocab_16e6.txt.gz";
    options_.threads = 1;
    control_net_ = test::write_tiny_controlnet(
        test::tiny_controlnet_config(options_.architecture->unet), dir_.file("cn.safetensors"));
    request_.prompt = "a cat";
    request_.width = request_.height = 32;
    request_.steps = 2;
    request_.seed = 5;
    image_ = control_image(32, 32);
  }
  std::vector<uint8_t> generate(const ModelOptions& o, const ImageRequest& r) {
    StableDiffusion sd(o);
    return sd.generate(r)[0].pixels;
  }
  ModelOptions with_control_net() const {
    ModelOptions o = options_;
    o.control_net = control_net_;
    return o;
  }
  ImageRequest controlled(float strength) const {
    ImageRequest r = request_;
    r.control_image = &image_;
    r.control_strength = strength;
    return r;
  }
  io::test::TempDir dir_;
  ModelOptions options_;
  std::string control_net_;
  ImageRequest request_;
  io::Image image_;
};

TEST_F(TinyControlNet, StrengthZeroIsTheImageWithoutControlNet) {
  const std::vector<uint8_t> plain = generate(options_, request_);
  EXPECT_EQ(generate(with_control_net(), controlled(0.0f)), plain);
}

TEST_F(TinyControlNet, OutputFollowsStrengthAndImageDeterministically) {
  StableDiffusion sd(with_control_net());
  EXPECT_TRUE(sd.has_control_net());
  const std::vector<uint8_t> plain = sd.generate(request_)[0].pixels;  // no control image
  const std::vector<uint8_t> half = sd.generate(controlled(0.5f))[0].pixels;
  const std::vector<uint8_t> full = sd.generate(controlled(1.0f))[0].pixels;
  EXPECT_NE(half, plain);
  EXPECT_NE(full, half);
  EXPECT_EQ(sd.generate(controlled(0.5f))[0].pixels, half) << "same request, same image";
  // Another control image, another image.
  io::Image other = image_;
  for (uint8_t& p : other.pixels) p = static_cast<uint8_t>(255 - p);
  ImageRequest r = controlled(1.0f);
  r.control_image = &other;
  EXPECT_NE(sd.generate(r)[0].pixels, full);
  // A control image of another size is resized (nearest) to the output's.
  const io::Image big = control_image(64, 64);
  r.control_image = &big;
  EXPECT_EQ(sd.generate(r)[0].pixels.size(), full.size());
  // Unloaded: the request is the plain one again.
  sd.unload_control_net();
  EXPECT_FALSE(sd.has_control_net());
  EXPECT_EQ(sd.generate(controlled(1.0f))[0].pixels, plain);
  sd.load_control_net(control_net_);
  EXPECT_EQ(sd.generate(controlled(1.0f))[0].pixels, full);
}

TEST_F(TinyControlNet, GuidesTheHiresPassAtItsOwnSize) {
  // The hint is 8x the latent: 128x128 for the tiny model's 32x32 image (its VAE downscales
  // by 2), 256x256 in a x2 hires pass. Two 256x256 control images that agree on every pixel
  // the first pass's nearest resize reads and differ on all the others: only a second pass
  // guided at its own size tells them apart.
  const io::Image a = control_image(256, 256);
  io::Image b = a;
  for (int y = 0; y < b.height; ++y)
    for (int x = 0; x < b.width; ++x)
      if (x % 2 == 1 || y % 2 == 1)
        for (int c = 0; c < b.channels; ++c) {
          uint8_t& p = b.pixels[(static_cast<size_t>(y) * b.width + x) * b.channels + c];
          p = static_cast<uint8_t>(255 - p);
        }
  StableDiffusion sd(with_control_net());
  ImageRequest r = controlled(1.0f);
  r.control_image = &a;
  r.hires.enabled = true;
  r.hires.upscaler = HiresUpscaler::Latent;
  r.hires.scale = 2.0f;
  r.hires.steps = 2;
  const io::Image with_a = sd.generate(r)[0];
  EXPECT_EQ(with_a.width, 64);
  r.control_image = &b;
  const std::vector<uint8_t> with_b = sd.generate(r)[0].pixels;
  EXPECT_NE(with_b, with_a.pixels);
  // Without hires the two give the same image: the difference above is the second pass's.
  ImageRequest first = controlled(1.0f);
  first.control_image = &a;
  const std::vector<uint8_t> first_a = sd.generate(first)[0].pixels;
  first.control_image = &b;
  EXPECT_EQ(sd.generate(first)[0].pixels, first_a);
}

TEST_F(TinyControlNet, EveryPlacementGivesTheSameImage) {
  const std::vector<uint8_t> base = generate(with_control_net(), controlled(0.9f));
  for (const char* params : {"controlnet=disk", "cpu", "controlnet=cpu,diffusion=disk"}) {
    for (bool eager : {false, true}) {
      ModelOptions o = with_control_net();
      o.params_backend = params;
      o.backend = "controlnet=cpu";
      o.eager_load = eager;
      StableDiffusion sd(o);
      EXPECT_EQ(sd.generate(controlled(0.9f))[0].pixels, base) << params;
      if (std::string(params) == "controlnet=disk" && !eager) {
        // Freed when sampling ended: only the other modules' weights stay.
        StableDiffusion plain(options_);
        plain.generate(request_);
        EXPECT_EQ(sd.resident_weight_bytes(), plain.resident_weight_bytes());
      }
    }
  }
}

TEST_F(TinyControlNet, FilesWithoutThePrefixLoadTheSame) {
  const std::string bare =
      test::write_tiny_controlnet(test::tiny_controlnet_config(options_.architecture->unet),
                                  dir_.file("bare.safetensors"), 31, /*bare=*/true);
  ModelOptions o = options_;
  o.control_net = bare;
  EXPECT_EQ(generate(o, controlled(1.0f)), generate(with_control_net(), controlled(1.0f)));
}

TEST_F(TinyControlNet, DiffusersNamedFilesLoadTheSame) {
  // diffusers numbers an encoder level's blocks as 2 res blocks and a downsampler, as every
  // SD-family UNet has them: this UNet has 2 per level too.
  Architecture a = *options_.architecture;
  a.unet.num_res_blocks = 2;
  ModelOptions o = options_;
  o.architecture = a;
  o.model = test::write_tiny_checkpoint(a, "tiny_sd1_two_res_blocks.safetensors");
  const models::ControlNetConfig c = test::tiny_controlnet_config(a.unet);
  o.control_net = test::write_tiny_controlnet(c, dir_.file("original2.safetensors"));
  const std::vector<uint8_t> original = generate(o, controlled(1.0f));
  EXPECT_NE(original, generate(o, controlled(0.0f))) << "the ControlNet must change the image";
  o.control_net = test::write_tiny_controlnet(c, dir_.file("diffusers.safetensors"), 31,
                                              /*bare=*/false, /*diffusers=*/true);
  EXPECT_EQ(generate(o, controlled(1.0f)), original);
  EXPECT_EQ(test::diffusers_controlnet_name("input_blocks.4.1.proj_in.weight"),
            "down_blocks.1.attentions.0.proj_in.weight");
  EXPECT_EQ(test::diffusers_controlnet_name("input_blocks.3.0.op.bias"),
            "down_blocks.0.downsamplers.0.conv.bias");
}

TEST_F(TinyControlNet, BadFilesAreOneLineErrorsNamingTheFile) {
  auto error_of = [&](const std::string& file) {
    ModelOptions o = options_;
    o.control_net = file;
    try {
      StableDiffusion sd(o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string missing = dir_.file("missing.safetensors");
  EXPECT_TRUE(contains(error_of(missing), "missing.safetensors")) << error_of(missing);
  // The checkpoint itself is no ControlNet.
  const std::string not_cn = error_of(options_.model);
  EXPECT_TRUE(contains(not_cn, "--control-net") && contains(not_cn, "input_hint_block")) << not_cn;
  // An SDXL ControlNet on this SD 1.x model.
  const std::string xl =
      test::write_tiny_controlnet(test::tiny_controlnet_config(test::tiny_sdxl_architecture().unet),
                                  dir_.file("xl.safetensors"));
  const std::string e = error_of(xl);
  EXPECT_TRUE(contains(e, "xl.safetensors") && contains(e, "SDXL ControlNet") &&
              contains(e, "SD 1.x model"))
      << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  // Same family, other widths.
  models::UnetConfig wide = options_.architecture->unet;
  wide.model_channels = 64;
  const std::string w = error_of(
      test::write_tiny_controlnet(test::tiny_controlnet_config(wide), dir_.file("w.safetensors")));
  EXPECT_TRUE(contains(w, "w.safetensors") && contains(w, "do not match")) << w;
  // A failed load keeps the ControlNet already there.
  StableDiffusion sd(with_control_net());
  EXPECT_THROW(sd.load_control_net(xl), Error);
  EXPECT_TRUE(sd.has_control_net());
}

TEST(TinySdxlControlNet, GuidesTheSdxlUnet) {
  const std::string shared = sd::test::shared_dir();
  if (shared.empty()) GTEST_SKIP() << "needs ../shared/data/clip for the vocabulary";
  io::test::TempDir dir;
  ModelOptions o;
  o.model = test::write_tiny_sdxl_checkpoint();
  o.clip_vocab = shared + "/data/clip/bpe_simple_vocab_16e6.txt.gz";
  o.threads = 1;
  ImageRequest r;
  r.prompt = "a cat";
  r.width = r.height = 64;
  r.steps = 2;
  r.seed = 3;
  const std::vector<uint8_t> plain = StableDiffusion(o).generate(r)[0].pixels;
  o.control_net =
      test::write_tiny_controlnet(test::tiny_controlnet_config(test::tiny_sdxl_architecture().unet),
                                  dir.file("xl_cn.safetensors"));
  StableDiffusion sd(o);
  const io::Image image = control_image(64, 64);
  r.control_image = &image;
  r.control_strength = 0.0f;
  EXPECT_EQ(sd.generate(r)[0].pixels, plain);
  r.control_strength = 1.0f;
  const std::vector<uint8_t> full = sd.generate(r)[0].pixels;
  EXPECT_NE(full, plain);
  EXPECT_EQ(sd.generate(r)[0].pixels, full);
  // An SD 1.x ControlNet does not fit SDXL.
  const std::string sd1 = test::write_tiny_controlnet(
      test::tiny_controlnet_config(test::tiny_architecture().unet), dir.file("sd1_cn.safetensors"));
  try {
    sd.load_control_net(sd1);
    FAIL() << "an SD 1.x ControlNet loaded into SDXL";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "sd1_cn.safetensors") && contains(e.what(), "SD 1.x ControlNet"))
        << e.what();
  }
}

TEST(ControlNetShapes, ReadFromTheFileNames) {
  const models::ControlNetConfig c = test::tiny_controlnet_config(test::tiny_architecture().unet);
  nn::RandomWeights random(DType::F16, 1);
  nn::ParamRecorder w(random);
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {8, 8, 4, 1});
  Tensor* hint = ctx.new_tensor(DType::F32, {64, 64, 3, 1});
  Tensor* t = ctx.new_tensor(DType::F32, {1});
  Tensor* context = ctx.new_tensor(DType::F32, {c.unet.context_dim, 77, 1});
  const nn::Scope s(ctx, w, "control_model.");
  const std::vector<Tensor*> out =
      models::controlnet_forward(s, c, x, models::controlnet_hint(s, c, hint), t, context);
  // One residual per skip connection and one for the middle, at their blocks' widths.
  const std::vector<int64_t> channels = c.residual_channels();
  ASSERT_EQ(out.size(), channels.size());
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i]->ne[2], channels[i]) << i;
  EXPECT_EQ(out.front()->ne[0], 8);
  EXPECT_EQ(out.back()->ne[0], 4);  // two levels: one halving
  const ShapeOf shape_of = [&](const std::string& name) {
    std::optional<std::array<int64_t, 4>> ne;
    for (const nn::ParamDecl& p : w.params())
      if (p.name == name) ne = p.ne;
    return ne;
  };
  const models::ControlNetConfig read = controlnet_config_from_shapes("control_model.", shape_of);
  EXPECT_EQ(read.hint_widths, c.hint_widths);
  EXPECT_EQ(read.residual_channels(), channels);
  EXPECT_EQ(read.unet.context_dim, c.unet.context_dim);
}

}  // namespace
}  // namespace sd::pipeline
