// Model-file interoperability without a reference binary: a checkpoint made up by
// nn::RandomWeights, written as safetensors, converted to GGUF by convert_model, and
// loaded back through the loader and ModelManager must give the same tensors: the same
// shapes, the type convert's rules choose, values within the quantization error of the
// originals, the same bytes whether mapped or copied, and the same GGUF when converted
// again.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/convert.h"
#include "backend/registry.h"
#include "io/gguf.h"
#include "io/io_test_util.h"
#include "nn/random_weights.h"
#include "tensor/quant/quant.h"
#include "weights/model_manager.h"
#include "weights/weight_type.h"

namespace sd::api {
namespace {

using io::test::TempDir;

Device& cpu() {
  return DeviceRegistry::instance().get("CPU");
}

struct Spec {
  std::string name;
  Shape ne;  // engine order
};

// LDM names covering convert's rules: 2-D and 4-D weights whose ne0 is a multiple of
// 256 (every block type takes them), a 3x3 conv (ne0 = 3: kept), biases (kept by name),
// a norm weight, a time embedding (kept by name) and a text-encoder projection.
std::vector<Spec> specs() {
  const std::string u = "model.diffusion_model.", te = "cond_stage_model.transformer.text_model.";
  return {
      {u + "input_blocks.1.1.proj_in.weight", make_shape({512, 64})},
      {u + "input_blocks.1.1.proj_in.bias", make_shape({64})},
      {u + "input_blocks.1.1.norm.weight", make_shape({256})},
      {u + "input_blocks.1.0.skip_connection.weight", make_shape({256, 32, 1, 1})},
      {u + "input_blocks.0.0.weight", make_shape({3, 3, 4, 32})},
      {u + "time_embed.0.weight", make_shape({256, 128})},
      {te + "encoder.layers.0.self_attn.q_proj.weight", make_shape({768, 16})},
      {"first_stage_model.decoder.conv_in.bias", make_shape({16})},
  };
}

// The test checkpoint, made once per test in its own folder.
struct Checkpoint {
  TempDir dir;
  nn::RandomWeights weights{DType::F16, 7};
  std::string path = dir.file("model.safetensors");
  Checkpoint() {
    Context ctx;
    for (const Spec& s : specs()) weights.get(ctx, s.name, s.ne);
    weights.save_safetensors(path);
  }
  std::string convert(std::optional<DType> type, const std::string& input = "") {
    ConvertOptions o;
    o.input = input.empty() ? path : input;
    o.output = dir.file(std::string(type ? dtype_name(*type) : "keep") + "_" +
                        std::to_string(counter++) + ".gguf");
    o.type = type;
    convert_model(o);
    return o.output;
  }
  int counter = 0;
};

// A loaded weight's values as f32, read back from its resident tensor.
std::vector<float> resident_values(const Tensor& t) {
  const int64_t n = t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3];
  std::vector<uint8_t> raw(t.nbytes());
  tensor_get(t, raw.data());
  std::vector<float> out(static_cast<size_t>(n));
  const int64_t rows = n / t.ne[0];
  const size_t row_bytes = row_size(t.type, t.ne[0]);
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(t.type, raw.data() + r * row_bytes, out.data() + r * t.ne[0], t.ne[0]);
  }
  return out;
}

// Largest error quantizing `x` to `type` may make, per element, for values in blocks of
// 32 (the finest scale any of these types keeps). Loose for the K types, whose 6-bit
// sub-block scales add their own rounding.
float error_bound(DType type, const std::vector<float>& x, size_t i) {
  const size_t b0 = i / 32 * 32, b1 = std::min(x.size(), b0 + 32);
  float lo = 0, hi = 0;
  for (size_t j = b0; j < b1; ++j) {
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
  const float amax = std::max(-lo, hi);
  switch (type) {
    case DType::F32:
      return 0.0f;
    case DType::F16:  // f32 vectors rounded: half an ulp, or a subnormal step
      return std::fabs(x[i]) * 0x1p-11f + 0x1p-25f;
    case DType::Q8_0:
      return amax / 127.0f * 0.5f + amax * 1e-3f;  // half a step, and the f16 scale
    case DType::Q4_K:
      return (hi - lo) / 15.0f * 1.5f + amax * 0.05f;
    default:
      return amax;
  }
}

void expect_round_trip(DType type) {
  Checkpoint c;
  const std::string gguf = c.convert(type);
  weights::ModelLoader loader;
  loader.add(gguf);
  weights::ModelManager mapped(loader, cpu());
  weights::ModelManager copied(loader, cpu(), {std::nullopt, false});
  Context ctx;
  for (const Spec& s : specs()) {
    SCOPED_TRACE(s.name);
    ASSERT_TRUE(loader.contains(s.name));
    EXPECT_EQ(loader.find(s.name).ne, s.ne);
    const bool vector = s.ne[1] == 1;
    const DType stored = vector ? DType::F32 : DType::F16;
    const DType file_type =
        weights::takes_weight_type(s.name, s.ne[0], stored, type) ? type : stored;
    EXPECT_EQ(loader.find(s.name).stored, file_type);
    // Quantized vectors (norm weights) are dequantized on load, as sd.cpp does.
    const DType want_type = vector && is_quantized(file_type) ? DType::F32 : file_type;
    const Tensor* a = mapped.get(ctx, s.name, s.ne);
    const Tensor* b = copied.get(ctx, s.name, s.ne);
    EXPECT_EQ(a->type, want_type) << dtype_name(a->type);
    ASSERT_EQ(a->type, b->type);
    ASSERT_EQ(a->nbytes(), b->nbytes());
    EXPECT_EQ(std::memcmp(a->data, b->data, a->nbytes()), 0) << "mapped and copied differ";

    const std::vector<float> original = c.weights.values(s.name);
    const std::vector<float> loaded = resident_values(*a);
    ASSERT_EQ(loaded.size(), original.size());
    size_t bad = 0;
    for (size_t i = 0; i < original.size(); ++i) {
      if (std::fabs(loaded[i] - original[i]) > error_bound(file_type, original, i)) ++bad;
    }
    EXPECT_EQ(bad, 0u) << "of " << original.size() << " values beyond " << dtype_name(file_type)
                       << "'s error";
    // The loader's own f32 read gives the same values.
    std::vector<float> read(original.size());
    loader.read(s.name, DType::F32, read.data());
    EXPECT_EQ(read, loaded);
  }
  // Quantized tensors cannot alias the file as another type; same-type ones do.
  EXPECT_GT(mapped.mapped_bytes(), 0u);
  EXPECT_EQ(copied.mapped_bytes(), 0u);
}

TEST(Interop, ConvertedQ8_0LoadsWithinQuantizationError) {
  expect_round_trip(DType::Q8_0);
}

TEST(Interop, ConvertedQ4_KLoadsWithinQuantizationError) {
  expect_round_trip(DType::Q4_K);
}

TEST(Interop, ConvertedF16LoadsWithinF16Rounding) {
  expect_round_trip(DType::F16);
}

// --type at load time follows convert's rules too, but vectors stay f32: the norm ops
// refuse block-quantized weights.
TEST(Interop, LoadTimeTypeKeepsVectorsFloat) {
  Checkpoint c;
  weights::ModelLoader loader;
  loader.add(c.path);
  weights::ModelManager manager(loader, cpu(), {DType::Q8_0});
  const std::string u = "model.diffusion_model.input_blocks.1.";
  EXPECT_EQ(manager.resident_type(u + "1.proj_in.weight"), DType::Q8_0);
  EXPECT_EQ(manager.resident_type(u + "1.norm.weight"), DType::F32);
  EXPECT_EQ(manager.resident_type(u + "1.proj_in.bias"), DType::F32);
  EXPECT_EQ(manager.resident_type(u + "0.skip_connection.weight"), DType::Q8_0);
}

// Tensor data of a GGUF file, by name.
std::map<std::string, std::vector<uint8_t>> tensor_bytes(const std::string& path) {
  const io::GgufFile f = io::GgufFile::open(path);
  std::map<std::string, std::vector<uint8_t>> out;
  for (const io::TensorInfo& t : f.tensors()) {
    out[t.name].assign(f.data(t), f.data(t) + t.size);
  }
  return out;
}

TEST(Interop, ConvertingAGgufAgainChangesNoByte) {
  Checkpoint c;
  for (DType type : {DType::Q8_0, DType::Q4_K}) {
    SCOPED_TRACE(dtype_name(type));
    const std::string once = c.convert(type);
    const std::string kept = c.convert(std::nullopt, once);
    const std::string same_type = c.convert(type, once);
    const auto want = tensor_bytes(once);
    EXPECT_EQ(want.size(), specs().size());
    EXPECT_EQ(tensor_bytes(kept), want);
    EXPECT_EQ(tensor_bytes(same_type), want);
  }
}

}  // namespace
}  // namespace sd::api
