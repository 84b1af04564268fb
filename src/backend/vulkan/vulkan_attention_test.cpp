// Fused attention on a Vulkan device against the reference kernel: query and key counts
// that cut the shader's 16-query blocks and key tiles, head sizes that change the tile
// size, Dv != D, masks with -inf (whole tiles and whole rows hidden), scores far beyond
// exp's range, the strided q/k/v views the models pass, and the heads the shader declines.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/vulkan/vulkan_ops.h"
#include "backend/vulkan/vulkan_test_util.h"
#include "tensor/ops/attention.h"
#include "tensor/ops/view.h"

namespace sd::vulkan {
namespace {

using sd::test::GraphCase;

// The shader sums the D products of a score in f32 (the reference in double) and rescales
// its running sums online; outputs are averages of values in [-1, 1], so errors stay near
// 1e-6 (observed below 1e-6 on lavapipe), while a misplaced key moves an output by
// ~1 / Lk >= 1e-3.
constexpr double kAtol = 1e-5;
constexpr double kRtol = 1e-5;

enum class Layout {
  Contiguous,
  // q and k as permuted views of [D, H, L, N] projections (SD's head split), v as a
  // transposed [L, Dv] leaf: no row of any of them is contiguous with the next.
  HeadSplit,
  // Every one of q, k, v transposed from [L, D, N, H]: the head dim itself is strided, and
  // heads lie further apart than batches. The mask is a transposed [Lq, Lk] leaf.
  Transposed,
};

struct AttnCase {
  int64_t D, Dv, Lq, Lk, H, N;
  bool mask;
  Layout layout;
};

GraphCase attn_case(const AttnCase& a, AttentionPrecision precision = AttentionPrecision::F32) {
  GraphCase c;
  c.build = [=](Context& ctx) {
    Tensor *q, *k, *v;
    if (a.layout == Layout::HeadSplit) {
      auto split_heads = [&](int64_t d, int64_t l, const char* name) {
        return permute(ctx, ctx.new_tensor(DType::F32, {d, a.H, l, a.N}, name), {0, 2, 1, 3});
      };
      q = split_heads(a.D, a.Lq, "q_p");
      k = split_heads(a.D, a.Lk, "k_p");
      v = permute(ctx, ctx.new_tensor(DType::F32, {a.Lk, a.Dv, a.H, a.N}, "v_t"), {1, 0, 2, 3});
    } else if (a.layout == Layout::Transposed) {
      auto transposed = [&](int64_t d, int64_t l, const char* name) {
        return permute(ctx, ctx.new_tensor(DType::F32, {l, d, a.N, a.H}, name), {1, 0, 3, 2});
      };
      q = transposed(a.D, a.Lq, "q_t");
      k = transposed(a.D, a.Lk, "k_t");
      v = transposed(a.Dv, a.Lk, "v_t");
    } else {
      q = ctx.new_tensor(DType::F32, {a.D, a.Lq, a.H, a.N}, "q");
      k = ctx.new_tensor(DType::F32, {a.D, a.Lk, a.H, a.N}, "k");
      v = ctx.new_tensor(DType::F32, {a.Dv, a.Lk, a.H, a.N}, "v");
    }
    Tensor* mask = nullptr;
    if (a.mask && a.layout == Layout::Transposed)
      mask = permute(ctx, ctx.new_tensor(DType::F32, {a.Lq, a.Lk}, "mask_t"), {1, 0, 2, 3});
    else if (a.mask)
      mask = ctx.new_tensor(DType::F32, {a.Lk, a.Lq}, "mask");
    return std::vector<Tensor*>{
        attention(ctx, q, k, v, mask, 1.0f / std::sqrt(static_cast<float>(a.D)), precision)};
  };
  // The mask is causal where Lq == Lk. Otherwise it hides every third key, and for every
  // fourth query the first 40 keys: whole key tiles with nothing visible before them, so
  // the running max starts from -inf. Query 1 sees no key at all (its output is zeros).
  c.fill = [](const Tensor& t, int leaf) {
    std::vector<float> x = sd::test::random_values(t.nelements(), 70 + leaf, -1.0f, 1.0f);
    if (t.name.rfind("mask", 0) != 0) return x;
    const bool transposed = t.name == "mask_t";  // [Lq, Lk] rather than [Lk, Lq]
    const int64_t lk = t.ne[transposed ? 1 : 0], lq = t.ne[transposed ? 0 : 1];
    for (int64_t i = 0; i < lq; ++i)
      for (int64_t j = 0; j < lk; ++j) {
        const bool hidden = lq == lk ? j > i : j % 3 == 0 || (i % 4 == 2 && j < 40);
        float& m = x[transposed ? j * lq + i : i * lk + j];
        m = hidden || i == 1 ? -INFINITY : 0.5f * m;
      }
    return x;
  };
  return c;
}

void expect_cases_match(Device& device, std::initializer_list<AttnCase> cases) {
  for (const AttnCase& a : cases) {
    SCOPED_TRACE(testing::Message() << "D " << a.D << " Dv " << a.Dv << " Lq " << a.Lq << " Lk "
                                    << a.Lk << " H " << a.H << " N " << a.N << " mask " << a.mask
                                    << " layout " << static_cast<int>(a.layout));
    test::expect_matches_reference(device, attn_case(a), kAtol, kRtol);
  }
}

TEST(VulkanAttention, OddLengthsAndHeadSizes) {
  SD_REQUIRE_VULKAN(device);
  expect_cases_match(
      *device,
      {
          // D, Dv, Lq, Lk, H, N, mask, layout
          {8, 8, 1, 1, 1, 1, false, Layout::Contiguous},
          {8, 8, 7, 77, 3, 2, false, Layout::Contiguous},
          {40, 40, 77, 7, 2, 2, false, Layout::Contiguous},  // SD1.5 head size
          {64, 64, 130, 77, 2, 1, false, Layout::Contiguous},
          {128, 128, 17, 130, 2, 2, false, Layout::Contiguous},
          {40, 24, 33, 45, 2, 1, false, Layout::Contiguous},  // Dv != D
          {13, 70, 5, 9, 1, 2, false, Layout::Contiguous},    // Dv > D
                                                              // Heads of the one-query-per-thread
                                                              // shader that are not whole vec4s
          {37, 22, 70, 45, 2, 1, false, Layout::Contiguous},
          {6, 10, 9, 33, 1, 1, true, Layout::Contiguous},
      });
}

// Each variant's largest heads (8-key tiles), and the VAEs' single 512-dim head over an 8x8
// latent, with a head just past the narrow variant's.
TEST(VulkanAttention, LargestSupportedHeads) {
  SD_REQUIRE_VULKAN(device);
  expect_cases_match(*device, {{256, 256, 19, 21, 1, 1, true, Layout::Contiguous},
                               {512, 512, 64, 64, 1, 2, false, Layout::Contiguous},
                               {257, 300, 7, 13, 2, 1, true, Layout::Contiguous}});
}

TEST(VulkanAttention, MasksHideKeysAndWholeRows) {
  SD_REQUIRE_VULKAN(device);
  expect_cases_match(*device,
                     {
                         // D, Dv, Lq, Lk, H, N, mask, layout
                         {40, 40, 77, 77, 2, 2, true, Layout::Contiguous},  // CLIP's causal mask
                         {64, 64, 130, 130, 1, 1, true, Layout::Contiguous},
                         {8, 8, 7, 77, 2, 2, true, Layout::Contiguous},
                         {128, 64, 33, 130, 2, 1, true, Layout::Contiguous},
                     });
}

TEST(VulkanAttention, PermutedViewsAreReadInPlace) {
  SD_REQUIRE_VULKAN(device);
  expect_cases_match(*device, {
                                  // D, Dv, Lq, Lk, H, N, mask, layout
                                  {40, 40, 33, 70, 3, 2, false, Layout::HeadSplit},
                                  {64, 64, 77, 77, 2, 1, true, Layout::HeadSplit},
                                  {24, 13, 20, 130, 2, 2, true, Layout::HeadSplit},
                                  {40, 24, 33, 45, 3, 2, true, Layout::Transposed},
                                  {64, 64, 7, 77, 2, 2, false, Layout::Transposed},
                              });
}

// Scores of +-2000, where exp overflows and underflows f32 a thousand times over: only a
// softmax relative to the running max survives. Integer q and k keep the dot products
// exact in f32, so the comparison is as tight as for small scores.
TEST(VulkanAttention, LargeScoresStayFinite) {
  SD_REQUIRE_VULKAN(device);
  for (bool mask : {false, true}) {
    GraphCase c;
    c.build = [mask](Context& ctx) {
      Tensor* q = ctx.new_tensor(DType::F32, {16, 37, 2, 1}, "q");
      Tensor* k = ctx.new_tensor(DType::F32, {16, 50, 2, 1}, "k");
      Tensor* v = ctx.new_tensor(DType::F32, {16, 50, 2, 1}, "v");
      Tensor* m = mask ? ctx.new_tensor(DType::F32, {50, 37}, "mask") : nullptr;
      return std::vector<Tensor*>{attention(ctx, q, k, v, m, 4.0f)};
    };
    c.fill = [](const Tensor& t, int leaf) {
      std::vector<float> x = sd::test::random_values(t.nelements(), 90 + leaf, -6.0f, 6.0f);
      if (t.name == "v") return x;
      // Rounded, so scores differ by whole multiples of 4 and ties between the top keys
      // happen; the mask shifts every other query's scores by -1000 (a second overflow hazard).
      for (size_t i = 0; i < x.size(); ++i) x[i] = std::round(x[i]);
      if (t.name == "mask")
        for (size_t i = 0; i < x.size(); ++i) x[i] = (i / t.ne[0]) % 2 ? -1000.0f : x[i];
      return x;
    };
    SCOPED_TRACE(mask ? "with mask" : "without mask");
    test::expect_matches_reference(*device, c, kAtol, kRtol);
  }
}

// bf16 precision permits rounding but does not ask for it: the shader computes in f32.
TEST(VulkanAttention, Bf16PrecisionIsComputedInF32) {
  SD_REQUIRE_VULKAN(device);
  test::expect_matches_reference(
      *device, attn_case({40, 40, 33, 70, 2, 1, true, Layout::HeadSplit}, AttentionPrecision::BF16),
      kAtol, kRtol);
}

TEST(VulkanAttention, HeadsBeyondTheShaderAreDeclined) {
  const VulkanOp* op = find_op(Op::Attention);
  ASSERT_NE(op, nullptr);
  Context ctx;
  auto node = [&](int64_t d, int64_t dv, int64_t lq) {
    Tensor* q = ctx.new_tensor(DType::F32, {d, lq, 2, 1}, "q");
    Tensor* k = ctx.new_tensor(DType::F32, {d, 9, 2, 1}, "k");
    Tensor* v = ctx.new_tensor(DType::F32, {dv, 9, 2, 1}, "v");
    return attention(ctx, q, k, v, nullptr, 1.0f);
  };
  EXPECT_TRUE(op->supports(*node(256, 256, 5)));
  EXPECT_TRUE(op->supports(*node(512, 512, 5)));
  EXPECT_FALSE(op->supports(*node(513, 64, 5)));
  EXPECT_FALSE(op->supports(*node(64, 513, 5)));
  // The widest variant takes 8 queries per workgroup.
  EXPECT_TRUE(op->supports(*node(300, 300, 8 * 65535)));
  EXPECT_FALSE(op->supports(*node(300, 300, 8 * 65535 + 1)));
  // More query blocks than one dispatch dimension holds: of 64 queries up to 64 dims, of
  // 32 up to 128, of 16 up to 256.
  EXPECT_TRUE(op->supports(*node(8, 8, 64 * 65535)));
  EXPECT_FALSE(op->supports(*node(8, 8, 64 * 65535 + 1)));
  EXPECT_TRUE(op->supports(*node(80, 80, 32 * 65535)));
  EXPECT_FALSE(op->supports(*node(80, 80, 32 * 65535 + 1)));
  EXPECT_TRUE(op->supports(*node(200, 200, 16 * 65535)));
  EXPECT_FALSE(op->supports(*node(200, 200, 16 * 65535 + 1)));
}

}  // namespace
}  // namespace sd::vulkan
