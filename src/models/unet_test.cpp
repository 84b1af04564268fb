#include "models/unet.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "backend/cpu/cpu_device.h"
#include "backend/registry.h"
#include "io/name_conversion.h"
#include "io/safetensors.h"
#include "models/recording_weights_test_util.h"
#include "nn/graph_runner.h"
#include "nn/random_weights.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::models {
namespace {

// Model channels 32, two levels (attention in the first), one res block, 2 heads,
// 16-wide context.
UnetConfig tiny_unet_config() {
  UnetConfig c;
  c.model_channels = 32;
  c.channel_mult = {1, 2};
  c.num_res_blocks = 1;
  c.attention_levels = {0};
  c.num_heads = 2;
  c.context_dim = 16;
  return c;
}

struct TinyInputs {
  int64_t size = 8, batch = 2, tokens = 5;
  std::vector<float> x, timesteps, context;
};

TinyInputs tiny_inputs(const UnetConfig& c, int64_t batch = 2) {
  TinyInputs in;
  in.batch = batch;
  in.x = test::random_values(in.size * in.size * c.in_channels * batch, 1);
  in.context = test::random_values(c.context_dim * in.tokens * batch, 2);
  for (int64_t i = 0; i < batch; ++i) in.timesteps.push_back(999.0f - 400.0f * i);
  return in;
}

std::vector<float> run_unet(nn::Weights& w, const UnetConfig& c, const TinyInputs& in,
                            CpuKernels kernels = CpuKernels::Fast, int64_t context_batch = -1) {
  if (context_batch < 0) context_batch = in.batch;
  nn::GraphRunner runner(sd::test::cpu_backend(kernels));
  nn::GraphCall call;
  Tensor* x =
      call.input_f32("x", make_shape({in.size, in.size, c.in_channels, in.batch}), in.x.data());
  Tensor* t = call.input_f32("timesteps", make_shape({in.batch}), in.timesteps.data());
  Tensor* ctx = call.input_f32("context", make_shape({c.context_dim, in.tokens, context_batch}),
                               in.context.data());
  Tensor* out = unet_forward(nn::Scope(call.ctx(), w, "model.diffusion_model."), c, x, t, ctx);
  EXPECT_EQ(out->ne, make_shape({in.size, in.size, c.out_channels, in.batch}));
  return runner.run(call, out);
}

TEST(Unet, TinyConfigRunsAndKeepsTheLatentShape) {
  const UnetConfig c = tiny_unet_config();
  nn::RandomWeights w;
  const TinyInputs in = tiny_inputs(c);
  std::vector<float> out = run_unet(w, c, in);
  ASSERT_EQ(out.size(), static_cast<size_t>(8 * 8 * 4 * 2));
  double sum_sq = 0;
  for (float v : out) {
    ASSERT_TRUE(std::isfinite(v));
    sum_sq += v * v;
  }
  EXPECT_GT(sum_sq, 0.0);
  // Every block of the tiny config took its weights.
  const std::vector<std::string> names = w.names();
  for (const char* name : {"model.diffusion_model.input_blocks.1.1.proj_in.weight",
                           "model.diffusion_model.input_blocks.2.0.op.weight",
                           "model.diffusion_model.middle_block.1.norm.weight",
                           "model.diffusion_model.output_blocks.1.1.conv.weight",
                           "model.diffusion_model.output_blocks.3.1.proj_out.weight"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
}

TEST(Unet, FastKernelsMatchReferenceKernels) {
  for (bool sd2 : {false, true}) {
    UnetConfig c = tiny_unet_config();
    if (sd2) {
      c.head_dim = 16;
      c.linear_proj = true;
    }
    nn::RandomWeights w(DType::F16);
    const TinyInputs in = tiny_inputs(c);
    const std::vector<float> fast = run_unet(w, c, in, CpuKernels::Fast);
    const std::vector<float> reference = run_unet(w, c, in, CpuKernels::Reference);
    EXPECT_LE(test::max_scaled_error(fast, reference, 1e-3, 1e-3), 1.0) << "sd2 " << sd2;
  }
}

TEST(Unet, BatchSamplesAreIndependent) {
  // Sample 1 of a batch of 2 gives what it gives alone: nothing mixes across the batch.
  const UnetConfig c = tiny_unet_config();
  nn::RandomWeights w;
  const TinyInputs both = tiny_inputs(c, 2);
  TinyInputs second = both;
  second.batch = 1;
  const size_t x_half = both.x.size() / 2, ctx_half = both.context.size() / 2;
  second.x.assign(both.x.begin() + x_half, both.x.end());
  second.context.assign(both.context.begin() + ctx_half, both.context.end());
  second.timesteps = {both.timesteps[1]};
  const std::vector<float> batched = run_unet(w, c, both);
  const std::vector<float> alone = run_unet(w, c, second);
  const std::vector<float> batched_second(batched.begin() + batched.size() / 2, batched.end());
  EXPECT_LE(test::max_scaled_error(batched_second, alone, 1e-4, 1e-4), 1.0);
}

TEST(Unet, OneContextIsSharedByTheBatch) {
  const UnetConfig c = tiny_unet_config();
  nn::RandomWeights w;
  TinyInputs shared = tiny_inputs(c, 2);
  shared.context.resize(shared.context.size() / 2);
  TinyInputs repeated = shared;
  repeated.context.insert(repeated.context.end(), shared.context.begin(), shared.context.end());
  const std::vector<float> a = run_unet(w, c, shared, CpuKernels::Fast, 1);
  const std::vector<float> b = run_unet(w, c, repeated);
  EXPECT_LE(test::max_scaled_error(a, b, 1e-6, 1e-6), 1.0);
}

TEST(Unet, RejectsInputsTheModelCannotTake) {
  const UnetConfig c = tiny_unet_config();
  test::RecordingWeights w(DType::F16);
  auto build = [&](Shape x_ne, Shape ctx_ne, int64_t steps) {
    Context ctx;
    Tensor* x = ctx.new_tensor(DType::F32, x_ne);
    Tensor* t = ctx.new_tensor(DType::F32, make_shape({steps}));
    Tensor* context = ctx.new_tensor(DType::F32, ctx_ne);
    unet_forward(nn::Scope(ctx, w, "model.diffusion_model."), c, x, t, context);
  };
  const Shape ok_x = make_shape({8, 8, 4, 2}), ok_ctx = make_shape({16, 5, 2});
  EXPECT_NO_THROW(build(ok_x, ok_ctx, 2));
  EXPECT_THROW(build(make_shape({8, 8, 9, 2}), ok_ctx, 2), Error);  // channels
  EXPECT_THROW(build(ok_x, make_shape({32, 5, 2}), 2), Error);      // context width
  EXPECT_THROW(build(ok_x, make_shape({16, 5, 3}), 2), Error);      // context batch
  EXPECT_THROW(build(ok_x, ok_ctx, 1), Error);                      // timesteps
  try {
    build(make_shape({9, 8, 4, 1}), make_shape({16, 5, 1}), 1);  // odd width
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("multiples of 2"), std::string::npos) << e.what();
  }
}

// The parameters a full-size config asks for, building a 64x64 graph.
std::map<std::string, Shape> requested_parameters(const UnetConfig& c) {
  test::RecordingWeights w(DType::F16);
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {64, 64, c.in_channels, 1});
  Tensor* t = ctx.new_tensor(DType::F32, {1});
  Tensor* context = ctx.new_tensor(DType::F32, {c.context_dim, 77, 1});
  Tensor* y = c.adm_in_channels > 0 ? ctx.new_tensor(DType::F32, {c.adm_in_channels, 1}) : nullptr;
  unet_forward(nn::Scope(ctx, w, "model.diffusion_model."), c, x, t, context, y);
  return w.requested();
}

int64_t parameter_count(const std::map<std::string, Shape>& shapes) {
  int64_t n = 0;
  for (const auto& [name, ne] : shapes) n += ne[0] * ne[1] * ne[2] * ne[3];
  return n;
}

TEST(Unet, InpaintConfigTakesNineInputChannels) {
  const auto shapes = requested_parameters(UnetConfig::sd1_inpaint());
  ASSERT_TRUE(shapes.count("model.diffusion_model.input_blocks.0.0.weight"));
  EXPECT_EQ(shapes.at("model.diffusion_model.input_blocks.0.0.weight"), make_shape({3, 3, 9, 320}));
  EXPECT_EQ(shapes.at("model.diffusion_model.out.2.weight"), make_shape({3, 3, 320, 4}));
}

TEST(Unet, FullConfigsHaveThePublishedParameterCounts) {
  // SD 1.x: 859,520,964 parameters; SD 2.x: 865,910,724 (the released checkpoints).
  EXPECT_EQ(parameter_count(requested_parameters(UnetConfig::sd1())), 859520964);
  EXPECT_EQ(parameter_count(requested_parameters(UnetConfig::sd2())), 865910724);
  const auto sd2 = requested_parameters(UnetConfig::sd2());
  EXPECT_EQ(sd2.at("model.diffusion_model.input_blocks.1.1.proj_in.weight"),
            make_shape({320, 320}));
  const auto sd1 = requested_parameters(UnetConfig::sd1());
  EXPECT_EQ(sd1.at("model.diffusion_model.input_blocks.1.1.proj_in.weight"),
            make_shape({1, 1, 320, 320}));
  // SDXL base: 2,567,463,684 (sd_xl_base_1.0), with label_emb and no attention at level 0.
  const auto sdxl = requested_parameters(UnetConfig::sdxl());
  EXPECT_EQ(parameter_count(sdxl), 2567463684);
  EXPECT_EQ(sdxl.at("model.diffusion_model.label_emb.0.0.weight"), make_shape({2816, 1280}));
  EXPECT_FALSE(sdxl.count("model.diffusion_model.input_blocks.1.1.proj_in.weight"));
  EXPECT_TRUE(
      sdxl.count("model.diffusion_model.middle_block.1.transformer_blocks.9.attn2.to_k.weight"));
}

TEST(Unet, VectorIsRequiredExactlyWhenTheConfigHasOne) {
  test::RecordingWeights w(DType::F16);
  Context ctx;
  UnetConfig c = UnetConfig::sdxl();
  Tensor* x = ctx.new_tensor(DType::F32, {64, 64, 4, 1});
  Tensor* t = ctx.new_tensor(DType::F32, {1});
  Tensor* context = ctx.new_tensor(DType::F32, {2048, 77, 1});
  EXPECT_THROW(unet_forward(nn::Scope(ctx, w, "u."), c, x, t, context), Error);
  Tensor* wrong = ctx.new_tensor(DType::F32, {2560, 1});
  EXPECT_THROW(unet_forward(nn::Scope(ctx, w, "u."), c, x, t, context, wrong), Error);
}

// Names and shapes of the UNet tensors of a checkpoint, canonical.
std::map<std::string, Shape> checkpoint_unet(const std::string& path) {
  const io::SafetensorsFile file = io::SafetensorsFile::open(path);
  std::map<std::string, Shape> shapes;
  for (const io::TensorInfo& info : file.tensors()) {
    const std::string name = io::to_canonical(info.name, io::SourceLayout::Ldm, "");
    if (name.rfind(io::kUnetRoot, 0) == 0) shapes[name] = info.ne;
  }
  return shapes;
}

void expect_same_parameters(const UnetConfig& c, const char* env) {
  const char* path = std::getenv(env);
  if (!path || !*path) GTEST_SKIP() << env << " is not set (path of a full checkpoint)";
  const std::map<std::string, Shape> file = checkpoint_unet(path);
  const std::map<std::string, Shape> model = requested_parameters(c);
  for (const auto& [name, ne] : model) {
    auto it = file.find(name);
    if (it == file.end()) {
      ADD_FAILURE() << "the model asks for " << name << ", which " << path << " lacks";
      continue;
    }
    EXPECT_EQ(it->second, ne) << name;
  }
  for (const auto& [name, ne] : file) {
    EXPECT_TRUE(model.count(name)) << path << " has " << name << ", which the model never reads";
  }
  EXPECT_EQ(file.size(), model.size());
}

TEST(Unet, Sd1ConfigReadsExactlyTheCheckpointTensors) {
  expect_same_parameters(UnetConfig::sd1(), "SD_TEST_SD15_MODEL");
}

TEST(Unet, Sd2ConfigReadsExactlyTheCheckpointTensors) {
  expect_same_parameters(UnetConfig::sd2(), "SD_TEST_SD2_MODEL");
}

TEST(Unet, SdxlConfigReadsExactlyTheCheckpointTensors) {
  expect_same_parameters(UnetConfig::sdxl(), "SD_TEST_SDXL_MODEL");
}

}  // namespace
}  // namespace sd::models
