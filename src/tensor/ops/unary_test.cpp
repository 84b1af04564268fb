#include "tensor/ops/unary.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tensor/error.h"
#include "test_support.h"

namespace sd {
namespace {

TEST(Unary, KnownValues) {
  EXPECT_FLOAT_EQ(unary_reference_value(UnaryOp::Silu, 0.0f, 0), 0.0f);
  EXPECT_NEAR(unary_reference_value(UnaryOp::Silu, 1.0f, 0), 0.7310586f, 1e-6);
  EXPECT_NEAR(unary_reference_value(UnaryOp::Gelu, 1.0f, 0), 0.8411920f, 1e-6);
  EXPECT_NEAR(unary_reference_value(UnaryOp::GeluErf, 1.0f, 0), 0.8413447f, 1e-6);
  EXPECT_NEAR(unary_reference_value(UnaryOp::GeluQuick, 1.0f, 0), 0.8457957f, 1e-6);
  EXPECT_FLOAT_EQ(unary_reference_value(UnaryOp::LeakyRelu, -2.0f, 0.1f), -0.2f);
  EXPECT_FLOAT_EQ(unary_reference_value(UnaryOp::Relu, -2.0f, 0), 0.0f);
  EXPECT_NEAR(unary_reference_value(UnaryOp::Sigmoid, 0.0f, 0), 0.5f, 1e-7);
  EXPECT_FLOAT_EQ(unary_reference_value(UnaryOp::Neg, 3.0f, 0), -3.0f);
  EXPECT_FLOAT_EQ(unary_reference_value(UnaryOp::Sqrt, 9.0f, 0), 3.0f);
}

TEST(Unary, GraphAppliesTheFunctionElementwise) {
  test::GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {7, 3}, "x");
    return std::vector<Tensor*>{unary(ctx, x, UnaryOp::Tanh), unary(ctx, x, UnaryOp::Exp)};
  };
  auto out = test::run_case(c, CpuKernels::Reference);
  auto x = test::random_values(21, c.seed);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_FLOAT_EQ(out[0][i], std::tanh(x[i]));
    EXPECT_FLOAT_EQ(out[1][i], std::exp(x[i]));
  }
}

TEST(Unary, RejectsIntegerInputAndUnknownFunctions) {
  Context ctx;
  Tensor* ids = ctx.new_tensor(DType::I32, {4}, "ids");
  Tensor* x = ctx.new_tensor(DType::F32, {4}, "x");
  EXPECT_THROW(silu(ctx, ids), Error);
  EXPECT_THROW(unary(ctx, x, static_cast<UnaryOp>(999)), Error);
}

}  // namespace
}  // namespace sd
