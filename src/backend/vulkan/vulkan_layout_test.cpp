// Layout ops and generators on a Vulkan device against the reference kernels: concat along
// every dim, pad, get_rows, every upscale mode, arange and timestep embeddings, with odd
// sizes (16-bit elements at half-word addresses), half-precision inputs and strided views.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <utility>
#include <vector>

#include "backend/vulkan/vulkan_ops.h"
#include "backend/vulkan/vulkan_test_util.h"
#include "tensor/ops/concat.h"
#include "tensor/ops/generate.h"
#include "tensor/ops/get_rows.h"
#include "tensor/ops/pad.h"
#include "tensor/ops/upscale.h"
#include "tensor/ops/view.h"

namespace sd::vulkan {
namespace {

using sd::test::GraphCase;

constexpr DType kFloatTypes[] = {DType::F32, DType::F16, DType::BF16};

// Random values in [lo, hi) for every leaf; i32 leaves get them truncated.
GraphCase graph_case(std::function<std::vector<Tensor*>(Context&)> build, float lo = -2,
                     float hi = 2) {
  GraphCase c;
  c.build = std::move(build);
  c.fill = [=](const Tensor& t, int leaf) {
    return sd::test::random_values(t.nelements(), 300 + leaf, lo, hi);
  };
  return c;
}

TEST(VulkanLayout, ConcatAlongEveryDimIsExactInEveryDtype) {
  SD_REQUIRE_VULKAN(device);
  for (DType type : {DType::F32, DType::F16, DType::BF16, DType::I32}) {
    SCOPED_TRACE(dtype_name(type));
    auto c = graph_case(
        [=](Context& ctx) {
          std::vector<Tensor*> out;
          for (int dim = 0; dim < kMaxDims; ++dim) {
            Shape a_shape = make_shape({13, 5, 3, 2}), b_shape = a_shape;
            b_shape[dim] = dim == 0 ? 7 : 3;  // odd widths split 16-bit words between a and b
            Tensor* a = ctx.new_tensor(type, a_shape, "a");
            Tensor* b = ctx.new_tensor(type, b_shape, "b");
            out.push_back(concat(ctx, a, b, dim));
          }
          return out;
        },
        -1000, 1000);
    test::expect_matches_reference(*device, c, 0, 0);
  }
}

TEST(VulkanLayout, ConcatReadsViewsInPlace) {
  SD_REQUIRE_VULKAN(device);
  auto c = graph_case([](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F16, {9, 6, 4}, "x");
    Tensor* h = ctx.new_tensor(DType::F32, {6, 5, 4, 2}, "h");
    Tensor* skip = ctx.new_tensor(DType::F32, {5, 6, 3, 2}, "skip");
    return std::vector<Tensor*>{
        concat(ctx, permute(ctx, x, {0, 2, 1, 3}), slice(ctx, x, 1, 0, 4), 2),
        concat(ctx, slice(ctx, x, 0, 1, 6), x, 0),
        // A UNet skip connection (channels of [W, H, C, N]), here from a transposed view.
        concat(ctx, h, permute(ctx, skip, {1, 0, 2, 3}), 2)};
  });
  test::expect_matches_reference(*device, c, 0, 0);
}

TEST(VulkanLayout, PadEveryDimOnBothSides) {
  SD_REQUIRE_VULKAN(device);
  for (DType type : kFloatTypes) {
    SCOPED_TRACE(dtype_name(type));
    auto c = graph_case([=](Context& ctx) {
      Tensor* x = ctx.new_tensor(type, {7, 5, 3, 2}, "x");
      return std::vector<Tensor*>{
          pad(ctx, x, {1, 2, 0, 3, 2, 0, 1, 1}, -0.5f), pad(ctx, x, {0, 1, 0, 1, 0, 0, 0, 0}),
          pad(ctx, x, {0, 0, 0, 0, 0, 0, 0, 0}, 9.0f),  // a plain copy to f32
          // A strided source: x with dims 1 and 2 swapped.
          pad(ctx, permute(ctx, x, {0, 2, 1, 3}), {3, 0, 1, 1, 0, 2, 0, 0}, 1.5f)};
    });
    test::expect_matches_reference(*device, c, 0, 0);
  }
}

GraphCase get_rows_case(DType type, int64_t width, int64_t rows, int64_t n, int64_t batch) {
  GraphCase c;
  c.build = [=](Context& ctx) {
    Tensor* table = ctx.new_tensor(type, {width, rows}, "table");
    Tensor* ids = ctx.new_tensor(DType::I32, {n, batch}, "ids");
    return std::vector<Tensor*>{get_rows(ctx, table, ids)};
  };
  c.fill = [=](const Tensor& t, int) {
    if (t.type != DType::I32) return sd::test::random_values(t.nelements(), 41, -2, 2);
    auto ids = sd::test::random_values(t.nelements(), 43, 0, static_cast<float>(rows) - 0.01f);
    ids.front() = 0;  // the table's first and last rows
    ids.back() = static_cast<float>(rows - 1);
    return ids;
  };
  return c;
}

TEST(VulkanLayout, GetRowsFromFloatTables) {
  SD_REQUIRE_VULKAN(device);
  for (DType type : kFloatTypes) {
    SCOPED_TRACE(dtype_name(type));
    test::expect_matches_reference(*device, get_rows_case(type, 33, 20, 9, 1), 0, 0);
    test::expect_matches_reference(*device, get_rows_case(type, 7, 50, 11, 3), 0, 0);
  }
}

TEST(VulkanLayout, GetRowsReadsViewsOfTableAndIds) {
  SD_REQUIRE_VULKAN(device);
  GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* table = ctx.new_tensor(DType::F16, {12, 9}, "table");
    Tensor* ids = ctx.new_tensor(DType::I32, {4, 6}, "ids");
    // A transposed table (9 wide, 12 rows) and every other column of the ids.
    Tensor* table_t = permute(ctx, table, {1, 0, 2, 3});
    return std::vector<Tensor*>{get_rows(ctx, table_t, permute(ctx, ids, {1, 0, 2, 3})),
                                get_rows(ctx, table, slice(ctx, ids, 0, 1, 3))};
  };
  c.fill = [](const Tensor& t, int) {
    if (t.type != DType::I32) return sd::test::random_values(t.nelements(), 7, -2, 2);
    return sd::test::random_values(t.nelements(), 8, 0, 8.99f);  // valid in both tables
  };
  test::expect_matches_reference(*device, c, 0, 0);
}

TEST(VulkanLayout, GetRowsWithAnIdOutsideTheTableGivesNaNNotOtherMemory) {
  SD_REQUIRE_VULKAN(device);
  for (int bad : {-1, 20}) {
    GraphCase c = get_rows_case(DType::F32, 5, 20, 4, 1);
    c.fill = [=](const Tensor& t, int) {
      if (t.type != DType::I32) return sd::test::random_values(t.nelements(), 3, -2, 2);
      return std::vector<float>{3, static_cast<float>(bad), 19, 0};
    };
    const std::vector<float> out = sd::test::run_case_on(c, *device)[0];
    ASSERT_EQ(out.size(), 20u);
    for (int i = 0; i < 20; ++i) EXPECT_EQ(std::isnan(out[i]), i / 5 == 1) << "element " << i;
  }
}

TEST(VulkanLayout, UpscaleEveryModeSizeAndDtype) {
  SD_REQUIRE_VULKAN(device);
  // Up, down, mixed, to one pixel, and to non-integer ratios.
  const std::pair<int64_t, int64_t> sizes[] = {{26, 14}, {7, 5}, {13, 7}, {1, 1}, {40, 3}};
  for (auto mode :
       {UpscaleMode::Nearest, UpscaleMode::Bilinear, UpscaleMode::BilinearAlignCorners}) {
    for (DType type : kFloatTypes) {
      SCOPED_TRACE(::testing::Message()
                   << "mode " << static_cast<int>(mode) << " " << dtype_name(type));
      auto c = graph_case([=](Context& ctx) {
        Tensor* x = ctx.new_tensor(type, {13, 7, 3, 2}, "x");
        std::vector<Tensor*> out;
        for (auto [w, h] : sizes) out.push_back(upscale(ctx, x, w, h, mode));
        return out;
      });
      // Nearest copies; bilinear blends in f32 where the reference blends in double.
      const double tol = mode == UpscaleMode::Nearest ? 0 : 1e-6;
      test::expect_matches_reference(*device, c, tol, tol);
    }
  }
}

TEST(VulkanLayout, UpscaleReadsStridedInput) {
  SD_REQUIRE_VULKAN(device);
  for (auto mode :
       {UpscaleMode::Nearest, UpscaleMode::Bilinear, UpscaleMode::BilinearAlignCorners}) {
    SCOPED_TRACE(static_cast<int>(mode));
    auto c = graph_case([=](Context& ctx) {
      Tensor* x = ctx.new_tensor(DType::F32, {8, 6, 2, 3}, "x");
      return std::vector<Tensor*>{upscale(ctx, permute(ctx, x, {0, 1, 3, 2}), 16, 12, mode),
                                  upscale(ctx, permute(ctx, x, {1, 0, 2, 3}), 11, 17, mode),
                                  upscale_nearest(ctx, slice(ctx, x, 0, 1, 6), 2)};
    });
    const double tol = mode == UpscaleMode::Nearest ? 0 : 1e-6;
    test::expect_matches_reference(*device, c, tol, tol);
  }
}

TEST(VulkanLayout, ArangeUpDownAndFractional) {
  SD_REQUIRE_VULKAN(device);
  GraphCase c;
  c.build = [](Context& ctx) {
    return std::vector<Tensor*>{arange(ctx, 0, 5, 1),          arange(ctx, 5, 0, -2),
                                arange(ctx, 0, 1, 0.3f),       arange(ctx, -1, 1, 0.1f),
                                arange(ctx, 3.25f, 3.5f, 1),  // one element
                                arange(ctx, -7.5f, 1e4f, 1.7f)};
  };
  // The reference sums in double and rounds once; so does the shader, with exact products
  // and sums (a plain f32 start + i * step is an ulp off here and there).
  test::expect_matches_reference(*device, c, 0, 0);
}

TEST(VulkanLayout, TimestepEmbeddingEvenOddAndMaxPeriod) {
  SD_REQUIRE_VULKAN(device);
  for (DType type : kFloatTypes) {
    SCOPED_TRACE(dtype_name(type));
    auto c = graph_case(
        [=](Context& ctx) {
          Tensor* t = ctx.new_tensor(type, {5}, "t");
          return std::vector<Tensor*>{
              timestep_embedding(ctx, t, 8), timestep_embedding(ctx, t, 7, 100),
              timestep_embedding(ctx, t, 1), timestep_embedding(ctx, t, 320)};
        },
        0, 1);
    // cos and sin of the device against the host's, rounded to f32.
    test::expect_matches_reference(*device, c, 2e-7, 0);
  }
}

TEST(VulkanLayout, TimestepEmbeddingOfDiffusionTimesteps) {
  SD_REQUIRE_VULKAN(device);
  GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* t = ctx.new_tensor(DType::F32, {6}, "t");
    // Every other timestep: a strided source.
    Tensor* every_other = view(ctx, t, make_shape({3}), {8, 24, 24, 24}, 0);
    return std::vector<Tensor*>{timestep_embedding(ctx, t, 320),
                                timestep_embedding(ctx, every_other, 33)};
  };
  c.fill = [](const Tensor&, int) { return std::vector<float>{0, 1, 17.5f, 250, 801, 999}; };
  // The shader rounds each frequency as the host's expf does, but for arguments within about
  // 0.01 ulp of a tie (1 in 500; here one of the 160): there, one ulp of the frequency moves
  // t * freq by up to 6e-5 at t ~ 1000. Here it makes 4e-6.
  test::expect_matches_reference(*device, c, 1e-5, 0);
}

TEST(VulkanLayout, SupportsDeclinesWhatTheShadersDoNotHandle) {
  Context ctx;
  constexpr size_t kBinding = size_t{1} << 30;
  // Block-quantized tables run (vulkan_quant_test.cpp), but not q8_K, which no shader
  // decodes.
  Tensor* q_table = ctx.new_tensor(DType::Q8_K, {256, 10}, "q_table");
  Tensor* f_table = ctx.new_tensor(DType::F16, {64, 10}, "f_table");
  Tensor* ids = ctx.new_tensor(DType::I32, {4}, "ids");
  EXPECT_FALSE(op_supported(*get_rows(ctx, q_table, ids), kBinding));
  EXPECT_FALSE(layout_op(Op::GetRows)->supports(*get_rows(ctx, q_table, ids)));
  EXPECT_TRUE(op_supported(*get_rows(ctx, f_table, ids), kBinding));

  Tensor* image = ctx.new_tensor(DType::F32, {8, 8, 3}, "image");
  Tensor* bad_mode = upscale(ctx, image, 16, 16, UpscaleMode::Nearest);
  bad_mode->params[0] = 7;
  EXPECT_FALSE(op_supported(*bad_mode, kBinding));
  // Source coordinates past 32 bits.
  Tensor* wide = ctx.new_tensor(DType::F32, {100000, 1}, "wide");
  EXPECT_FALSE(op_supported(*upscale(ctx, wide, 30000, 1, UpscaleMode::Bilinear), kBinding));

  // More elements than the shader's f32 index counts exactly.
  EXPECT_FALSE(op_supported(*arange(ctx, 0, 3e7f, 1), kBinding));
  EXPECT_FALSE(op_supported(*arange(ctx, 0, 3e35f, 1e35f), kBinding));  // splitting overflows
  EXPECT_TRUE(op_supported(*arange(ctx, 0, 1e6f, 1), kBinding));
}

}  // namespace
}  // namespace sd::vulkan
