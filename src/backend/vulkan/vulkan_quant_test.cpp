// Block-quantized weights on a Vulkan device against the reference kernels: matmul with each
// of the ten GGUF block types as its weight (several sizes, batch broadcasting, sliced and
// permuted views), get_rows from block-quantized tables, and every other op turning block
// types down. Both sides decode the same blocks, so results differ only by summation order.
#include <gtest/gtest.h>

#include <array>
#include <functional>
#include <utility>
#include <vector>

#include "backend/vulkan/vulkan_ops.h"
#include "backend/vulkan/vulkan_test_util.h"
#include "tensor/ops/attention.h"
#include "tensor/ops/cast.h"
#include "tensor/ops/concat.h"
#include "tensor/ops/conv2d.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/generate.h"
#include "tensor/ops/get_rows.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/norm.h"
#include "tensor/ops/pad.h"
#include "tensor/ops/reduce.h"
#include "tensor/ops/softmax.h"
#include "tensor/ops/unary.h"
#include "tensor/ops/upscale.h"
#include "tensor/ops/view.h"

namespace sd::vulkan {
namespace {

using sd::test::GraphCase;

constexpr DType kBlockTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                                 DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K};

constexpr size_t kBinding = size_t{1} << 30;

// Values for a block-typed leaf: each run of 16 (the smallest sub-block) gets its own
// amplitude and offset, so the quantizers choose scales and minimums across their range
// (the packed 6-bit ones' top bits included) instead of one scale for every sub-block.
std::vector<float> varied_values(int64_t n, uint32_t seed) {
  const int64_t runs = n / 16 + 1;
  std::vector<float> v = sd::test::random_values(n, seed);
  const std::vector<float> amplitude = sd::test::random_values(runs, seed + 1, 0.05f, 1.0f);
  const std::vector<float> offset = sd::test::random_values(runs, seed + 2, -0.3f, 0.3f);
  for (int64_t i = 0; i < n; ++i) v[i] = v[i] * amplitude[i / 16] + offset[i / 16];
  return v;
}

// Block-typed leaves get varied values, the others the default uniform ones.
GraphCase block_case(std::function<std::vector<Tensor*>(Context&)> build) {
  GraphCase c;
  c.build = std::move(build);
  c.fill = [](const Tensor& t, int leaf) {
    return is_quantized(t.type) ? varied_values(t.nelements(), 70 + leaf) : std::vector<float>{};
  };
  return c;
}

constexpr double kQuantRtol = 1e-4;

GraphCase quant_matmul_case(DType type, Shape sa, Shape sb) {
  return block_case([=](Context& ctx) {
    return std::vector<Tensor*>{
        matmul(ctx, ctx.new_tensor(type, sa, "a"), ctx.new_tensor(DType::F32, sb, "b"))};
  });
}

TEST(VulkanQuant, MatMulEveryBlockType) {
  SD_REQUIRE_VULKAN(device);
  for (DType type : kBlockTypes) {
    const int64_t bs = block_size(type);
    // {blocks per row, M, N}: one value out, edges past a 64 x 64 tile on either side.
    const std::array<int64_t, 3> sizes[] = {{1, 1, 1}, {3, 65, 7}, {2, 7, 130}};
    for (auto [blocks, M, N] : sizes) {
      const int64_t K = blocks * bs;
      SCOPED_TRACE(testing::Message()
                   << dtype_name(type) << " K " << K << " M " << M << " N " << N);
      test::expect_matches_reference(
          *device, quant_matmul_case(type, make_shape({K, M}), make_shape({K, N, 2})),
          test::atol_for(K), kQuantRtol);
    }
  }
}

TEST(VulkanQuant, MatMulBlockWeightBroadcastsOverBatch) {
  SD_REQUIRE_VULKAN(device);
  for (DType type : kBlockTypes) {
    SCOPED_TRACE(dtype_name(type));
    // b's 4 x 6 batch over a's 2 x 3: each slice of a (its own blocks) serves 2 x 2 of b.
    const int64_t K = 2 * block_size(type);
    test::expect_matches_reference(
        *device, quant_matmul_case(type, make_shape({K, 9, 2, 3}), make_shape({K, 5, 4, 6})),
        test::atol_for(K), kQuantRtol);
  }
}

TEST(VulkanQuant, MatMulBlockWeightViews) {
  SD_REQUIRE_VULKAN(device);
  // Blocks of 18, 22, 110 and 210 bytes: rows and blocks start at every byte offset mod 4.
  for (DType type : {DType::Q4_0, DType::Q5_0, DType::Q3_K, DType::Q6_K}) {
    SCOPED_TRACE(dtype_name(type));
    const int64_t bs = block_size(type), K = 2 * bs;
    auto c = block_case([=](Context& ctx) {
      Tensor* b = ctx.new_tensor(DType::F32, {K, 6, 3}, "b");
      // Blocks 1 and 2 of rows of 4 blocks: each row starts one block in.
      Tensor* columns = slice(ctx, ctx.new_tensor(type, {4 * bs, 9}, "wide"), 0, bs, 3 * bs);
      // Rows 3..11: the view starts 3 rows in.
      Tensor* rows = slice(ctx, ctx.new_tensor(type, {K, 12}, "tall"), 1, 3, 12);
      // [K, 3, 5] seen as [K, 5, 3]: rows 3 rows apart, batch slices one row apart.
      Tensor* permuted = permute(ctx, ctx.new_tensor(type, {K, 3, 5}, "p"), {0, 2, 1, 3});
      return std::vector<Tensor*>{matmul(ctx, columns, b), matmul(ctx, rows, b),
                                  matmul(ctx, permuted, b)};
    });
    test::expect_matches_reference(*device, c, test::atol_for(K), kQuantRtol);
  }
}

TEST(VulkanQuant, GetRowsEveryBlockType) {
  SD_REQUIRE_VULKAN(device);
  for (DType type : kBlockTypes) {
    SCOPED_TRACE(dtype_name(type));
    const int64_t bs = block_size(type);
    GraphCase c = block_case([=](Context& ctx) {
      Tensor* ids = ctx.new_tensor(DType::I32, {5, 2}, "ids");
      Tensor* table = ctx.new_tensor(type, {2 * bs, 9}, "table");
      // The middle block of each row of a [3 blocks, 9] table.
      Tensor* middle = slice(ctx, ctx.new_tensor(type, {3 * bs, 9}, "wide"), 0, bs, 2 * bs);
      return std::vector<Tensor*>{get_rows(ctx, table, ids), get_rows(ctx, middle, ids)};
    });
    const auto varied = c.fill;
    c.fill = [varied](const Tensor& t, int leaf) {
      if (t.name == "ids") return std::vector<float>{0, 8, 3, 3, 7, 1, 2, 8, 0, 5};
      return varied(t, leaf);
    };
    // The same decoded values; only a fused multiply-add may round differently.
    test::expect_matches_reference(*device, c, 1e-6, 1e-6);
  }
}

TEST(VulkanQuant, MatMulAndGetRowsTakeTheBlockTypesTheShadersDecode) {
  Context ctx;
  Tensor* ids = ctx.new_tensor(DType::I32, {4}, "ids");
  for (DType type : kBlockTypes) {
    SCOPED_TRACE(dtype_name(type));
    const int64_t K = 2 * block_size(type);
    Tensor* w = ctx.new_tensor(type, {K, 10}, "w");
    EXPECT_TRUE(op_supported(*matmul(ctx, w, ctx.new_tensor(DType::F32, {K, 5}, "x")), kBinding));
    EXPECT_TRUE(op_supported(*get_rows(ctx, w, ids), kBinding));
    // A block tensor's extent ends with its last row's last block: one row stride and one
    // row for rows 1..2; two row strides and half a row for the first half of each row.
    Tensor* rows = slice(ctx, ctx.new_tensor(type, {K, 3}, "r"), 1, 1, 3);
    EXPECT_EQ(tensor_extent(*rows), 2 * row_size(type, K));
    Tensor* columns = slice(ctx, ctx.new_tensor(type, {K, 3}, "c"), 0, 0, K / 2);
    EXPECT_EQ(tensor_extent(*columns), 2 * row_size(type, K) + row_size(type, K / 2));
  }
  // q8_K is the CPU's activation type: no shader decodes it.
  Tensor* q8k = ctx.new_tensor(DType::Q8_K, {256, 10}, "q8k");
  EXPECT_FALSE(
      op_supported(*matmul(ctx, q8k, ctx.new_tensor(DType::F32, {256, 5}, "x")), kBinding));
  EXPECT_FALSE(op_supported(*get_rows(ctx, q8k, ids), kBinding));
}

TEST(VulkanQuant, EveryOtherOpDeclinesBlockTypes) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {64, 8, 32, 1}, "x");
  Tensor* y = ctx.new_tensor(DType::F32, {64, 8, 32, 1}, "y");
  Tensor* row = ctx.new_tensor(DType::F32, {64}, "row");
  Tensor* channels = ctx.new_tensor(DType::F32, {32}, "channels");
  Tensor* image = ctx.new_tensor(DType::F32, {32, 4, 3, 1}, "image");
  Tensor* kernel = ctx.new_tensor(DType::F16, {32, 1, 3, 32}, "kernel");
  Tensor* q = ctx.new_tensor(DType::F32, {64, 8, 2, 1}, "q");
  Tensor* kv = ctx.new_tensor(DType::F32, {64, 32, 2, 1}, "kv");
  Tensor* mask = ctx.new_tensor(DType::F32, {32, 8}, "mask");
  Tensor* ids = ctx.new_tensor(DType::I32, {32}, "ids");

  // Nodes the shaders compute as built; each listed source swapped for a q8_0 tensor of its
  // shape must turn the node down (the node itself is f32 or f16).
  struct Swap {
    Tensor* node;
    std::vector<int> slots;
  };
  const Swap swaps[] = {
      {add(ctx, x, y), {0, 1}},
      {scale(ctx, x, 2), {0}},
      {clamp(ctx, x, -1, 1), {0}},
      {unary(ctx, x, UnaryOp::Silu), {0}},
      {cast(ctx, x, DType::F16), {0}},
      {cont(ctx, permute(ctx, x, {0, 2, 1, 3})), {0}},
      {concat(ctx, x, y, 1), {0, 1}},
      {pad(ctx, x, {0, 0, 1, 1, 0, 0, 0, 0}), {0}},
      {upscale(ctx, x, 128, 16, UpscaleMode::Nearest), {0}},
      {timestep_embedding(ctx, channels, 64), {0}},
      {sum(ctx, x, 1), {0}},
      {mean(ctx, x, 0), {0}},
      {softmax(ctx, x, ctx.new_tensor(DType::F32, {64, 8}, "smask")), {0, 1}},
      {group_norm(ctx, x, 4, 1e-5f, channels, channels), {0, 1, 2}},
      {layer_norm(ctx, x, 1e-5f, row, row), {0, 1, 2}},
      {rms_norm(ctx, x, 1e-5f, row), {0, 1}},
      {conv2d(ctx, image, kernel, channels, 1, 1, 0, 0, 1, 1), {0, 1, 2}},
      {attention(ctx, q, kv, kv, mask, 0.125f), {0, 1, 2, 3}},
      // matmul decodes blocks in its weight only; get_rows in its table only.
      {matmul(ctx, ctx.new_tensor(DType::F32, {64, 10}, "w"), x), {1}},
      {get_rows(ctx, ctx.new_tensor(DType::F32, {64, 10}, "table"), ids), {1}},
  };
  for (const Swap& s : swaps) {
    SCOPED_TRACE(op_name(s.node->op));
    ASSERT_TRUE(op_supported(*s.node, kBinding));
    for (int slot : s.slots) {
      SCOPED_TRACE(testing::Message() << "source " << slot);
      Tensor* kept = s.node->src[slot];
      s.node->src[slot] = ctx.new_tensor(DType::Q8_0, kept->ne, "q8_0");
      EXPECT_FALSE(op_supported(*s.node, kBinding));
      s.node->src[slot] = kept;
    }
  }

  // Block-typed outputs and copies: the map and concat shaders store elements, not blocks.
  Tensor* blocks = ctx.new_tensor(DType::Q8_0, {64, 8}, "blocks");
  EXPECT_FALSE(op_supported(*cast(ctx, blocks, DType::F32), kBinding));
  EXPECT_FALSE(
      op_supported(*cast(ctx, ctx.new_tensor(DType::F32, {64, 8}, "f"), DType::Q8_0), kBinding));
  EXPECT_FALSE(op_supported(*cont(ctx, slice(ctx, blocks, 1, 2, 6)), kBinding));
  // concat() takes no block types, but a node made otherwise must not slip through.
  Tensor* block_concat =
      ctx.new_op(Op::Concat, DType::Q8_0, make_shape({64, 16}), {blocks, blocks});
  block_concat->params[0] = 1;
  EXPECT_FALSE(op_supported(*block_concat, kBinding));
}

}  // namespace
}  // namespace sd::vulkan
