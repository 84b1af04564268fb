#include "tensor/ops/norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "tensor/error.h"
#include "tensor/ops/unary.h"
#include "tensor/ops/view.h"
#include "test_support.h"

namespace sd {
namespace {

using Values = test::NamedValues;

struct Moments {
  double mean = 0, var = 0;
};

Moments moments(const std::vector<double>& v) {
  Moments m;
  for (double x : v) m.mean += x;
  m.mean /= static_cast<double>(v.size());
  for (double x : v) m.var += (x - m.mean) * (x - m.mean);
  m.var /= static_cast<double>(v.size());
  return m;
}

TEST(GroupNorm, EachGroupHasMeanZeroVarianceOneThenAffine) {
  const int64_t w = 4, h = 3, c = 6, n = 2;
  const int groups = 3;
  const float eps = 1e-5f;
  // Offset and spread so a kernel that skipped centering or scaling would fail.
  const std::vector<float> x = test::random_values(w * h * c * n, 11, 2, 9);
  const std::vector<float> weight = {0.5f, -1, 2, 1.5f, 0.25f, 3};
  const std::vector<float> bias = {1, 2, -3, 0, 0.5f, -0.5f};
  auto out = test::run_reference(
      [&](Context& ctx) {
        Tensor* t = ctx.new_tensor(DType::F32, {w, h, c, n}, "x");
        Tensor* wt = ctx.new_tensor(DType::F32, {c}, "weight");
        Tensor* b = ctx.new_tensor(DType::F32, {c}, "bias");
        return std::vector<Tensor*>{group_norm(ctx, t, groups, eps),
                                    group_norm(ctx, t, groups, eps, wt, b)};
      },
      {{"x", x}, {"weight", weight}, {"bias", bias}});
  const int64_t per = c / groups, plane = w * h;
  for (int64_t b = 0; b < n; ++b)
    for (int g = 0; g < groups; ++g) {
      const int64_t first = (b * c + g * per) * plane, count = per * plane;
      std::vector<double> in(x.begin() + first, x.begin() + first + count);
      std::vector<double> y(out[0].begin() + first, out[0].begin() + first + count);
      const Moments mx = moments(in), my = moments(y);
      EXPECT_NEAR(my.mean, 0.0, 1e-6);
      // eps shrinks the variance to var / (var + eps).
      EXPECT_NEAR(my.var, mx.var / (mx.var + eps), 1e-5);
      for (int64_t i = 0; i < count; ++i) {
        const double expect = (in[i] - mx.mean) / std::sqrt(mx.var + eps);
        EXPECT_NEAR(y[i], expect, 1e-5);
        const int64_t ch = g * per + i / plane;
        EXPECT_NEAR(out[1][first + i], expect * weight[ch] + bias[ch], 3e-5);
      }
    }
}

// The fused activation: silu of what the plain norm gives, value by value.
TEST(GroupNorm, SiluActivationAppliesToTheAffineOutput) {
  const int64_t c = 4;
  const std::vector<float> x = test::random_values(3 * 2 * c, 12, -3, 3);
  auto out = test::run_reference(
      [&](Context& ctx) {
        Tensor* t = ctx.new_tensor(DType::F32, {3, 2, c}, "x");
        Tensor* wt = ctx.new_tensor(DType::F32, {c}, "weight");
        Tensor* b = ctx.new_tensor(DType::F32, {c}, "bias");
        return std::vector<Tensor*>{group_norm(ctx, t, 2, 1e-5f, wt, b),
                                    group_norm(ctx, t, 2, 1e-5f, wt, b, NormActivation::Silu)};
      },
      {{"x", x}, {"weight", {2, -1, 0.5f, 3}}, {"bias", {-1, 0.5f, 2, 0}}});
  for (size_t i = 0; i < out[0].size(); ++i) {
    const double v = out[0][i];
    EXPECT_NEAR(out[1][i], v / (1 + std::exp(-v)), 1e-6) << i;
  }
}

TEST(GroupNorm, UnknownActivationIsRefused) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {2, 2, 4}, "x");
  try {
    group_norm(ctx, x, 2, 1e-5f, nullptr, nullptr, static_cast<NormActivation>(7));
    FAIL() << "accepted activation 7";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown activation 7"), std::string::npos) << e.what();
  }
}

TEST(GroupNorm, OneGroupAndOneGroupPerChannel) {
  const std::vector<float> x = test::random_values(2 * 2 * 4, 5);
  auto out = test::run_reference(
      [](Context& ctx) {
        Tensor* t = ctx.new_tensor(DType::F32, {2, 2, 4}, "x");
        return std::vector<Tensor*>{group_norm(ctx, t, 1, 0), group_norm(ctx, t, 4, 0)};
      },
      {{"x", x}});
  const Moments all = moments(std::vector<double>(out[0].begin(), out[0].end()));
  EXPECT_NEAR(all.mean, 0, 1e-6);
  EXPECT_NEAR(all.var, 1, 1e-5);
  for (int ch = 0; ch < 4; ++ch) {
    const Moments m =
        moments(std::vector<double>(out[1].begin() + ch * 4, out[1].begin() + ch * 4 + 4));
    EXPECT_NEAR(m.mean, 0, 1e-6);
    EXPECT_NEAR(m.var, 1, 1e-5);
  }
}

TEST(GroupNorm, ConstantGroupGivesBiasNotNaN) {
  auto out = test::run_reference(
      [](Context& ctx) {
        Tensor* t = ctx.new_tensor(DType::F32, {2, 1, 2}, "x");
        Tensor* b = ctx.new_tensor(DType::F32, {1, 1, 2}, "bias");  // conv-style [1, 1, C]
        return std::vector<Tensor*>{group_norm(ctx, t, 2, 1e-6f, nullptr, b)};
      },
      {{"x", {3, 3, -1, -1}}, {"bias", {0.5f, -2}}});
  EXPECT_EQ(out[0], (std::vector<float>{0.5f, 0.5f, -2, -2}));
}

TEST(GroupNorm, PermutedInputMatchesContiguousCopy) {
  auto out = test::run_reference([](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {6, 3, 4, 2}, "x");
    Tensor* wt = ctx.new_tensor(DType::F16, {6}, "weight");
    Tensor* b = ctx.new_tensor(DType::F32, {6}, "bias");
    Tensor* p = permute(ctx, x, {1, 2, 0, 3});  // [3, 4, 6, 2]
    return std::vector<Tensor*>{group_norm(ctx, p, 2, 1e-5f, wt, b),
                                group_norm(ctx, cont(ctx, p), 2, 1e-5f, wt, b)};
  });
  EXPECT_EQ(out[0], out[1]);
}

TEST(LayerNorm, RowsAreNormalizedThenAffine) {
  const int64_t n = 8, rows = 3;
  const std::vector<float> x = test::random_values(n * rows, 2, -3, 5);
  const std::vector<float> weight = test::random_values(n, 4);
  const std::vector<float> bias = test::random_values(n, 5);
  const float eps = 1e-6f;
  auto out = test::run_reference(
      [&](Context& ctx) {
        Tensor* t = ctx.new_tensor(DType::F32, {n, rows}, "x");
        Tensor* wt = ctx.new_tensor(DType::F32, {n}, "weight");
        Tensor* b = ctx.new_tensor(DType::F32, {n}, "bias");
        return std::vector<Tensor*>{layer_norm(ctx, t, eps), layer_norm(ctx, t, eps, wt, b),
                                    layer_norm(ctx, t, eps, wt, nullptr)};
      },
      {{"x", x}, {"weight", weight}, {"bias", bias}});
  for (int64_t r = 0; r < rows; ++r) {
    const Moments m = moments(std::vector<double>(x.begin() + r * n, x.begin() + (r + 1) * n));
    for (int64_t i = 0; i < n; ++i) {
      const double y = (x[r * n + i] - m.mean) / std::sqrt(m.var + eps);
      EXPECT_NEAR(out[0][r * n + i], y, 1e-5);
      EXPECT_NEAR(out[1][r * n + i], y * weight[i] + bias[i], 1e-5);
      EXPECT_NEAR(out[2][r * n + i], y * weight[i], 1e-5);
    }
  }
}

TEST(RmsNorm, KnownValues) {
  // [3, 4]: mean square 12.5, so x / sqrt(12.5).
  auto out = test::run_reference(
      [](Context& ctx) {
        Tensor* t = ctx.new_tensor(DType::F32, {2, 2}, "x");
        Tensor* wt = ctx.new_tensor(DType::BF16, {2}, "weight");
        return std::vector<Tensor*>{rms_norm(ctx, t, 0), rms_norm(ctx, t, 0.5f, wt)};
      },
      {{"x", {3, 4, 0, -2}}, {"weight", {2, -0.5f}}});
  const double r = std::sqrt(12.5);
  EXPECT_NEAR(out[0][0], 3 / r, 1e-7);
  EXPECT_NEAR(out[0][1], 4 / r, 1e-7);
  EXPECT_NEAR(out[0][2], 0, 1e-7);
  EXPECT_NEAR(out[0][3], -2 / std::sqrt(2.0), 1e-7);
  // Not centered: the mean of [0, -2] is not subtracted. eps is added to the mean square.
  EXPECT_NEAR(out[1][0], 3 / std::sqrt(13.0) * 2, 1e-6);
  EXPECT_NEAR(out[1][1], 4 / std::sqrt(13.0) * -0.5, 1e-6);
  EXPECT_NEAR(out[1][3], -2 / std::sqrt(2.5) * -0.5, 1e-6);
}

// Over each pixel's channels of [W, H, C, N]: the row norm of the map permuted to tokens
// [C, W * H, N] and back, with SiLU after it.
TEST(RmsNorm, OverChannelsIsTheRowNormOfTokens) {
  auto out = test::run_reference([](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {5, 3, 4, 2}, "x");
    Tensor* wt = ctx.new_tensor(DType::F32, {4}, "weight");
    Tensor* tokens = cont(ctx, permute(ctx, reshape(ctx, x, {15, 4, 2}), {1, 0, 2, 3}));
    Tensor* rows = rms_norm(ctx, tokens, 1e-6f, wt);
    Tensor* back = reshape(ctx, cont(ctx, permute(ctx, rows, {1, 0, 2, 3})), {5, 3, 4, 2});
    return std::vector<Tensor*>{rms_norm_channels(ctx, x, 1e-6f, wt), back,
                                rms_norm_channels(ctx, x, 1e-6f, wt, NormActivation::Silu),
                                silu(ctx, back)};
  });
  ASSERT_EQ(out[0].size(), 120u);
  for (size_t i = 0; i < out[0].size(); ++i) {
    EXPECT_NEAR(out[0][i], out[1][i], 1e-6) << i;
    EXPECT_NEAR(out[2][i], out[3][i], 1e-6) << i;
  }
}

TEST(RowNorms, PermutedInputMatchesContiguousCopy) {
  auto out = test::run_reference([](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {5, 7, 3}, "x");
    Tensor* wt = ctx.new_tensor(DType::F32, {7}, "weight");
    Tensor* b = ctx.new_tensor(DType::F32, {7}, "bias");
    Tensor* p = permute(ctx, x, {1, 0, 2, 3});  // [7, 5, 3]
    Tensor* c = cont(ctx, p);
    return std::vector<Tensor*>{layer_norm(ctx, p, 1e-5f, wt, b), layer_norm(ctx, c, 1e-5f, wt, b),
                                rms_norm(ctx, p, 1e-5f, wt), rms_norm(ctx, c, 1e-5f, wt)};
  });
  EXPECT_EQ(out[0], out[1]);
  EXPECT_EQ(out[2], out[3]);
}

TEST(Norms, RejectBadInputs) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {4, 4, 6}, "x");
  Tensor* c6 = ctx.new_tensor(DType::F32, {6}, "c6");
  Tensor* c4 = ctx.new_tensor(DType::F32, {4}, "c4");
  Tensor* mat = ctx.new_tensor(DType::F32, {2, 3}, "mat");
  Tensor* i = ctx.new_tensor(DType::I32, {4, 4, 6}, "i");
  EXPECT_THROW(group_norm(ctx, x, 4, 1e-5f), Error);  // 6 channels, 4 groups
  EXPECT_THROW(group_norm(ctx, x, 0, 1e-5f), Error);
  EXPECT_THROW(group_norm(ctx, x, 2, -1.0f), Error);
  EXPECT_THROW(group_norm(ctx, x, 2, 1e-5f, c4), Error);
  EXPECT_THROW(group_norm(ctx, x, 2, 1e-5f, c6, mat), Error);  // 6 values, but a matrix
  EXPECT_THROW(group_norm(ctx, i, 2, 1e-5f), Error);
  EXPECT_NO_THROW(group_norm(ctx, x, 2, 1e-5f, c6, c6));
  EXPECT_THROW(layer_norm(ctx, x, 1e-5f, c6), Error);
  EXPECT_THROW(layer_norm(ctx, x, NAN), Error);
  EXPECT_THROW(rms_norm(ctx, x, 1e-5f, c6), Error);
  EXPECT_THROW(rms_norm(ctx, i, 1e-5f), Error);
  EXPECT_NO_THROW(rms_norm(ctx, x, 1e-5f, c4));
  EXPECT_THROW(rms_norm_channels(ctx, x, 1e-5f, c4), Error);  // 6 channels
  EXPECT_THROW(rms_norm_channels(ctx, x, 1e-5f, c6, static_cast<NormActivation>(7)), Error);
  EXPECT_NO_THROW(rms_norm_channels(ctx, x, 1e-5f, c6, NormActivation::Silu));
}

}  // namespace
}  // namespace sd
