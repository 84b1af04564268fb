// Bit-exactness against the GGUF reference quantizers: ../shared/golden/quant holds f32
// inputs and the same tensors converted by stable-diffusion.cpp (README.md there). Every
// byte our quantizer writes must match, and our dequantizer applied to the reference bytes
// must reconstruct the inputs within each type's error bound.
//
// stable-diffusion.cpp's convert_tensor() hands ggml_quantize_chunk an all-ones importance
// matrix, which selects ggml's weighted quantizers (quantize_q4_0 with quant_weights ...)
// rather than the plain quantize_row_*_ref. So the golden files are compared with
// quantize_rows(..., ones), and the plain path is checked against hashes of
// quantize_row_*_ref's output on the same inputs (ggml 8e800cef, the version sd.cpp
// 97d29908 pins).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor/quant/quant.h"
#include "tensor/quant/test_files.h"
#include "test_support.h"

namespace sd {
namespace {

std::string golden_dir() {
  return std::string(SD_SHARED_DIR) + "/golden/quant";
}

#define SKIP_WITHOUT_GOLDEN()                                                     \
  do {                                                                            \
    if (!std::filesystem::exists(golden_dir() + "/inputs.safetensors")) {         \
      GTEST_SKIP() << "../shared/golden/quant not found; skipping bit-exactness"; \
    }                                                                             \
  } while (0)

size_t gguf_tensor_bytes(uint32_t gguf_type, const std::vector<int64_t>& ne) {
  const auto type = dtype_from_gguf_id(gguf_type);
  if (!type || ne.empty()) throw std::runtime_error("unexpected tensor in golden file");
  int64_t rows = 1;
  for (size_t i = 1; i < ne.size(); ++i) rows *= ne[i];
  return row_size(*type, ne[0]) * static_cast<size_t>(rows);
}

struct GoldenTensors {
  std::map<std::string, test_files::TestTensor> inputs;
  std::map<std::string, test_files::TestTensor> quantized;
};

GoldenTensors load(DType type) {
  GoldenTensors g;
  g.inputs = test_files::read_safetensors(golden_dir() + "/inputs.safetensors");
  g.quantized = test_files::read_gguf(golden_dir() + "/" + std::string(dtype_name(type)) + ".gguf",
                                      gguf_tensor_bytes);
  return g;
}

std::vector<float> as_floats(const test_files::TestTensor& t) {
  std::vector<float> v(t.data.size() / sizeof(float));
  std::memcpy(v.data(), t.data.data(), v.size() * sizeof(float));
  return v;
}

// Bounds on relative_rmse per type and golden tensor (gauss, smooth, tails, tiny): the
// reference bytes' measured error times about 1.25. "tiny" (sigma 1e-4) is worse for the
// K types and q8_0 because their half-precision super-block scales fall into the f16
// subnormal range; "tails" has 12.0 outliers that stretch the scales of their blocks.
struct GoldenBound {
  DType type;
  double gauss, smooth, tails, tiny;
};
constexpr GoldenBound kGoldenBounds[] = {
    {DType::F16, 3e-4, 3e-4, 1e-4, 3e-4},        {DType::BF16, 2e-3, 2e-3, 7e-4, 2e-3},
    {DType::Q4_0, 0.10, 0.04, 0.093, 0.10},      {DType::Q4_1, 0.088, 0.018, 0.078, 0.088},
    {DType::Q5_0, 0.051, 0.022, 0.073, 0.05},    {DType::Q5_1, 0.043, 0.0087, 0.057, 0.042},
    {DType::Q8_0, 0.0067, 0.0031, 0.015, 0.013}, {DType::Q2_K, 0.34, 0.053, 0.22, 0.33},
    {DType::Q3_K, 0.18, 0.052, 0.099, 0.18},     {DType::Q4_K, 0.089, 0.018, 0.079, 0.101},
    {DType::Q5_K, 0.045, 0.0093, 0.058, 0.068},  {DType::Q6_K, 0.022, 0.011, 0.037, 0.131},
};

double golden_bound(DType type, const std::string& tensor) {
  for (const GoldenBound& b : kGoldenBounds) {
    if (b.type != type) continue;
    if (tensor == "golden.gauss.weight") return b.gauss;
    if (tensor == "golden.smooth.weight") return b.smooth;
    if (tensor == "golden.tails.weight") return b.tails;
    if (tensor == "golden.tiny.weight") return b.tiny;
  }
  throw std::runtime_error("no bound for " + std::string(dtype_name(type)) + " " + tensor);
}

// FNV-1a 64 of a byte string.
uint64_t fnv1a(const std::vector<uint8_t>& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (uint8_t c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// Hashes of ggml's plain reference quantizers (quantize_row_*_ref, ggml 8e800cef, built for
// x86-64) applied row by row to the four golden inputs, in name order (gauss, smooth,
// tails, tiny).
struct PlainHashes {
  DType type;
  uint64_t hash[4];
};
constexpr PlainHashes kPlainHashes[] = {
    {DType::Q4_0,
     {0xdb4ab49622a9d429ull, 0x1ebb12d1d28e36f9ull, 0x9ad2fed78a9f4a32ull, 0x4472e2c1d4a4bb75ull}},
    {DType::Q4_1,
     {0x440613ee1a716d6dull, 0x7f24ef1fd22b4a23ull, 0x2f4bfa082e504e6full, 0xb67b628daaffd740ull}},
    {DType::Q5_0,
     {0x8284769fa2690c7bull, 0x9498f101fa197b4dull, 0x52fe960ca7477dd8ull, 0xfa4a526ee7e1e624ull}},
    {DType::Q5_1,
     {0x438e64c52c8b5353ull, 0x20bc9fc5731cd472ull, 0x14ee5b4d5abd9efbull, 0x0273fdd011dce8d3ull}},
    {DType::Q8_0,
     {0xac60d2fa2454b358ull, 0xfcf59ae01f99e247ull, 0x4b14ba6572984ae2ull, 0xffc30a0e9411fe42ull}},
    {DType::Q2_K,
     {0xfa001b79e2bcf914ull, 0x3c34f40ad3b39137ull, 0xa7494f16edc1f76full, 0xbbf746ecbdbcacd5ull}},
    {DType::Q3_K,
     {0x5a4810dd47b35769ull, 0xcd4d5095b8af9845ull, 0x64d4724340f17beaull, 0x8a5d665545a3de14ull}},
    {DType::Q4_K,
     {0x9afa58b382a16bd3ull, 0x6b9b6b5b9b70b60full, 0xabc346fd3288e5f6ull, 0xb985ed0da042b4f1ull}},
    {DType::Q5_K,
     {0x1b4203b2b2cec8f6ull, 0x21ad9a7f89911987ull, 0xfcd64df761dec471ull, 0xb86d70409a067cd6ull}},
    {DType::Q6_K,
     {0xd04e780e8ccd02c2ull, 0xf4001c5293c4df05ull, 0x6a7084f5f82259a1ull, 0x257a7ec4fb1d29f3ull}},
    {DType::Q8_K,
     {0xf623df1ab5faada6ull, 0x729f626b49132c08ull, 0x2531e64f97575acaull, 0x7ee047c7beb082a4ull}},
};

class GoldenQuant : public ::testing::TestWithParam<DType> {};

TEST_P(GoldenQuant, QuantizeMatchesReferenceBytes) {
  SKIP_WITHOUT_GOLDEN();
  const DType type = GetParam();
  const GoldenTensors g = load(type);
  ASSERT_EQ(g.inputs.size(), 4u);
  for (const auto& [name, input] : g.inputs) {
    SCOPED_TRACE(name);
    ASSERT_EQ(input.dtype, "F32");
    const auto it = g.quantized.find(name);
    ASSERT_NE(it, g.quantized.end()) << "tensor missing from " << dtype_name(type) << ".gguf";
    const test_files::TestTensor& ref = it->second;
    ASSERT_EQ(dtype_from_gguf_id(ref.gguf_type), type);
    ASSERT_EQ(ref.ne, input.ne);

    const int64_t n_per_row = input.ne[0];
    const int64_t nrows = input.ne.size() > 1 ? input.ne[1] : 1;
    const std::vector<float> x = as_floats(input);
    std::vector<uint8_t> ours(row_size(type, n_per_row) * static_cast<size_t>(nrows));
    const std::vector<float> ones(static_cast<size_t>(n_per_row), 1.0f);  // as sd.cpp does
    ASSERT_EQ(quantize_rows(type, x.data(), ours.data(), nrows, n_per_row, ones.data()),
              ours.size());
    ASSERT_EQ(ours.size(), ref.data.size());

    // Report mismatches by block so a failure points at the offending values.
    const size_t block_bytes = type_size(type);
    size_t bad_blocks = 0;
    size_t first_bad = SIZE_MAX;
    for (size_t b = 0; b < ours.size() / block_bytes; ++b) {
      if (std::memcmp(ours.data() + b * block_bytes, ref.data.data() + b * block_bytes,
                      block_bytes) != 0) {
        ++bad_blocks;
        if (first_bad == SIZE_MAX) first_bad = b;
      }
    }
    EXPECT_EQ(bad_blocks, 0u) << "blocks differ from the reference; first is block " << first_bad
                              << " (values from " << first_bad * block_size(type) << ")";
  }
}

TEST(GoldenQuantPlain, QuantizeMatchesReferenceHashes) {
  SKIP_WITHOUT_GOLDEN();
  const auto inputs = test_files::read_safetensors(golden_dir() + "/inputs.safetensors");
  ASSERT_EQ(inputs.size(), 4u);
  for (const PlainHashes& expected : kPlainHashes) {
    const DType type = expected.type;
    int k = 0;
    for (const auto& [name, input] : inputs) {
      SCOPED_TRACE(std::string(dtype_name(type)) + " " + name);
      const int64_t n_per_row = input.ne[0];
      const int64_t nrows = input.ne[1];
      const std::vector<float> x = as_floats(input);
      std::vector<uint8_t> ours(row_size(type, n_per_row) * static_cast<size_t>(nrows));
      quantize_rows(type, x.data(), ours.data(), nrows, n_per_row);
      EXPECT_EQ(fnv1a(ours), expected.hash[k++]);
    }
  }
}

TEST_P(GoldenQuant, DequantizeReferenceBytesWithinBound) {
  SKIP_WITHOUT_GOLDEN();
  const DType type = GetParam();
  const GoldenTensors g = load(type);
  for (const auto& [name, input] : g.inputs) {
    SCOPED_TRACE(name);
    const test_files::TestTensor& ref = g.quantized.at(name);
    const int64_t n_per_row = input.ne[0];
    const int64_t nrows = input.ne.size() > 1 ? input.ne[1] : 1;
    const std::vector<float> x = as_floats(input);
    std::vector<float> y(x.size());
    const size_t in_row = row_size(type, n_per_row);
    for (int64_t r = 0; r < nrows; ++r) {
      dequantize_row(type, ref.data.data() + static_cast<size_t>(r) * in_row,
                     y.data() + r * n_per_row, n_per_row);
    }
    const double err = test::relative_rmse(x, y);
    EXPECT_LT(err, golden_bound(type, name));
    RecordProperty(name + "." + std::string(dtype_name(type)), std::to_string(err));
  }
}

INSTANTIATE_TEST_SUITE_P(Types, GoldenQuant,
                         ::testing::Values(DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1,
                                           DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K,
                                           DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

}  // namespace
}  // namespace sd
