#include "tensor/graph_flops.h"

#include <gtest/gtest.h>

#include "tensor/ops/attention.h"
#include "tensor/ops/conv2d.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/matmul.h"

namespace sd {
namespace {

// Counted by hand: 2 FLOPs per multiply-add.
TEST(GraphFlops, CountsTheMultiplyAddsOfProductsConvolutionsAndAttention) {
  Context ctx;
  // [K=6, M=4] weights times 5 rows in 2 batches: 4 x 5 x 2 outputs of 6 multiply-adds.
  Tensor* y = matmul(ctx, ctx.new_tensor(DType::F32, {6, 4}, "w"),
                     ctx.new_tensor(DType::F32, {6, 5, 2}, "x"));
  EXPECT_EQ(node_flops(y), 2.0 * 6 * 4 * 5 * 2);
  // A 3x3 kernel from 2 to 7 channels over an 8x8 image, padded: 8 x 8 x 7 outputs of 18.
  Tensor* c = conv2d(ctx, ctx.new_tensor(DType::F32, {8, 8, 2, 1}, "image"),
                     ctx.new_tensor(DType::F32, {3, 3, 2, 7}, "kernel"), nullptr, 1, 1, 1, 1, 1, 1);
  EXPECT_EQ(node_flops(c), 2.0 * 8 * 8 * 7 * 18);
  // 3 heads, 10 queries, 12 keys, q/k of 16 and v of 8 dims: 360 scores of 16, and 240
  // outputs of 12 keys.
  Tensor* a = attention(ctx, ctx.new_tensor(DType::F32, {16, 10, 3, 1}, "q"),
                        ctx.new_tensor(DType::F32, {16, 12, 3, 1}, "k"),
                        ctx.new_tensor(DType::F32, {8, 12, 3, 1}, "v"), nullptr, 0.25f);
  EXPECT_EQ(node_flops(a), 2.0 * (3 * 10 * 12 * 16 + 3 * 10 * 8 * 12));
  // Elementwise work is not counted; a graph counts each node once.
  Tensor* sum = add(ctx, y, y);
  EXPECT_EQ(node_flops(sum), 0.0);
  EXPECT_EQ(graph_flops(Graph::build({sum, c, a})), node_flops(y) + node_flops(c) + node_flops(a));
}

}  // namespace
}  // namespace sd
