// The Highway kernels run on whichever SIMD target the CPU offers (SSSE3 to AVX-512, or
// the scalar fallback), and the per-op tests only exercise the best one of this machine.
// This runs one case of every vectorized op on each target compiled in and supported here,
// so a target-specific bug (an emulated conversion, a different tail) shows up anywhere.
#include <gtest/gtest.h>

#include <hwy/targets.h>

#include "simd_test_util.h"
#include "tensor/ops/cast.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/norm.h"
#include "tensor/ops/softmax.h"
#include "tensor/ops/unary.h"

namespace sd {
namespace {

// Restores normal target selection when a test ends, even on failure.
struct TargetMock {
  explicit TargetMock(int64_t target) { hwy::SetSupportedTargetsForTest(target); }
  ~TargetMock() { hwy::SetSupportedTargetsForTest(0); }
};

TEST(CpuSimdTargets, EveryTargetMatchesTheReference) {
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  ASSERT_FALSE(targets.empty());
  for (int64_t target : targets) {
    SCOPED_TRACE(hwy::TargetName(target));
    TargetMock mock(target);
    // The mock also resets Highway's dispatch tables, so each call below re-dispatches.
    ASSERT_EQ(hwy::SupportedTargets() & HWY_TARGETS, target);

    test::GraphCase binary;
    binary.build = [](Context& ctx) {
      Tensor* x = ctx.new_tensor(DType::F32, {19, 5, 3}, "x");
      Tensor* b = ctx.new_tensor(DType::F16, {1, 1, 3}, "b");
      return std::vector<Tensor*>{div(ctx, x, b), scale(ctx, x, 0.3f, 1.0f), add(ctx, x, b)};
    };
    test::expect_fast_path(binary, 1e-7, 1e-6);

    for (int op = 0; op < static_cast<int>(UnaryOp::Count); ++op) {
      SCOPED_TRACE(unary_name(static_cast<UnaryOp>(op)));
      test::GraphCase c;
      c.build = [op](Context& ctx) {
        Tensor* x = ctx.new_tensor(DType::F32, {37, 3}, "x");
        return std::vector<Tensor*>{unary(ctx, x, static_cast<UnaryOp>(op), 0.1f)};
      };
      // Positive inputs keep Sqrt defined; the rest sees both signs through the odd range.
      c.fill = [op](const Tensor& t, int) {
        const bool sqrt = op == static_cast<int>(UnaryOp::Sqrt);
        return test::random_values(t.nelements(), 61, sqrt ? 0.0f : -9.0f, 9.0f);
      };
      test::expect_fast_path(c, 1e-6, 1e-5);
    }

    test::GraphCase bf16;
    bf16.build = [](Context& ctx) {
      Tensor* x = ctx.new_tensor(DType::F32, {45, 3}, "x");
      return std::vector<Tensor*>{cast(ctx, x, DType::F16), cast(ctx, x, DType::BF16)};
    };
    test::expect_fast_path(bf16, 1e-30, 0);

    test::GraphCase norms;
    norms.build = [](Context& ctx) {
      Tensor* x = ctx.new_tensor(DType::F32, {21, 5, 6, 2}, "x");
      Tensor* w = ctx.new_tensor(DType::F32, {6}, "w");
      return std::vector<Tensor*>{softmax(ctx, x, nullptr, 0.7f), layer_norm(ctx, x, 1e-5f),
                                  rms_norm(ctx, x, 1e-6f), group_norm(ctx, x, 3, 1e-5f, w, w)};
    };
    test::expect_fast_path(norms, 2e-6, 1e-5);
  }
}

}  // namespace
}  // namespace sd
