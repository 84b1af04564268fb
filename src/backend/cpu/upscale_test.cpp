// Fast Upscale against the reference: nearest copies exactly; bilinear blends in f32 where
// the reference blends in double (a few f32 ulps of inputs in [-1, 1]).
#include <gtest/gtest.h>

#include "simd_test_util.h"
#include "tensor/ops/upscale.h"
#include "tensor/ops/view.h"

namespace sd {
namespace {

TEST(CpuUpscale, ModesSizesAndTypes) {
  const std::pair<int64_t, int64_t> sizes[] = {{26, 14}, {7, 5}, {13, 7}, {1, 1}, {40, 3}};
  for (auto mode :
       {UpscaleMode::Nearest, UpscaleMode::Bilinear, UpscaleMode::BilinearAlignCorners}) {
    for (DType t : {DType::F32, DType::F16}) {
      for (const auto& size : sizes) {
        const int64_t w = size.first, h = size.second;  // captured below (Clang 14: no bindings)
        SCOPED_TRACE(::testing::Message() << "mode " << static_cast<int>(mode) << " "
                                          << dtype_name(t) << " " << w << "x" << h);
        test::GraphCase c;
        c.build = [=](Context& ctx) {
          Tensor* x = ctx.new_tensor(t, {13, 7, 3, 2}, "x");
          return std::vector<Tensor*>{upscale(ctx, x, w, h, mode)};
        };
        test::expect_fast_path(c, mode == UpscaleMode::Nearest ? 1e-30 : 1e-6, 0);
      }
    }
  }
}

TEST(CpuUpscale, SdUpsampleBlockAndStridedInput) {
  for (auto mode : {UpscaleMode::Nearest, UpscaleMode::Bilinear}) {
    test::GraphCase c;
    c.build = [=](Context& ctx) {
      Tensor* x = ctx.new_tensor(DType::F32, {32, 32, 24, 2}, "x");
      return std::vector<Tensor*>{upscale(ctx, permute(ctx, x, {0, 1, 3, 2}), 64, 64, mode),
                                  upscale(ctx, x, 64, 64, mode)};
    };
    test::expect_fast_path(c, mode == UpscaleMode::Nearest ? 1e-30 : 1e-6, 0);
  }
}

}  // namespace
}  // namespace sd
