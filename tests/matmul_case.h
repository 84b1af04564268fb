// The matmul graph the backends' tests compare with the reference kernel, in the layouts
// models produce: either operand possibly a view of a differently laid out leaf.
#pragma once

#include "tensor/ops/matmul.h"
#include "tensor/ops/view.h"
#include "test_support.h"

namespace sd::test {

enum class MatMulLayout { Contiguous, TransposedA, TransposedB, PermutedB };

// matmul(a, b) with a [K, M, A2, A3] of dtype `ta` and b [K, N, B2, B3] f32, built in
// `layout` (a view of a differently shaped leaf when not contiguous).
inline GraphCase matmul_case(DType ta, Shape sa, Shape sb,
                             MatMulLayout layout = MatMulLayout::Contiguous) {
  GraphCase c;
  c.build = [=](Context& ctx) {
    Tensor* a = layout == MatMulLayout::TransposedA
                    ? transpose(ctx, ctx.new_tensor(ta, {sa[1], sa[0], sa[2], sa[3]}, "a_t"))
                    : ctx.new_tensor(ta, sa, "a");
    Tensor* b = nullptr;
    if (layout == MatMulLayout::TransposedB) {
      b = transpose(ctx, ctx.new_tensor(DType::F32, {sb[1], sb[0], sb[2], sb[3]}, "b_t"));
    } else if (layout == MatMulLayout::PermutedB) {
      // [K, B2, N, B3] -> [K, N, B2, B3], as attention heads are split off a projection.
      b = permute(ctx, ctx.new_tensor(DType::F32, {sb[0], sb[2], sb[1], sb[3]}, "b_p"),
                  {0, 2, 1, 3});
    } else {
      b = ctx.new_tensor(DType::F32, sb, "b");
    }
    return std::vector<Tensor*>{matmul(ctx, a, b)};
  };
  return c;
}

}  // namespace sd::test
