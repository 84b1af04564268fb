#include "weights/model_manager.h"

#include <gtest/gtest.h>

#include <filesystem>

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
