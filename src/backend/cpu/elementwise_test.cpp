// Fast Add/Sub/Mul/Div/Scale/Clamp against the reference kernels: broadcasting patterns
// of Stable Diffusion, odd sizes, strided views and half-precision inputs.
#include <gtest/gtest.h>

#include <random>

#include "simd_test_util.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/view.h"

namespace sd {
namespace {

using Binary = Tensor* (*)(Context&, Tensor*, Tensor*);
constexpr Binary kBinaryOps[] = {add, sub, mul, div};

// Add, Sub, Mul and Div are correctly rounded in both kernels; Scale uses a fused
// multiply-add in the fast kernel, so it may differ in the last bit.
constexpr double kExact = 1e-7;

// Every binary op of x[shape_a] and b[shape_b], the last output from `last`.
test::GraphCase binary_case(Shape shape_a, Shape shape_b, DType ta = DType::F32,
                            DType tb = DType::F32) {
  test::GraphCase c;
  c.build = [=](Context& ctx) {
    std::vector<Tensor*> out;
    for (Binary op : kBinaryOps) {
      Tensor* a = ctx.new_tensor(ta, shape_a, "a");
      Tensor* b = ctx.new_tensor(tb, shape_b, "b");
      out.push_back(op(ctx, a, b));
    }
    return out;
  };
  // Divisors away from zero keep Div's outputs in a range where rtol is meaningful.
  c.fill = [](const Tensor& t, int leaf) {
    return test::random_values(t.nelements(), 100 + leaf, leaf % 2 ? 0.5f : -2.0f, 2.0f);
  };
  return c;
}

TEST(CpuElementwise, SameShapeOddSizes) {
  test::expect_fast_path(binary_case(make_shape({37, 5, 3}), make_shape({37, 5, 3})), 0, kExact);
  test::expect_fast_path(binary_case(make_shape({1}), make_shape({1})), 0, kExact);
  // Long enough to be split into chunks and threads.
  test::expect_fast_path(binary_case(make_shape({40001}), make_shape({40001})), 0, kExact);
}

TEST(CpuElementwise, ChannelBiasOverNchw) {
  // Conv bias: x [W, H, C, N] + b [1, 1, C, 1]
  test::expect_fast_path(binary_case(make_shape({13, 11, 7, 2}), make_shape({1, 1, 7, 1})), 0,
                         kExact);
  test::expect_fast_path(binary_case(make_shape({64, 64, 12, 2}), make_shape({1, 1, 12, 1})), 0,
                         kExact);
}

TEST(CpuElementwise, RowBiasAndScalar) {
  // Linear bias: x [C, W*H, N] + b [C]
  test::expect_fast_path(binary_case(make_shape({19, 33, 2}), make_shape({19})), 0, kExact);
  test::expect_fast_path(binary_case(make_shape({19, 33, 2}), make_shape({19, 1, 2})), 0, kExact);
  test::expect_fast_path(binary_case(make_shape({9, 5, 4, 3}), make_shape({1, 1, 1, 1})), 0,
                         kExact);
  // Column broadcast: b repeats along dim 0 only.
  test::expect_fast_path(binary_case(make_shape({9, 5, 4}), make_shape({1, 5, 4})), 0, kExact);
}

TEST(CpuElementwise, RandomBroadcastPatterns) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 40; ++iter) {
    Shape a{}, b{};
    for (int d = 0; d < kMaxDims; ++d) {
      a[d] = 1 + static_cast<int64_t>(rng() % (d == 0 ? 40 : 5));
      b[d] = rng() % 2 ? a[d] : 1;
    }
    SCOPED_TRACE(::testing::Message()
                 << "a " << a[0] << "x" << a[1] << "x" << a[2] << "x" << a[3] << " b " << b[0]
                 << "x" << b[1] << "x" << b[2] << "x" << b[3]);
    test::expect_fast_path(binary_case(a, b), 0, kExact);
  }
}

TEST(CpuElementwise, HalfPrecisionInputs) {
  test::expect_fast_path(
      binary_case(make_shape({21, 6, 3}), make_shape({21, 6, 3}), DType::F16, DType::BF16), 0,
      kExact);
  test::expect_fast_path(
      binary_case(make_shape({21, 6, 3}), make_shape({1, 1, 3}), DType::F32, DType::F16), 0,
      kExact);
  test::expect_fast_path(
      binary_case(make_shape({21, 6, 3}), make_shape({21}), DType::BF16, DType::F32), 0, kExact);
}

TEST(CpuElementwise, StridedViews) {
  // A slice of dim 0 keeps rows contiguous but strided: the fast path handles it.
  test::GraphCase sliced;
  sliced.build = [](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {23, 7, 5}, "x");
    Tensor* b = ctx.new_tensor(DType::F32, {1, 7, 1}, "b");
    Tensor* xs = slice(ctx, x, 0, 3, 20);
    return std::vector<Tensor*>{mul(ctx, xs, b), add(ctx, xs, slice(ctx, x, 0, 1, 18))};
  };
  test::expect_fast_path(sliced, 0, kExact);

  // Permuting outer dims keeps rows dense.
  test::GraphCase permuted;
  permuted.build = [](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {11, 4, 6, 2}, "x");
    Tensor* b = ctx.new_tensor(DType::F32, {11, 6, 4, 1}, "b");
    return std::vector<Tensor*>{sub(ctx, permute(ctx, x, {0, 2, 1, 3}), b)};
  };
  test::expect_fast_path(permuted, 0, kExact);

  // The halves of rotary pairs (every other value, FLUX.1's apply_rope), in f32 and f16,
  // against a dense table: gathered into runs by the fast path.
  for (DType t : {DType::F32, DType::F16}) {
    SCOPED_TRACE(dtype_name(t));
    test::GraphCase pairs;
    pairs.build = [t](Context& ctx) {
      Tensor* x = reshape(ctx, ctx.new_tensor(t, {2 * 19, 3, 5}, "x"), {2, 19, 3, 5});
      Tensor* cos_t = ctx.new_tensor(DType::F32, {1, 19, 1, 5}, "cos");
      Tensor *even = slice(ctx, x, 0, 0, 1), *odd = slice(ctx, x, 0, 1, 2);
      return std::vector<Tensor*>{mul(ctx, even, cos_t), sub(ctx, odd, even)};
    };
    test::expect_fast_path(pairs, 0, kExact);
    test::GraphCase scaled;
    scaled.build = [t](Context& ctx) {
      Tensor* x = reshape(ctx, ctx.new_tensor(t, {2 * 19, 3, 5}, "x"), {2, 19, 3, 5});
      return std::vector<Tensor*>{scale(ctx, slice(ctx, x, 0, 1, 2), 2.5f, 0.5f)};
    };
    test::expect_fast_path(scaled, 1e-7, 1e-6);
  }

  // A transpose makes rows strided; the fast kernel gathers them, results agree.
  test::GraphCase transposed;
  transposed.build = [](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {9, 13}, "x");
    Tensor* b = ctx.new_tensor(DType::F32, {13, 9}, "b");
    return std::vector<Tensor*>{add(ctx, transpose(ctx, x), b), add(ctx, b, transpose(ctx, x))};
  };
  test::expect_fast_matches_reference(transposed, 0, kExact);
}

TEST(CpuElementwise, ScaleAndClamp) {
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    test::GraphCase c;
    c.build = [t](Context& ctx) {
      Tensor* x = ctx.new_tensor(t, {37, 9, 5}, "x");
      Tensor* xs = slice(ctx, x, 1, 2, 8);
      return std::vector<Tensor*>{clamp(ctx, xs, -0.25f, 0.5f), clamp(ctx, x, -0.3f, 0.3f),
                                  scale(ctx, xs, 0.18215f, 0.5f), scale(ctx, x, -3.0f)};
    };
    test::expect_fast_path(c, 1e-7, 1e-6);
  }
}

}  // namespace
}  // namespace sd
