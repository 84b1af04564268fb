#include "tensor/ops/pad.h"

#include <gtest/gtest.h>

#include <map>

#include "tensor/error.h"
#include "tensor/ops/view.h"
#include "test_support.h"

namespace sd {
namespace {

using Values = test::NamedValues;

TEST(Pad, PlacesInputAndFillsTheRest) {
  // a = [[1, 2], [3, 4], [5, 6]] as [2, 3]; one column before, two after; one row after.
  auto out = test::run_reference(
      [](Context& ctx) {
        Tensor* a = ctx.new_tensor(DType::F32, {2, 3}, "a");
        Tensor* t = pad(ctx, a, {1, 2, 0, 1, 0, 0, 0, 0}, -5.0f);
        EXPECT_EQ(t->ne, make_shape({5, 4}));
        return std::vector<Tensor*>{t};
      },
      {{"a", {1, 2, 3, 4, 5, 6}}});
  const std::vector<float> expect = {-5, 1,  2,  -5, -5,  //
                                     -5, 3,  4,  -5, -5,  //
                                     -5, 5,  6,  -5, -5,  //
                                     -5, -5, -5, -5, -5};
  EXPECT_EQ(out[0], expect);
}

TEST(Pad, PadsOuterDimsOfF16) {
  auto out = test::run_reference(
      [](Context& ctx) {
        Tensor* a = ctx.new_tensor(DType::F16, {1, 1, 1, 2}, "a");
        return std::vector<Tensor*>{pad(ctx, a, {0, 0, 0, 0, 1, 0, 0, 1})};
      },
      {{"a", {1.5f, -2.0f}}});
  // [1, 1, 2, 3]: i2 = 0 is padding, (0, 1) holds the values, the last i3 is padding.
  EXPECT_EQ(out[0], (std::vector<float>{0, 1.5f, 0, -2.0f, 0, 0}));
}

TEST(Pad, PermutedInputMatchesContiguousCopy) {
  auto out = test::run_reference([](Context& ctx) {
    Tensor* a = ctx.new_tensor(DType::F32, {5, 3, 2}, "a");
    Tensor* p = permute(ctx, a, {2, 0, 1, 3});  // [2, 5, 3]
    const std::array<int, 8> pads = {1, 1, 2, 0, 0, 3, 1, 1};
    return std::vector<Tensor*>{pad(ctx, p, pads, 0.5f), pad(ctx, cont(ctx, p), pads, 0.5f)};
  });
  EXPECT_EQ(out[0], out[1]);
}

TEST(Pad, RejectsBadInputs) {
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F32, {4, 3}, "a");
  Tensor* i = ctx.new_tensor(DType::I32, {4, 3}, "i");
  EXPECT_THROW(pad(ctx, a, {-1, 0, 0, 0, 0, 0, 0, 0}), Error);
  EXPECT_THROW(pad(ctx, a, {0, 0, 0, 0, 0, 0, 0, -2}), Error);
  EXPECT_THROW(pad(ctx, i, {1, 0, 0, 0, 0, 0, 0, 0}), Error);
}

}  // namespace
}  // namespace sd
