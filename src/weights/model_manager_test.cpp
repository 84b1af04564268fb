#include "weights/model_manager.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <tuple>

#include "backend/registry.h"
#include "io/io_test_util.h"
#include "nn/graph_runner.h"
#include "nn/layers.h"
#include "nn/random_weights.h"
#include "tensor/error.h"
#include "tensor/quant/quant.h"

namespace sd::weights {
namespace {

namespace fs = std::filesystem;

Device& cpu_device() {
  return DeviceRegistry::instance().get("CPU");
}

// One folder per test process: ctest runs the tests of this file in parallel.
std::string temp_path(const std::string& name) {
  static const io::test::TempDir dir;
  return dir.file(name);
}

// A tiny LDM-named checkpoint: one UNet linear and one text-encoder layer norm.
std::string write_checkpoint(nn::RandomWeights& w, DType matrix_type) {
  Context ctx;
  w.get(ctx, "model.diffusion_model.out.2.weight", make_shape({32, 8}));
  w.get(ctx, "model.diffusion_model.out.2.bias", make_shape({8}));
  w.get(ctx, "cond_stage_model.transformer.text_model.final_layer_norm.weight", make_shape({16}));
  const std::string path = temp_path(std::string(dtype_name(matrix_type)) + ".safetensors");
  w.save_safetensors(path);
  return path;
}

TEST(ModelManager, LoadsWeightsThatComputeLikeTheOriginals) {
  nn::RandomWeights original(DType::F16);
  const std::string path = write_checkpoint(original, DType::F16);
  ModelLoader loader;
  loader.add(path);
  ModelManager manager(loader, cpu_device());
  auto backend = cpu_device().create_backend(BackendOptions{2});
  std::vector<float> x(32 * 3);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  auto run = [&](nn::Weights& w) {
    nn::GraphRunner runner(*backend);
    nn::GraphCall call;
    Tensor* in = call.input_f32("x", make_shape({32, 3}), x.data());
    return runner.run(
        call, nn::linear(nn::Scope(call.ctx(), w, "model.diffusion_model.")["out.2"], in, 32, 8));
  };
  EXPECT_EQ(run(manager), run(original));
  // Same dtype, no transform: the weight aliases the mapped file.
  EXPECT_EQ(manager.mapped_bytes(), 32u * 8 * 2 + 8 * 4);
  EXPECT_EQ(manager.resident_bytes(), 0u);
  fs::remove(path);
}

TEST(ModelManager, WeightTypeConvertsMatricesAndKeepsBiases) {
  nn::RandomWeights original(DType::F32);
  const std::string path = write_checkpoint(original, DType::F32);
  ModelLoader loader;
  loader.add(path);
  ModelManager manager(loader, cpu_device(), {DType::Q8_0});
  EXPECT_EQ(manager.resident_type("model.diffusion_model.out.2.weight"), DType::Q8_0);
  EXPECT_EQ(manager.resident_type("model.diffusion_model.out.2.bias"), DType::F32);
  Context ctx;
  Tensor* w = manager.get(ctx, "model.diffusion_model.out.2.weight", make_shape({32, 8}));
  EXPECT_EQ(w->type, DType::Q8_0);
  EXPECT_EQ(manager.resident_bytes(), row_size(DType::Q8_0, 32) * 8);
  manager.release("model.diffusion_model.");
  EXPECT_EQ(manager.resident_bytes(), 0u);
  fs::remove(path);
}

// --tensor-type-rules at load: the first matching rule sets the type ahead of --type, the
// keep rules (biases) still hold, and unmatched tensors take --type or stay as stored.
TEST(ModelManager, TensorTypeRulesComeBeforeTheWeightType) {
  nn::RandomWeights original(DType::F32);
  const std::string path = write_checkpoint(original, DType::F32);
  ModelLoader loader;
  loader.add(path);
  auto rule = [](const char* pattern, DType type) {
    return TensorTypeRule{pattern, std::regex(pattern), type};
  };
  const std::string out = "model.diffusion_model.out.2.weight";
  const std::string norm = "cond_stage_model.transformer.text_model.final_layer_norm.weight";
  ModelManagerOptions o{DType::Q8_0};
  o.type_rules = {rule("^model\\.diffusion_model\\.out", DType::BF16), rule("out", DType::F16)};
  ModelManager ruled(loader, cpu_device(), o);
  EXPECT_EQ(ruled.resident_type(out), DType::BF16);  // the first rule, not the second
  EXPECT_EQ(ruled.resident_type("model.diffusion_model.out.2.bias"), DType::F32);
  EXPECT_EQ(ruled.resident_type(norm), DType::F32);  // --type q8_0: a norm weight stays f32
  Context ctx;
  EXPECT_EQ(ruled.get(ctx, out, make_shape({32, 8}))->type, DType::BF16);
  ModelManagerOptions rules_only;
  rules_only.type_rules = {rule("final_layer_norm", DType::F16)};
  ModelManager partial(loader, cpu_device(), rules_only);
  EXPECT_EQ(partial.resident_type(out), DType::F32);
  EXPECT_EQ(partial.resident_type(norm), DType::F16);
  fs::remove(path);
}

TEST(ModelManager, MissingAndMisshapedTensorsAreNamed) {
  nn::RandomWeights original(DType::F32);
  const std::string path = write_checkpoint(original, DType::F32);
  ModelLoader loader;
  loader.add(path);
  ModelManager manager(loader, cpu_device());
  Context ctx;
  try {
    manager.get(ctx, "model.diffusion_model.out.2.weight", make_shape({16, 8}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is [32, 8], the model expects [16, 8]"),
              std::string::npos)
        << e.what();
  }
  try {
    manager.get(ctx, "first_stage_model.decoder.conv_in.weight", make_shape({3, 3, 4, 512}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("first_stage_model.decoder.conv_in.weight"),
              std::string::npos)
        << e.what();
  }
  fs::remove(path);
}

// --fa / --diffusion-fa: a module flagged bf16_attention attends on bf16 operands whatever
// its weights' type; the others keep the rule of nn::attention_precision_for (bf16 only
// for bf16 projections).
TEST(ModelManager, Bf16AttentionFollowsTheModuleThatOwnsTheProjection) {
  nn::RandomWeights original(DType::F16);
  Context ctx;
  const std::string unet_q = "model.diffusion_model.input_blocks.1.1.attn1.to_q.weight";
  const std::string vae_q = "first_stage_model.decoder.mid.attn_1.q.weight";
  original.get(ctx, unet_q, make_shape({32, 32}));
  original.get(ctx, vae_q, make_shape({32, 32}));
  const std::string path = temp_path("attention.safetensors");
  original.save_safetensors(path);

  for (const DType type : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    ModelLoader loader;
    loader.add(path);
    ModelManager manager(loader, ModelManagerOptions{type});
    ModuleSpec diffusion{"diffusion", {"model.diffusion_model."}, &cpu_device(), {}};
    diffusion.bf16_attention = true;
    manager.add_module(diffusion);
    manager.add_module({"vae", {"first_stage_model."}, &cpu_device(), {}});
    Context c;
    const nn::Scope root(c, manager);
    EXPECT_EQ(root.attention_precision(manager.get(c, unet_q, make_shape({32, 32}))),
              AttentionPrecision::BF16);
    EXPECT_EQ(root.attention_precision(manager.get(c, vae_q, make_shape({32, 32}))),
              type == DType::BF16 ? AttentionPrecision::BF16 : AttentionPrecision::F32);
  }
  fs::remove(path);
}

// --quantize-convs: the diffusion module's conv kernels whose input channels fill q8_0
// blocks are held in q8_0, 3x3 ones at stride 1 as their Winograd transform, others
// channels-last, and compute like the f16 file's (within the rounding of weights and
// activations to 8 bits); the others keep their stored type.
TEST(ModelManager, QuantizedConvolutionsAreQ8_0InTheirKernelsLayout) {
  nn::RandomWeights original(DType::F16);
  Context ctx;
  const std::string conv = "model.diffusion_model.input_blocks.1.0.in_layers.2.";
  original.get(ctx, conv + "weight", make_shape({3, 3, 32, 16}));
  original.get(ctx, conv + "bias", make_shape({16}));
  const std::string down = "model.diffusion_model.input_blocks.3.0.op.weight";  // stride 2
  original.get(ctx, down, make_shape({3, 3, 32, 8}));
  original.get(ctx, "model.diffusion_model.input_blocks.3.0.op.bias", make_shape({8}));
  const std::string narrow = "model.diffusion_model.input_blocks.0.0.weight";  // 4 channels
  original.get(ctx, narrow, make_shape({3, 3, 4, 32}));
  const std::string vae = "first_stage_model.decoder.conv_in.weight";  // another module
  original.get(ctx, vae, make_shape({3, 3, 32, 8}));
  const std::string path = temp_path("convs.safetensors");
  original.save_safetensors(path);

  ModelLoader loader;
  loader.add(path);
  ModelManager manager(loader);
  ModuleSpec diffusion{"diffusion", {"model.diffusion_model."}, &cpu_device(), {}};
  diffusion.quantize_convs = true;
  manager.add_module(diffusion);
  manager.add_module({"vae", {"first_stage_model."}, &cpu_device(), {}});

  Context c;
  Tensor* w = manager.get_conv_kernel(c, conv + "weight", make_shape({3, 3, 32, 16}), 1);
  EXPECT_EQ(w->type, DType::Q8_0);
  EXPECT_EQ(w->ne, make_shape({32, 4, 4, 16}));
  EXPECT_EQ(nn::conv_kernel_layout(w, 3), ConvKernelLayout::WinogradF2x3);
  EXPECT_EQ(manager.resident_bytes(), row_size(DType::Q8_0, 32) * 4 * 4 * 16);
  Tensor* d = manager.get_conv_kernel(c, down, make_shape({3, 3, 32, 8}), 2);
  EXPECT_EQ(d->type, DType::Q8_0);
  EXPECT_EQ(d->ne, make_shape({32, 3, 3, 8}));
  EXPECT_EQ(nn::conv_kernel_layout(d, 3), ConvKernelLayout::ChannelsLast);
  Tensor* n = manager.get_conv_kernel(c, narrow, make_shape({3, 3, 4, 32}), 1);
  EXPECT_EQ(n->type, DType::F16);
  EXPECT_EQ(n->ne, make_shape({3, 3, 4, 32}));
  Tensor* v = manager.get_conv_kernel(c, vae, make_shape({3, 3, 32, 8}), 1);
  EXPECT_EQ(v->type, DType::F16);
  // A channels-last kernel has no meaning as a plain tensor.
  EXPECT_THROW(manager.get(c, conv + "weight", make_shape({3, 3, 32, 16})), Error);
  EXPECT_THROW(manager.get(c, down, make_shape({3, 3, 32, 8})), Error);

  auto backend = cpu_device().create_backend(BackendOptions{2});
  std::vector<float> x(9 * 7 * 32);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.3f * static_cast<float>(i));
  auto run = [&](nn::Weights& weights, const char* layer, int64_t out, int stride) {
    nn::GraphRunner runner(*backend);
    nn::GraphCall call;
    Tensor* in = call.input_f32("x", make_shape({9, 7, 32, 1}), x.data());
    const nn::Scope unet(call.ctx(), weights, "model.diffusion_model.");
    return runner.run(call, nn::conv2d(unet[layer], in, 32, out, 3, stride, 1));
  };
  for (const auto& [layer, out, stride] :
       {std::tuple{"input_blocks.1.0.in_layers.2", 16, 1}, {"input_blocks.3.0.op", 8, 2}}) {
    SCOPED_TRACE(layer);
    const std::vector<float> f16 = run(original, layer, out, stride);
    const std::vector<float> q8 = run(manager, layer, out, stride);
    ASSERT_EQ(f16.size(), q8.size());
    double err = 0, norm = 0;
    for (size_t i = 0; i < f16.size(); ++i) {
      err += (q8[i] - f16[i]) * (q8[i] - f16[i]);
      norm += f16[i] * f16[i];
    }
    // 8-bit weights and activations: about 0.5% relative error (a wrong layout: ~140%).
    EXPECT_LT(std::sqrt(err / norm), 0.02);
  }
  fs::remove(path);
}

TEST(ModelLoader, SeparateVaeFileGoesUnderTheVaeRoot) {
  nn::RandomWeights vae(DType::F16);
  Context ctx;
  vae.get(ctx, "decoder.conv_in.weight", make_shape({3, 3, 4, 8}));
  const std::string path = temp_path("vae.safetensors");
  vae.save_safetensors(path);
  ModelLoader loader;
  loader.add(path, io::FileRole::Vae);
  EXPECT_TRUE(loader.contains("first_stage_model.decoder.conv_in.weight"));
  fs::remove(path);
}

// Tensors of several conversion chunks each: a 3x3 kernel (rows of 3 values) converts to
// bf16 as one run, a matrix quantizes row by row; both must equal converting the values
// one tensor at a time.
TEST(ModelLoader, ConvertsEveryChunkOfLargeTensors) {
  nn::RandomWeights stored(DType::F16);
  Context ctx;
  const Shape kernel = make_shape({3, 3, 64, 128});  // 73728 values
  const Shape matrix = make_shape({64, 2100});
  stored.get(ctx, "model.diffusion_model.out.2.weight", kernel);
  stored.get(ctx, "model.diffusion_model.out.0.weight", matrix);
  const std::string path = temp_path("chunks.safetensors");
  stored.save_safetensors(path);
  ModelLoader loader;
  loader.add(path);
  auto expected = [&](const std::string& name, DType type, const Shape& ne) {
    const std::vector<float> values = stored.values(name);
    const auto rows = static_cast<int64_t>(values.size()) / ne[0];
    std::vector<uint8_t> bytes(row_size(type, ne[0]) * static_cast<size_t>(rows));
    quantize_rows(type, values.data(), bytes.data(), rows, ne[0]);
    return bytes;
  };
  auto read = [&](const std::string& name, DType type, const Shape& ne) {
    std::vector<uint8_t> bytes(row_size(type, ne[0]) * static_cast<size_t>(ne[1] * ne[2] * ne[3]));
    loader.read(name, type, bytes.data());
    return bytes;
  };
  EXPECT_EQ(read("model.diffusion_model.out.2.weight", DType::BF16, kernel),
            expected("model.diffusion_model.out.2.weight", DType::BF16, kernel));
  EXPECT_EQ(read("model.diffusion_model.out.0.weight", DType::Q8_0, matrix),
            expected("model.diffusion_model.out.0.weight", DType::Q8_0, matrix));
  fs::remove(path);
}

TEST(ModelLoader, MissingFileIsAClearError) {
  ModelLoader loader;
  try {
    loader.add("/no/such/model.safetensors");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not found"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sd::weights
