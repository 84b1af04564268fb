#include "tensor/ops/concat.h"

#include <gtest/gtest.h>

#include <map>

#include "tensor/error.h"
#include "tensor/ops/view.h"
#include "test_support.h"

namespace sd {
namespace {

using Values = test::NamedValues;

std::vector<float> iota(int64_t n, float first) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = first + static_cast<float>(i);
  return v;
}

TEST(Concat, EachDimTakesAThenB) {
  const Shape base = {3, 2, 2, 2};
  for (int dim = 0; dim < kMaxDims; ++dim) {
    Shape nb = base;
    nb[dim] = 2;
    Shape ne = base;
    ne[dim] += nb[dim];
    auto out = test::run_reference(
        [&](Context& ctx) {
          Tensor* a = ctx.new_tensor(DType::F32, base, "a");
          Tensor* b = ctx.new_tensor(DType::F32, nb, "b");
          Tensor* t = concat(ctx, a, b, dim);
          EXPECT_EQ(t->ne, ne);
          return std::vector<Tensor*>{t};
        },
        {{"a", iota(24, 0)}, {"b", iota(nb[0] * nb[1] * nb[2] * nb[3], 1000)}});
    // Contiguous index of (i0..i3) in a shape.
    auto flat = [](const Shape& s, const int64_t* i) {
      return i[0] + s[0] * (i[1] + s[1] * (i[2] + s[2] * i[3]));
    };
    int64_t k = 0;
    for (int64_t i3 = 0; i3 < ne[3]; ++i3)
      for (int64_t i2 = 0; i2 < ne[2]; ++i2)
        for (int64_t i1 = 0; i1 < ne[1]; ++i1)
          for (int64_t i0 = 0; i0 < ne[0]; ++i0, ++k) {
            int64_t i[4] = {i0, i1, i2, i3};
            float expect;
            if (i[dim] < base[dim]) {
              expect = static_cast<float>(flat(base, i));
            } else {
              i[dim] -= base[dim];
              expect = 1000.0f + static_cast<float>(flat(nb, i));
            }
            ASSERT_EQ(out[0][k], expect) << "dim " << dim << " at " << k;
          }
  }
}

TEST(Concat, KeepsI32AndF16Exact) {
  // The result keeps the input dtype, so i32 ids and f16 bits pass through unchanged.
  auto out = test::run_reference(
      [](Context& ctx) {
        Tensor* a = ctx.new_tensor(DType::I32, {2}, "a");
        Tensor* b = ctx.new_tensor(DType::I32, {1}, "b");
        Tensor* h = ctx.new_tensor(DType::F16, {2}, "h");
        Tensor* t = concat(ctx, a, b, 0);
        EXPECT_EQ(t->type, DType::I32);
        Tensor* th = concat(ctx, h, h, 0);
        EXPECT_EQ(th->type, DType::F16);
        return std::vector<Tensor*>{t, th};
      },
      {{"a", {7, -3}}, {"b", {65504}}, {"h", {0.333251953125f, -2.5f}}});
  EXPECT_EQ(out[0], (std::vector<float>{7, -3, 65504}));
  EXPECT_EQ(out[1], (std::vector<float>{0.333251953125f, -2.5f, 0.333251953125f, -2.5f}));
}

TEST(Concat, PermutedInputsMatchContiguousCopies) {
  auto out = test::run_reference([](Context& ctx) {
    Tensor* a = ctx.new_tensor(DType::F32, {4, 3, 2}, "a");
    Tensor* b = ctx.new_tensor(DType::F32, {3, 5, 2}, "b");
    Tensor* at = permute(ctx, a, {1, 0, 2, 3});  // [3, 4, 2], strided
    return std::vector<Tensor*>{concat(ctx, at, b, 1), concat(ctx, cont(ctx, at), b, 1)};
  });
  EXPECT_EQ(out[0], out[1]);
}

TEST(Concat, RejectsBadInputs) {
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F32, {4, 3}, "a");
  Tensor* b = ctx.new_tensor(DType::F32, {4, 5}, "b");
  Tensor* h = ctx.new_tensor(DType::F16, {4, 3}, "h");
  Tensor* q = ctx.new_tensor(DType::Q8_0, {32, 3}, "q");
  EXPECT_THROW(concat(ctx, a, b, 0), Error);  // dim 1 differs
  EXPECT_THROW(concat(ctx, a, h, 0), Error);
  EXPECT_THROW(concat(ctx, q, q, 1), Error);
  EXPECT_THROW(concat(ctx, a, a, 4), Error);
  EXPECT_THROW(concat(ctx, a, a, -1), Error);
  EXPECT_NO_THROW(concat(ctx, a, b, 1));
}

}  // namespace
}  // namespace sd
