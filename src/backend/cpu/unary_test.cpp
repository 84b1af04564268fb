// Fast unary functions against the reference (libm) kernels, with each function's error
// bound: exact for the piecewise-linear ones and sqrt, a few ulp for exp/tanh/sin/cos
// (Highway contrib/math), ~1e-6 absolute where 1 + tanh or 1 + erf cancels.
#include <gtest/gtest.h>

#include <cmath>

#include "simd_test_util.h"
#include "tensor/ops/unary.h"
#include "tensor/ops/view.h"

namespace sd {
namespace {

struct Bound {
  UnaryOp op;
  float lo, hi;  // input range
  double atol, rtol;
};

constexpr Bound kBounds[] = {
    {UnaryOp::Gelu, -10, 10, 1e-6, 1e-5},
    {UnaryOp::GeluErf, -10, 10, 1e-6, 1e-5},
    {UnaryOp::GeluQuick, -10, 10, 1e-7, 2e-6},
    {UnaryOp::Silu, -100, 100, 1e-7, 2e-6},
    {UnaryOp::Relu, -2, 2, 0, 1e-7},
    {UnaryOp::LeakyRelu, -2, 2, 0, 1e-7},
    {UnaryOp::Tanh, -12, 12, 1e-7, 2e-6},
    {UnaryOp::Sigmoid, -100, 100, 1e-30, 2e-6},
    {UnaryOp::Exp, -100, 100, 1e-30, 1e-6},
    {UnaryOp::Sin, -50, 50, 1e-6, 1e-5},
    {UnaryOp::Cos, -50, 50, 1e-6, 1e-5},
    {UnaryOp::Sqrt, 0, 1000, 0, 1e-7},
    {UnaryOp::Neg, -2, 2, 0, 1e-7},
};

test::GraphCase unary_case(const Bound& b, DType type, Shape shape) {
  test::GraphCase c;
  c.build = [=](Context& ctx) {
    Tensor* x = ctx.new_tensor(type, shape, "x");
    return std::vector<Tensor*>{unary(ctx, x, b.op, 0.05f)};
  };
  c.fill = [b](const Tensor& t, int) { return test::random_values(t.nelements(), 3, b.lo, b.hi); };
  return c;
}

TEST(CpuUnary, EveryFunctionWithinItsBound) {
  for (const Bound& b : kBounds) {
    SCOPED_TRACE(unary_name(b.op));
    test::expect_fast_path(unary_case(b, DType::F32, make_shape({1001, 3})), b.atol, b.rtol);
    test::expect_fast_path(unary_case(b, DType::F32, make_shape({3})), b.atol, b.rtol);
  }
}

TEST(CpuUnary, HalfPrecisionInputs) {
  for (const Bound& b : kBounds) {
    SCOPED_TRACE(unary_name(b.op));
    test::expect_fast_path(unary_case(b, DType::F16, make_shape({77, 5})), b.atol, b.rtol);
    test::expect_fast_path(unary_case(b, DType::BF16, make_shape({77, 5})), b.atol, b.rtol);
  }
}

TEST(CpuUnary, LargeTensorSpreadsOverThreads) {
  // SiLU on a slice of an SD1.5 mid-size activation; 64 * 48 * 20 values.
  test::expect_fast_path(unary_case(kBounds[3], DType::F32, make_shape({64, 48, 20, 1})), 1e-7,
                         2e-6);
}

TEST(CpuUnary, GeluErfOnADenseGrid) {
  // Every input step of 1/1024 over [-8, 8] against double-precision erf: checks the
  // erf approximation itself (A&S 7.1.26, |error| <= 1.5e-7) rather than agreement.
  test::GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {16385}, "x");
    return std::vector<Tensor*>{unary(ctx, x, UnaryOp::GeluErf)};
  };
  std::vector<float> x(16385);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -8.0f + static_cast<float>(i) / 1024.0f;
  c.fill = [&](const Tensor&, int) { return x; };
  auto out = test::run_case(c, CpuKernels::Fast)[0];
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double xd = x[i];
    const double exact = 0.5 * xd * (1.0 + std::erf(xd / std::sqrt(2.0)));
    worst = std::max(worst, std::fabs(out[i] - exact) / (1.0 + std::fabs(xd)));
  }
  EXPECT_LT(worst, 3e-7);
}

TEST(CpuUnary, SinCosBeyondHighwaysRange) {
  test::GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {19}, "x");
    return std::vector<Tensor*>{unary(ctx, x, UnaryOp::Sin), unary(ctx, x, UnaryOp::Cos)};
  };
  c.fill = [](const Tensor& t, int) {
    auto v = test::random_values(t.nelements(), 5, -1e6f, 1e6f);
    v[3] = 0.5f;
    return v;
  };
  test::expect_fast_path(c, 1e-6, 1e-5);
}

TEST(CpuUnary, SpecialValues) {
  test::GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {9}, "x");
    std::vector<Tensor*> out;
    for (const Bound& b : kBounds) {
      if (b.op != UnaryOp::Sqrt) out.push_back(unary(ctx, x, b.op, 0.1f));
    }
    return out;
  };
  c.fill = [](const Tensor&, int) {
    return std::vector<float>{0.0f, -0.0f, INFINITY, -INFINITY, NAN, 88.0f, 89.0f, -89.0f, 1e-30f};
  };
  test::expect_fast_matches_reference(c, 1e-6, 1e-5);
}

TEST(CpuUnary, StridedViewInput) {
  test::GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {31, 8, 3}, "x");
    return std::vector<Tensor*>{unary(ctx, transpose(ctx, x), UnaryOp::Silu),
                                unary(ctx, slice(ctx, x, 0, 2, 29), UnaryOp::Silu)};
  };
  test::expect_fast_path(c, 1e-7, 2e-6);
}

}  // namespace
}  // namespace sd
