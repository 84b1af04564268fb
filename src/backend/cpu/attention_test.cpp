// Fast fused attention against the reference kernel: SD's head sizes, Lq != Lk, Dv != D,
// sizes that cut query and key blocks, masks with -inf, and strided q/k/v views.
#include <gtest/gtest.h>

#include <hwy/targets.h>

#include <algorithm>
#include <cmath>

#include "simd_test_util.h"
#include "tensor/error.h"
#include "tensor/ops/attention.h"
#include "tensor/ops/view.h"

namespace sd {
namespace {

// Both kernels sum the D products of a score in f32 vs double; the softmax is computed
// online (running max, rescaled sums) against the reference's two passes, and hwy::Exp is
// within a few ulps. Outputs are averages of values in [-1, 1], so an absolute bound fits:
// observed errors stay below 8e-7 for these sizes; 3e-6 leaves margin and still catches a
// single misplaced key (which moves an output by ~1 / Lk >= 1e-3).
constexpr double kAtol = 3e-6;

struct AttnCase {
  int64_t D, Dv, Lq, Lk, H, N;
  bool mask;
  // q, k and v as permuted views of [D, H, L, N] projections, as SD's attention splits
  // heads, with v transposed ([L, Dv] leaf) so its rows are strided too.
  bool views;
  // > 0: the mask is block-diagonal, windows of this many tokens (a vision tower's), so
  // most key blocks are hidden from whole query blocks and skipped.
  int64_t window = 0;
};

// bf16 precision rounds q, k, v and the softmax weights to bf16 (8 significant bits, a
// relative step of 2^-8): with these values' scores of a few units the outputs move by up
// to ~0.01 (observed up to 7e-3 on these sizes); 0.03 still catches a misplaced key or a
// lost pair of dims, which move outputs by 0.1 or more.
constexpr double kBf16Atol = 0.03;

test::GraphCase attn_case(const AttnCase& a,
                          AttentionPrecision precision = AttentionPrecision::F32) {
  test::GraphCase c;
  c.build = [=](Context& ctx) {
    Tensor *q, *k, *v;
    if (a.views) {
      auto split_heads = [&](int64_t d, int64_t l, const char* name) {
        return permute(ctx, ctx.new_tensor(DType::F32, {d, a.H, l, a.N}, name), {0, 2, 1, 3});
      };
      q = split_heads(a.D, a.Lq, "q_p");
      k = split_heads(a.D, a.Lk, "k_p");
      v = permute(ctx, ctx.new_tensor(DType::F32, {a.Lk, a.Dv, a.H, a.N}, "v_t"), {1, 0, 2, 3});
    } else {
      q = ctx.new_tensor(DType::F32, {a.D, a.Lq, a.H, a.N}, "q");
      k = ctx.new_tensor(DType::F32, {a.D, a.Lk, a.H, a.N}, "k");
      v = ctx.new_tensor(DType::F32, {a.Dv, a.Lk, a.H, a.N}, "v");
    }
    Tensor* mask = a.mask ? ctx.new_tensor(DType::F32, {a.Lk, a.Lq}, "mask") : nullptr;
    return std::vector<Tensor*>{
        attention(ctx, q, k, v, mask, 1.0f / std::sqrt(static_cast<float>(a.D)), precision)};
  };
  // Scores of a few units, as trained networks produce. The mask is causal where Lq == Lk;
  // otherwise it hides every third key, and for every fourth query the first 200 keys
  // (whole 128-key blocks with nothing visible before the first key that is). Query 1 sees
  // no key at all.
  c.fill = [window = a.window](const Tensor& t, int leaf) {
    std::vector<float> x = test::random_values(t.nelements(), 40 + leaf, -2.0f, 2.0f);
    if (t.name != "mask") return x;
    const int64_t lk = t.ne[0], lq = t.ne[1];
    for (int64_t i = 0; i < lq; ++i)
      for (int64_t j = 0; j < lk; ++j) {
        const bool hidden = window > 0 ? i / window != j / window
                            : lq == lk ? j > i
                                       : j % 3 == 0 || (i % 4 == 2 && j < 200);
        x[i * lk + j] = hidden || i == 1 ? -INFINITY : 0.5f * x[i * lk + j];
      }
    return x;
  };
  return c;
}

TEST(CpuAttention, SelfAndCrossAttentionShapes) {
  const AttnCase cases[] = {
      // D, Dv, Lq, Lk, H, N, mask, views
      {40, 40, 64, 64, 2, 2, false, false},  // SD1.5 head size
      {40, 40, 50, 77, 2, 1, false, false},  // cross-attention to 77 text tokens
      {64, 64, 77, 77, 2, 1, true, false},   // CLIP's causal mask
      {1, 1, 1, 1, 1, 1, false, false},     {7, 3, 5, 9, 3, 2, true, false},  // odd sizes, Dv != D
      {16, 24, 97, 300, 1, 1, true, false},  // Lq cuts a query block, Lk a 256-key block
  };
  for (const AttnCase& a : cases) {
    SCOPED_TRACE(testing::Message() << "D " << a.D << " Dv " << a.Dv << " Lq " << a.Lq << " Lk "
                                    << a.Lk << " mask " << a.mask);
    test::expect_fast_path(attn_case(a), kAtol, 0);
  }
}

// The kernel's register tiles differ per SIMD target (8 x 3 vectors on AVX-512, 4 x 3 on
// AVX2 and narrower); the tests above run only this machine's best target.
TEST(CpuAttention, EveryTargetMatchesTheReference) {
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    hwy::SetSupportedTargetsForTest(target);  // also resets the dispatch tables
    test::expect_fast_path(attn_case({13, 11, 37, 45, 2, 1, true, false}), kAtol, 0);
  }
  hwy::SetSupportedTargetsForTest(0);
}

// Windows of 100 tokens over 700: the key blocks of other windows are skipped, the blocks a
// window boundary cuts are read, in both precisions.
TEST(CpuAttention, BlockDiagonalMasksSkipHiddenKeyBlocks) {
  const AttnCase a{16, 16, 700, 700, 2, 1, true, false, 100};
  test::expect_fast_path(attn_case(a), kAtol, 0);
  test::expect_fast_path(attn_case(a, AttentionPrecision::BF16), kBf16Atol, 0);
}

TEST(CpuAttention, StridedViews) {
  test::expect_fast_path(attn_case({40, 40, 33, 70, 3, 2, false, true}), kAtol, 0);
  test::expect_fast_path(attn_case({24, 13, 20, 20, 2, 1, true, true}), kAtol, 0);
}

// The bf16 kernel's pairs: odd head sizes and key counts pad a pair with zeros, blocks of
// 128 keys and 48 queries are cut, masks and strided views are read in place.
TEST(CpuAttention, Bf16PrecisionMatchesTheReference) {
  const AttnCase cases[] = {
      // D, Dv, Lq, Lk, H, N, mask, views
      {40, 40, 64, 64, 2, 2, false, false},  // SD1.5 head size
      {40, 40, 50, 77, 2, 1, false, false},  // cross-attention: an odd key count
      {64, 64, 77, 77, 2, 1, true, false},   // causal mask
      {1, 1, 1, 1, 1, 1, false, false},
      {7, 3, 5, 9, 3, 2, true, false},
      {16, 24, 97, 300, 1, 1, true, false},  // queries cut a block, keys a 128-key block
      {40, 40, 33, 70, 3, 2, false, true},
      {13, 11, 20, 21, 2, 1, true, true},
      // Queries are packed and outputs written 16 x 16 at a time: head sizes over 32 and 16
      // that are not multiples of them, 17 queries past the last full 16.
      {128, 128, 65, 33, 2, 1, false, false},
      {80, 47, 49, 40, 1, 2, true, false},
  };
  for (const AttnCase& a : cases) {
    SCOPED_TRACE(testing::Message() << "D " << a.D << " Dv " << a.Dv << " Lq " << a.Lq << " Lk "
                                    << a.Lk << " mask " << a.mask << " views " << a.views);
    test::expect_fast_path(attn_case(a, AttentionPrecision::BF16), kBf16Atol, 0);
  }
}

// Where the CPU has AVX512_BF16 the bf16 kernel runs (its rounding shows against the f32
// kernel); elsewhere the node falls back to the f32 kernel and matches it exactly.
TEST(CpuAttention, Bf16PrecisionUsesTheBf16KernelWhereAvailable) {
  const AttnCase a{40, 40, 96, 200, 2, 1, false, false};
  const auto f32 = test::run_case(attn_case(a), CpuKernels::Fast);
  const auto bf16 = test::run_case(attn_case(a, AttentionPrecision::BF16), CpuKernels::Fast);
  double diff = 0;
  for (size_t i = 0; i < f32[0].size(); ++i)
    diff = std::max(diff, static_cast<double>(std::fabs(f32[0][i] - bf16[0][i])));
  if (__builtin_cpu_supports("avx512bf16")) {
    EXPECT_GT(diff, 1e-5);
    EXPECT_LT(diff, kBf16Atol);
  } else {
    EXPECT_EQ(diff, 0.0);
  }
}

TEST(CpuAttention, PrecisionOutsideTheEnumIsRefused) {
  Context ctx;
  Tensor* q = ctx.new_tensor(DType::F32, {4, 3, 1, 1}, "q");
  EXPECT_THROW(attention(ctx, q, q, q, nullptr, 1.0f, static_cast<AttentionPrecision>(7)), Error);
}

}  // namespace
}  // namespace sd
