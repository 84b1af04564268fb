#include "pipeline/model_shapes.h"

#include <gtest/gtest.h>

#include <map>

#include "nn/param_recorder.h"
#include "tensor/error.h"

namespace sd::pipeline {
namespace {

// Every name exists: the recorder then declares what a full model would hold.
class AnyWeights final : public nn::Weights {
 public:
  Tensor* get(Context&, const std::string&, const Shape&) override { return nullptr; }
  bool contains(const std::string&) const override { return true; }
};

using Shapes = std::map<std::string, std::array<int64_t, 4>>;

ShapeOf lookup(const Shapes& shapes) {
  return [&shapes](const std::string& name) -> std::optional<std::array<int64_t, 4>> {
    auto it = shapes.find(name);
    if (it == shapes.end()) return std::nullopt;
    return it->second;
  };
}

Shapes unet_shapes(const models::UnetConfig& c) {
  AnyWeights any;
  nn::ParamRecorder rec(any);
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {8, 8, c.in_channels, 1});
  Tensor* t = ctx.new_tensor(DType::F32, {1});
  Tensor* ctxt = ctx.new_tensor(DType::F32, {c.context_dim, 77, 1});
  Tensor* y = c.adm_in_channels ? ctx.new_tensor(DType::F32, {c.adm_in_channels, 1}) : nullptr;
  models::unet_forward(nn::Scope(ctx, rec, "model.diffusion_model."), c, x, t, ctxt, y);
  Shapes shapes;
  for (const nn::ParamDecl& p : rec.params()) shapes[p.name] = p.ne;
  return shapes;
}

void expect_same(const models::UnetConfig& a, const models::UnetConfig& b) {
  EXPECT_EQ(a.in_channels, b.in_channels);
  EXPECT_EQ(a.out_channels, b.out_channels);
  EXPECT_EQ(a.model_channels, b.model_channels);
  EXPECT_EQ(a.channel_mult, b.channel_mult);
  EXPECT_EQ(a.num_res_blocks, b.num_res_blocks);
  EXPECT_EQ(a.context_dim, b.context_dim);
  EXPECT_EQ(a.linear_proj, b.linear_proj);
  EXPECT_EQ(a.adm_in_channels, b.adm_in_channels);
  EXPECT_EQ(a.depth_middle(), b.depth_middle());
  for (int level = 0; level < static_cast<int>(a.channel_mult.size()); ++level)
    EXPECT_EQ(a.depth_at(level), b.depth_at(level)) << "level " << level;
}

// Segmind's SSD-1B: SDXL's levels with no middle transformer and transformer depths that
// vary within a level (output blocks 4, 4, 10 | 2, 1, 1); every block keeps its own.
TEST(ModelShapes, DistilledSdxlUnetKeepsEachBlocksDepth) {
  models::UnetConfig ssd1b = models::UnetConfig::sdxl();
  ssd1b.model_channels = 64;
  ssd1b.level_depth = {0, 2, 4};
  ssd1b.middle_depth = 0;
  ssd1b.input_block_depth = {0, 0, 2, 2, 4, 4};
  ssd1b.output_block_depth = {4, 4, 10, 2, 1, 1, 0, 0, 0};
  const Shapes shapes = unet_shapes(ssd1b);
  EXPECT_EQ(shapes.count("model.diffusion_model.middle_block.1.norm.weight"), 0u);
  EXPECT_EQ(shapes.count("model.diffusion_model.middle_block.2.in_layers.0.weight"), 0u);
  const models::UnetConfig read =
      unet_config_from_shapes(models::UnetConfig::sdxl(), "model.diffusion_model.", lookup(shapes));
  EXPECT_EQ(read.depth_middle(), 0);
  EXPECT_EQ(read.input_block_depth, ssd1b.input_block_depth);
  EXPECT_EQ(read.output_block_depth, ssd1b.output_block_depth);
  EXPECT_EQ(read.output_depth(2, 2), 10);
  EXPECT_EQ(read.output_depth(1, 2), 1);
  // SDXL base's depths are uniform per level: no per-block list.
  const models::UnetConfig base =
      unet_config_from_shapes(models::UnetConfig::sdxl(), "model.diffusion_model.",
                              lookup(unet_shapes(models::UnetConfig::sdxl())));
  EXPECT_TRUE(base.output_block_depth.empty());
}

TEST(ModelShapes, SdxlUnetReadsBackFromItsTensors) {
  const models::UnetConfig sdxl = models::UnetConfig::sdxl();
  const Shapes shapes = unet_shapes(sdxl);
  // Start from another preset: everything must come from the tensors.
  expect_same(
      unet_config_from_shapes(models::UnetConfig::sd1(), "model.diffusion_model.", lookup(shapes)),
      sdxl);
}

TEST(ModelShapes, VariantsWithOtherDepthsAndWidths) {
  models::UnetConfig v = models::UnetConfig::sdxl();
  v.model_channels = 256;  // fewer channels, fewer blocks, shallower transformers
  v.num_res_blocks = 1;
  v.level_depth = {0, 1, 4};
  v.middle_depth = 0 + 2;
  v.in_channels = 9;
  v.adm_in_channels = 1024;
  v.context_dim = 1280;
  const Shapes shapes = unet_shapes(v);
  expect_same(
      unet_config_from_shapes(models::UnetConfig::sdxl(), "model.diffusion_model.", lookup(shapes)),
      v);
  // SD 1.x's layout (conv projections, attention everywhere, no vector) reads back too.
  const Shapes sd1 = unet_shapes(models::UnetConfig::sd1());
  expect_same(
      unet_config_from_shapes(models::UnetConfig::sdxl(), "model.diffusion_model.", lookup(sd1)),
      models::UnetConfig::sd1());
}

TEST(ModelShapes, MissingUnetIsAnErrorNamingTheTensor) {
  const Shapes none;
  try {
    unet_config_from_shapes(models::UnetConfig::sdxl(), "model.diffusion_model.", lookup(none));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.diffusion_model.input_blocks.0.0.weight"),
              std::string::npos)
        << e.what();
  }
}

TEST(ModelShapes, ClipEncodersReadBackFromTheirTensors) {
  for (models::ClipTextConfig c :
       {models::ClipTextConfig::vit_bigg14(), models::ClipTextConfig::sdxl_vit_l14()}) {
    AnyWeights any;
    nn::ParamRecorder rec(any);
    Context ctx;
    Tensor* ids = ctx.new_tensor(DType::I32, {77, 1});
    Tensor* mask = ctx.new_tensor(DType::F32, {77, 77});
    const nn::Scope scope(ctx, rec, "te.");
    if (c.projection_dim > 0)
      models::clip_text_forward_pooled(scope, c, ids, mask, 1, 0);
    else
      models::clip_text_forward(scope, c, ids, mask, 1);
    Shapes shapes;
    for (const nn::ParamDecl& p : rec.params()) shapes[p.name] = p.ne;
    models::ClipTextConfig preset = c;
    preset.hidden = 8;  // overwritten from the tensors
    preset.layers = 1;
    preset.intermediate = 8;
    preset.heads = 1;
    const models::ClipTextConfig got = clip_config_from_shapes(preset, "te.", lookup(shapes));
    EXPECT_EQ(got.hidden, c.hidden);
    EXPECT_EQ(got.layers, c.layers);
    EXPECT_EQ(got.intermediate, c.intermediate);
    EXPECT_EQ(got.heads, c.heads);
    EXPECT_EQ(got.projection_dim, c.projection_dim);
    EXPECT_EQ(got.final_layer_norm, c.final_layer_norm);
  }
}

// FLUX.1 dev's released layout and a small schnell-like variant read back from their
// tensors; T5-XXL and a small T5 likewise.
TEST(ModelShapes, FluxAndT5ReadBackFromTheirTensors) {
  models::FluxConfig small = models::FluxConfig::schnell();
  small.hidden = 256;
  small.heads = 2;
  small.mlp_hidden = 512;
  small.context_dim = 96;
  small.vec_dim = 64;
  small.depth = 2;
  small.depth_single = 3;
  // Chroma: no vector input; the approximator's widths and depth from its tensors.
  models::FluxConfig chroma = small;
  chroma.guidance_embed = false;
  chroma.vec_dim = 0;
  chroma.approximator = {32, 48, 3};
  for (const models::FluxConfig& want : {models::FluxConfig::dev(), small, chroma}) {
    AnyWeights any;
    nn::ParamRecorder rec(any);
    Context ctx;
    Tensor* img = ctx.new_tensor(DType::F32, {want.in_channels, 4, 1});
    Tensor* txt = ctx.new_tensor(DType::F32, {want.context_dim, 4, 1});
    Tensor* t = ctx.new_tensor(DType::F32, {1});
    Tensor* g = want.guidance_embed || want.is_chroma() ? ctx.new_tensor(DType::F32, {1}) : nullptr;
    Tensor* y = want.is_chroma() ? nullptr : ctx.new_tensor(DType::F32, {want.vec_dim, 1});
    Tensor* rope = ctx.new_tensor(DType::F32, {1, want.head_dim() / 2, 8});
    models::flux_forward(nn::Scope(ctx, rec, "model.diffusion_model."), want, img, txt, t, g, y,
                         rope, rope);
    Shapes shapes;
    for (const nn::ParamDecl& p : rec.params()) shapes[p.name] = p.ne;
    // From the other preset: everything must come from the tensors.
    const models::FluxConfig got = flux_config_from_shapes(
        want.guidance_embed ? models::FluxConfig::schnell() : models::FluxConfig::dev(),
        "model.diffusion_model.", lookup(shapes));
    EXPECT_EQ(got.hidden, want.hidden);
    EXPECT_EQ(got.heads, want.heads);
    EXPECT_EQ(got.mlp_hidden, want.mlp_hidden);
    EXPECT_EQ(got.context_dim, want.context_dim);
    EXPECT_EQ(got.vec_dim, want.vec_dim);
    EXPECT_EQ(got.depth, want.depth);
    EXPECT_EQ(got.depth_single, want.depth_single);
    EXPECT_EQ(got.guidance_embed, want.guidance_embed);
    EXPECT_EQ(got.in_channels, want.in_channels);
    EXPECT_EQ(got.out_channels, want.out_channels);
    EXPECT_EQ(got.approximator.depth, want.approximator.depth);
    if (want.is_chroma()) {
      EXPECT_EQ(got.approximator.in, want.approximator.in);
      EXPECT_EQ(got.approximator.hidden, want.approximator.hidden);
    }
  }
  models::T5Config small_t5;
  small_t5.vocab_size = 8000;
  small_t5.model_dim = 256;
  small_t5.inner_dim = 256;
  small_t5.heads = 4;
  small_t5.ff_dim = 512;
  small_t5.layers = 2;
  models::T5Config small_umt5 = small_t5;  // Wan's umT5: a bias table in every block
  small_umt5.vocab_size = 256384;
  small_umt5.bias_per_layer = true;
  for (const models::T5Config& want : {models::T5Config::xxl(), small_t5, small_umt5}) {
    AnyWeights any;
    nn::ParamRecorder rec(any);
    Context ctx;
    Tensor* ids = ctx.new_tensor(DType::I32, {4, 1});
    Tensor* buckets = ctx.new_tensor(DType::I32, {16});
    models::t5_encoder_forward(nn::Scope(ctx, rec, "text_encoders.t5xxl."), want, ids, buckets);
    Shapes shapes;
    for (const nn::ParamDecl& p : rec.params()) shapes[p.name] = p.ne;
    const models::T5Config got =
        t5_config_from_shapes(models::T5Config{}, "text_encoders.t5xxl.", lookup(shapes));
    EXPECT_EQ(got.vocab_size, want.vocab_size);
    EXPECT_EQ(got.model_dim, want.model_dim);
    EXPECT_EQ(got.inner_dim, want.inner_dim);
    EXPECT_EQ(got.heads, want.heads);
    EXPECT_EQ(got.ff_dim, want.ff_dim);
    EXPECT_EQ(got.layers, want.layers);
    EXPECT_EQ(got.bias_per_layer, want.bias_per_layer);
  }
  EXPECT_THROW(flux_config_from_shapes(models::FluxConfig::dev(), "model.diffusion_model.",
                                       lookup(Shapes{})),
               Error);
}

}  // namespace
}  // namespace sd::pipeline

namespace sd::pipeline {
namespace {

Shapes taehv_shapes(const models::TaehvConfig& c) {
  AnyWeights any;
  nn::ParamRecorder rec(any);
  models::taehv_record_parameters(rec, "", c);
  Shapes shapes;
  for (const nn::ParamDecl& p : rec.params()) shapes[p.name] = p.ne;
  return shapes;
}

// A TAEHV's widths, time strides and patch come back from its tensors; the wide variant and
// a file without the decoder's first conv are named.
TEST(ModelShapes, TaehvReadsBackFromItsTensors) {
  models::TaehvConfig c;
  c.latent_channels = 48;
  c.patch = 2;
  c.decoder_widths = {40, 24, 16, 8};
  c.time_upscale = {1, 2, 2};
  c.has_encoder = true;
  c.encoder_width = 12;
  Shapes shapes = taehv_shapes(c);
  const models::TaehvConfig read = taehv_config_from_shapes("", lookup(shapes));
  EXPECT_EQ(read.latent_channels, 48);
  EXPECT_EQ(read.patch, 2);
  EXPECT_EQ(read.decoder_widths, c.decoder_widths);
  EXPECT_EQ(read.time_upscale, c.time_upscale);
  EXPECT_TRUE(read.has_encoder);
  EXPECT_EQ(read.encoder_width, 12);
  EXPECT_EQ(read.time_downscale, c.time_downscale);

  c.has_encoder = false;
  EXPECT_FALSE(taehv_config_from_shapes("", lookup(taehv_shapes(c))).has_encoder);

  shapes["decoder.3.conv.6.weight"] = {3, 3, 1, 40};
  EXPECT_THROW(
      try { taehv_config_from_shapes("", lookup(shapes)); } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("wide TAEHV"), std::string::npos) << e.what();
        throw;
      },
      Error);
  shapes = taehv_shapes(c);
  shapes.erase("decoder.1.weight");
  EXPECT_THROW(taehv_config_from_shapes("", lookup(shapes)), Error);
}

}  // namespace
}  // namespace sd::pipeline
