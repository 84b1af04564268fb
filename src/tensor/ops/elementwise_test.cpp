#include "tensor/ops/elementwise.h"

#include <gtest/gtest.h>

#include "tensor/error.h"
#include "tensor/ops/view.h"
#include "test_support.h"

namespace sd {
namespace {

std::vector<float> iota_fill(const Tensor& t, int leaf) {
  std::vector<float> v(static_cast<size_t>(t.nelements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i + 1) * (leaf + 1);
  return v;
}

TEST(Elementwise, BroadcastsAChannelBiasOverNchw) {
  test::GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {2, 2, 3, 1}, "x");
    Tensor* b = ctx.new_tensor(DType::F32, {1, 1, 3, 1}, "b");
    return std::vector<Tensor*>{add(ctx, x, b), sub(ctx, x, b), mul(ctx, x, b), div(ctx, x, b)};
  };
  c.fill = iota_fill;  // x = 1..12, b = 2, 4, 6
  auto out = test::run_case(c, CpuKernels::Reference);
  for (int i = 0; i < 12; ++i) {
    const float x = static_cast<float>(i + 1), b = 2.0f * (i / 4 + 1);
    EXPECT_FLOAT_EQ(out[0][i], x + b);
    EXPECT_FLOAT_EQ(out[1][i], x - b);
    EXPECT_FLOAT_EQ(out[2][i], x * b);
    EXPECT_FLOAT_EQ(out[3][i], x / b);
  }
}

TEST(Elementwise, ScaleAndClamp) {
  test::GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {5}, "x");
    return std::vector<Tensor*>{scale(ctx, x, 0.5f, -1.0f), clamp(ctx, x, 2.0f, 4.0f)};
  };
  c.fill = iota_fill;
  auto out = test::run_case(c, CpuKernels::Reference);
  EXPECT_EQ(out[0], (std::vector<float>{-0.5f, 0.0f, 0.5f, 1.0f, 1.5f}));
  EXPECT_EQ(out[1], (std::vector<float>{2, 2, 3, 4, 4}));
}

TEST(Elementwise, ReadsNonContiguousAndHalfInputs) {
  test::GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {3, 2}, "x");
    Tensor* h = ctx.new_tensor(DType::F16, {2, 3}, "h");
    return std::vector<Tensor*>{add(ctx, x, transpose(ctx, h))};
  };
  c.fill = iota_fill;  // x = 1..6, h = 2..12 step 2 (exact in f16)
  auto out = test::run_case(c, CpuKernels::Reference)[0];
  // out[i0, i1] = x[i0 + 3 i1] + h[i1 + 2 i0]
  for (int i1 = 0; i1 < 2; ++i1)
    for (int i0 = 0; i0 < 3; ++i0)
      EXPECT_FLOAT_EQ(out[i0 + 3 * i1], (i0 + 3 * i1 + 1) + 2.0f * (i1 + 2 * i0 + 1));
}

TEST(Elementwise, BadShapesAndTypesAreErrors) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {4, 3}, "x");
  Tensor* y = ctx.new_tensor(DType::F32, {3, 4}, "y");
  Tensor* ids = ctx.new_tensor(DType::I32, {4, 3}, "ids");
  Tensor* q = ctx.new_tensor(DType::Q8_0, {32, 3}, "q");
  EXPECT_THROW(add(ctx, x, y), Error);
  EXPECT_THROW(add(ctx, x, ids), Error);
  EXPECT_THROW(mul(ctx, q, q), Error);
  EXPECT_THROW(clamp(ctx, x, 1.0f, 0.0f), Error);
  try {
    add(ctx, x, y);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[add]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'y'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sd
