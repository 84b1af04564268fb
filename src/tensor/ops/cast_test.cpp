#include "tensor/ops/cast.h"

#include <gtest/gtest.h>

#include "tensor/error.h"
#include "test_support.h"

namespace sd {
namespace {

TEST(Cast, FloatRoundTripsThroughHalfTypes) {
  test::GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {64, 3}, "x");
    return std::vector<Tensor*>{cast(ctx, cast(ctx, x, DType::F16), DType::F32),
                                cast(ctx, cast(ctx, x, DType::BF16), DType::F32), x};
  };
  auto out = test::run_case(c, CpuKernels::Reference);
  // Relative rounding error: 2^-11 for f16, 2^-8 for bf16.
  EXPECT_LE(test::max_scaled_error(out[0], out[2], 1e-7, 1.0 / 2048), 1.0);
  EXPECT_LE(test::max_scaled_error(out[1], out[2], 1e-7, 1.0 / 256), 1.0);
}

TEST(Cast, QuantizesAndDequantizesBlocks) {
  test::GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {64, 4}, "x");
    return std::vector<Tensor*>{cast(ctx, cast(ctx, x, DType::Q8_0), DType::F32), x};
  };
  auto out = test::run_case(c, CpuKernels::Reference);
  // q8_0 keeps each value within half a step of amax / 127 of its block (amax < 1 here),
  // plus the f16 rounding of the stored scale: 127 * 2^-11 steps at worst.
  EXPECT_LE(test::max_scaled_error(out[0], out[1], (0.5 + 127.0 / 2048) / 127, 0), 1.0);
}

TEST(Cast, InvalidConversionsAreErrors) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {48}, "x");
  Tensor* q = ctx.new_tensor(DType::Q4_0, {64}, "q");
  Tensor* ids = ctx.new_tensor(DType::I32, {64}, "ids");
  EXPECT_THROW(cast(ctx, x, DType::Q8_0), Error);  // 48 is not a multiple of 32
  EXPECT_THROW(cast(ctx, q, DType::F16), Error);
  EXPECT_THROW(cast(ctx, ids, DType::F32), Error);
}

}  // namespace
}  // namespace sd
