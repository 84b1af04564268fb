// The blocked weight packer against oneDNN's own reorder into the layout its GEMM asked
// for: the same bytes, padding included, for f32 and bf16 weights of the shapes models
// have and of odd ones (K not a multiple of the block, an odd K for bf16 pairs, fewer
// than 64 outputs, rows further apart than K).
#include "backend/cpu/weight_packing.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/dnnl_state.h"

namespace sd {
namespace {

using dnnl::memory;
using dt = memory::data_type;

// The weights layout oneDNN's matmul wants for `rows` x K activations and K x N weights.
memory::desc gemm_weights_layout(DnnlState& st, int64_t rows, int64_t K, int64_t N, dt type) {
  dnnl::matmul::primitive_desc pd(
      dnnl::matmul::desc(memory::desc({rows, K}, type, memory::format_tag::ab),
                         memory::desc({K, N}, type, memory::format_tag::any),
                         memory::desc({rows, N}, dt::f32, memory::format_tag::ab)),
      st.engine);
  return pd.weights_desc();
}

// Packs N rows of K random values `stride` values apart both ways; returns whether the
// packer took the layout (and then checked the bytes).
bool packs_like_the_reorder(int64_t rows, int64_t K, int64_t N, int64_t stride, dt type) {
  DnnlState st;
  const memory::desc layout = gemm_weights_layout(st, rows, K, N, type);
  if (!packs_as_blocked_rows(layout)) return false;
  const size_t es = type == dt::f32 ? 4 : 2;
  std::vector<uint8_t> src(static_cast<size_t>(N * stride) * es);
  uint32_t s = 12345;
  for (auto& b : src) {
    s = s * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(s >> 24);
  }
  const memory::desc user({K, N}, type, memory::dims{1, stride});
  std::vector<uint8_t> expected(layout.get_size(), 0xAB), packed(layout.get_size(), 0xCD);
  st.reorder(DnnlKey("test-reorder"), user, src.data(), memory(layout, st.engine, expected.data()));
  CpuContext ctx;
  ctx.threads = 2;
  pack_blocked_rows(ctx, src.data(), static_cast<size_t>(stride) * es, layout, packed.data());
  EXPECT_EQ(0, std::memcmp(expected.data(), packed.data(), expected.size()));
  return true;
}

TEST(WeightPacking, SameBytesAsOneDnnsReorder) {
  DnnlState probe;
  if (!packs_as_blocked_rows(gemm_weights_layout(probe, 512, 1280, 1280, dt::f32)))
    GTEST_SKIP() << "this CPU's GEMM wants another layout, or it has no AVX-512";
  struct Case {
    int64_t rows, K, N, stride;
  };
  const Case cases[] = {
      {512, 1280, 1280, 1280},  // SD's third level, classifier-free guidance
      {8192, 320, 1280, 320},  {2048, 5120, 1280, 5120}, {512, 1280, 320, 1280}, {512, 77, 100, 77},
      {512, 75, 64, 80},       {300, 40, 77, 41},        {600, 3, 5, 3},         {512, 33, 130, 40},
  };
  int taken = 0;
  for (dt type : {dt::f32, dt::bf16}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(testing::Message() << (type == dt::f32 ? "f32" : "bf16") << " rows " << c.rows
                                      << " K " << c.K << " N " << c.N << " stride " << c.stride);
      taken += packs_like_the_reorder(c.rows, c.K, c.N, c.stride, type);
    }
  }
  // The models' shapes (the first four) must take the fast packer in both dtypes.
  EXPECT_GE(taken, 8);
}

TEST(WeightPacking, RefusesOtherLayouts) {
  const memory::desc plain({64, 64}, dt::f32, memory::format_tag::ab);
  EXPECT_FALSE(packs_as_blocked_rows(plain));
  const memory::desc f16({64, 64}, dt::f16, memory::format_tag::BA16a64b);
  EXPECT_FALSE(packs_as_blocked_rows(f16));
  const memory::desc three_d({2, 64, 64}, dt::f32, memory::format_tag::abc);
  EXPECT_FALSE(packs_as_blocked_rows(three_d));
}

}  // namespace
}  // namespace sd
