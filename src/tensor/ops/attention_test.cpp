#include "tensor/ops/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "tensor/error.h"
#include "test_support.h"

namespace sd {
namespace {

using Values = test::NamedValues;

// One query against two keys whose scaled scores are 0 and ln 3: weights 1/4 and 3/4.
Tensor* two_keys(Context& ctx, bool with_mask) {
  Tensor* q = ctx.new_tensor(DType::F32, {1, 1, 1, 1}, "q");
  Tensor* k = ctx.new_tensor(DType::F32, {1, 2, 1, 1}, "k");
  Tensor* v = ctx.new_tensor(DType::F32, {2, 2, 1, 1}, "v");
  Tensor* mask = with_mask ? ctx.new_tensor(DType::F32, {2, 1}, "mask") : nullptr;
  return attention(ctx, q, k, v, mask, 0.5f);
}

const Values kTwoKeys = {{"q", {2}}, {"k", {0, std::log(3.0f)}}, {"v", {1, 0, 0, 1}}};

TEST(Attention, SoftmaxWeightsTheValues) {
  auto y = test::run_reference_single([](Context& ctx) { return two_keys(ctx, false); }, kTwoKeys);
  ASSERT_EQ(y.size(), 2u);
  EXPECT_NEAR(y[0], 0.25f, 1e-6);
  EXPECT_NEAR(y[1], 0.75f, 1e-6);
}

TEST(Attention, MaskAddsToScoresAndFullyMaskedQueriesGetZeros) {
  Values values = kTwoKeys;
  values["mask"] = {0, -INFINITY};
  auto y = test::run_reference_single([](Context& ctx) { return two_keys(ctx, true); }, values);
  EXPECT_EQ(y, (std::vector<float>{1, 0}));
  values["mask"] = {std::log(3.0f), 0};  // cancels key 1's lead: equal weights
  y = test::run_reference_single([](Context& ctx) { return two_keys(ctx, true); }, values);
  EXPECT_NEAR(y[0], 0.5f, 1e-6);
  EXPECT_NEAR(y[1], 0.5f, 1e-6);
  values["mask"] = {-INFINITY, -INFINITY};
  y = test::run_reference_single([](Context& ctx) { return two_keys(ctx, true); }, values);
  EXPECT_EQ(y, (std::vector<float>{0, 0}));
}

TEST(Attention, OutputPutsHeadsBeforeQueries) {
  // One key per head, so each query returns its head's value: out[e, h, i, n] = v[e, 0, h, n].
  Shape shape{};  // read inside build: the graph's context is gone after the run
  auto y = test::run_reference_single(
      [&](Context& ctx) {
        Tensor* q = ctx.new_tensor(DType::F32, {1, 3, 2, 1}, "q");
        Tensor* k = ctx.new_tensor(DType::F32, {1, 1, 2, 1}, "k");
        Tensor* v = ctx.new_tensor(DType::F32, {1, 1, 2, 1}, "v");
        Tensor* out = attention(ctx, q, k, v, nullptr, 1.0f);
        shape = out->ne;
        return out;
      },
      {{"v", {10, 20}}});
  EXPECT_EQ(shape, (std::array<int64_t, 4>{1, 2, 3, 1}));
  EXPECT_EQ(y, (std::vector<float>{10, 20, 10, 20, 10, 20}));
}

TEST(Attention, BadShapesAreErrors) {
  Context ctx;
  Tensor* q = ctx.new_tensor(DType::F32, {8, 5, 2, 1}, "q");
  Tensor* k = ctx.new_tensor(DType::F32, {8, 7, 2, 1}, "k");
  Tensor* v = ctx.new_tensor(DType::F32, {4, 7, 2, 1}, "v");
  EXPECT_NO_THROW(attention(ctx, q, k, v, ctx.new_tensor(DType::F32, {7, 5}, "m"), 1.0f));
  try {
    attention(ctx, q, k, v, ctx.new_tensor(DType::F32, {5, 7}, "m_t"), 1.0f);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("m_t"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[7, 5]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(attention(ctx, q, ctx.new_tensor(DType::F32, {6, 7, 2, 1}, "k6"), v, nullptr, 1),
               Error);
  EXPECT_THROW(attention(ctx, q, k, ctx.new_tensor(DType::F32, {4, 6, 2, 1}, "v6"), nullptr, 1),
               Error);
  EXPECT_THROW(attention(ctx, q, k, ctx.new_tensor(DType::F32, {4, 7, 3, 1}, "v3"), nullptr, 1),
               Error);
  EXPECT_THROW(attention(ctx, ctx.new_tensor(DType::F16, {8, 5, 2, 1}, "qh"), k, v, nullptr, 1),
               Error);
}

}  // namespace
}  // namespace sd
