#include "tensor/ops/matmul.h"

#include <gtest/gtest.h>

#include <map>

#include "tensor/error.h"
#include "tensor/ops/view.h"
#include "test_support.h"

namespace sd {
namespace {

using Values = test::NamedValues;

TEST(MatMul, LinearLayerByHand) {
  // a holds three rows of K = 2 (one per output), b two columns of K = 2.
  Shape shape{};  // read inside build: the graph's context is gone after the run
  auto y = test::run_reference_single(
      [&](Context& ctx) {
        Tensor* a = ctx.new_tensor(DType::F32, {2, 3}, "a");
        Tensor* b = ctx.new_tensor(DType::F32, {2, 2}, "b");
        Tensor* out = matmul(ctx, a, b);
        shape = out->ne;
        return out;
      },
      {{"a", {1, 2, 3, 4, 5, 6}}, {"b", {1, 1, 1, -1}}});
  EXPECT_EQ(shape, (std::array<int64_t, 4>{3, 2, 1, 1}));
  // out[m, n] = a_m . b_n, m fastest.
  EXPECT_EQ(y, (std::vector<float>{3, 7, 11, -1, -1, -1}));
}

TEST(MatMul, WeightBroadcastsOverBatchDims) {
  // a has 2 batch slices, b has 4: b's slices 0, 1 use a's slice 0 and 2, 3 use slice 1.
  auto y = test::run_reference_single(
      [](Context& ctx) {
        Tensor* a = ctx.new_tensor(DType::F32, {1, 1, 2}, "a");
        Tensor* b = ctx.new_tensor(DType::F32, {1, 1, 4}, "b");
        return matmul(ctx, a, b);
      },
      {{"a", {2, 10}}, {"b", {1, 2, 3, 4}}});
  EXPECT_EQ(y, (std::vector<float>{2, 4, 30, 40}));
}

TEST(MatMul, TransposedViewOfActivations) {
  // b given as the transpose of a [N, K] tensor: same result as the contiguous [K, N] one.
  auto y = test::run_reference_single(
      [](Context& ctx) {
        Tensor* a = ctx.new_tensor(DType::F32, {2, 1}, "a");
        Tensor* bt = ctx.new_tensor(DType::F32, {3, 2}, "bt");  // [N = 3, K = 2]
        return matmul(ctx, a, transpose(ctx, bt));
      },
      {{"a", {1, 10}}, {"bt", {1, 2, 3, 4, 5, 6}}});
  // b[k, n] = bt[n, k]: columns (1, 4), (2, 5), (3, 6).
  EXPECT_EQ(y, (std::vector<float>{41, 52, 63}));
}

TEST(MatMul, BlockQuantizedWeights) {
  // Integers in [-127, 127] with a block max of 127 are exact in q8_0 (scale 1).
  std::vector<float> a(64), b(32, 1.0f);
  for (int i = 0; i < 64; ++i) a[i] = static_cast<float>((i * 37) % 255 - 127);
  a[0] = a[32] = 127;
  auto y = test::run_reference_single(
      [](Context& ctx) {
        return matmul(ctx, ctx.new_tensor(DType::Q8_0, {32, 2}, "a"),
                      ctx.new_tensor(DType::F32, {32, 1}, "b"));
      },
      {{"a", a}, {"b", b}});
  float s0 = 0, s1 = 0;
  for (int i = 0; i < 32; ++i) s0 += a[i], s1 += a[32 + i];
  EXPECT_EQ(y, (std::vector<float>{s0, s1}));
}

TEST(MatMul, BadShapesAreErrors) {
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F32, {8, 4, 2}, "a");
  Tensor* b = ctx.new_tensor(DType::F32, {8, 3, 3}, "b");
  try {
    matmul(ctx, a, ctx.new_tensor(DType::F32, {7, 3}, "b7"));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ne[0]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("b7"), std::string::npos) << e.what();
  }
  EXPECT_THROW(matmul(ctx, a, b), Error);  // 3 batch slices are not a multiple of 2
  EXPECT_THROW(matmul(ctx, b, ctx.new_tensor(DType::F16, {8, 3}, "h")), Error);  // b not f32
  EXPECT_THROW(matmul(ctx, ctx.new_tensor(DType::I32, {8, 3}, "i"), b), Error);
  EXPECT_NO_THROW(matmul(ctx, a, ctx.new_tensor(DType::F32, {8, 5, 4}, "b4")));
}

}  // namespace
}  // namespace sd
