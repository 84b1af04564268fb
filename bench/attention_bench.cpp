// Fused attention, 8 heads, batch 2: Stable Diffusion 1.5's shapes at 512x512 (the first
// UNet stage's self-attention, 4096 tokens of head size 40, and its cross-attention to 77
// text tokens; the deeper stages' 1024 x 80 and 256 x 160), the DiTs' head sizes 64 and
// 128 over 4096 tokens, and SDXL's 16x16 level. FLOPs count the two GEMMs, 4 Lq Lk D per
// head; softmax is extra work.
// Second arg: precision, 0 f32, 1 bf16 (the bf16 kernel where the CPU has AVX512_BF16).
// Run: OMP_NUM_THREADS=2 sd-bench --benchmark_filter=Attention
#include <cmath>
#include <string>

#include "linalg_bench.h"
#include "tensor/ops/attention.h"

namespace sd {
namespace {

struct AttnShape {
  const char* name;
  int64_t Lq, Lk, D;
};

constexpr AttnShape kAttnShapes[] = {
    // SD 1.5 at 512x512: its four levels.
    {"self 4096x4096 d40", 4096, 4096, 40},
    {"cross 4096x77 d40", 4096, 77, 40},
    {"self 1024x1024 d80", 1024, 1024, 80},
    {"self 256x256 d160", 256, 256, 160},
    // The head sizes of SDXL, SD3 and Wan 2.1 1.3B (64) and of FLUX, Z-Image, Qwen-Image
    // and Wan 14B (128).
    {"self 4096x4096 d64", 4096, 4096, 64},
    {"self 4096x4096 d128", 4096, 4096, 128},
    // SDXL at 512x512: its 16x16 level's self- and cross-attention.
    {"self 256x256 d64", 256, 256, 64},
    {"cross 256x77 d64", 256, 77, 64},
};
constexpr int64_t kHeads = 8, kBatch = 2;

void BM_Attention(benchmark::State& state) {
  const AttnShape& s = kAttnShapes[state.range(0)];
  const double flops = 4.0 * s.Lq * s.Lk * s.D * kHeads * kBatch;
  bench::run_linalg_bench(
      state, flops,
      [&](Context& ctx) {
        Tensor* q = ctx.new_tensor(DType::F32, {s.D, s.Lq, kHeads, kBatch}, "q");
        Tensor* k = ctx.new_tensor(DType::F32, {s.D, s.Lk, kHeads, kBatch}, "k");
        Tensor* v = ctx.new_tensor(DType::F32, {s.D, s.Lk, kHeads, kBatch}, "v");
        return attention(ctx, q, k, v, nullptr, 1.0f / std::sqrt(static_cast<float>(s.D)),
                         static_cast<AttentionPrecision>(state.range(1)));
      },
      std::string(s.name) + (state.range(1) ? " bf16" : " f32"));
}

BENCHMARK(BM_Attention)
    ->ArgsProduct({{0, 1, 2, 3, 4, 5, 6, 7}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->ComputeStatistics("max", sd::bench::max_value);

}  // namespace
}  // namespace sd
