// MatMul at Stable Diffusion 1.5 (512x512) shapes, per weight dtype: the UNet's first
// stage projections (4096 tokens x 320 <-> 1280 channels, batch 2 for classifier-free
// guidance), the third stage's 256-token 1280 x 1280 projections, a timestep embedding's
// projection (one row per batch) and CLIP's 77-token 768 x 768 projection.
// Run: OMP_NUM_THREADS=2 sd-bench --benchmark_filter=MatMul (SD_CPU_INT8=0 runs the
// block types on bf16 tiles instead of the int8 GEMM, for a side-by-side ratio).
#include "linalg_bench.h"
#include "tensor/ops/matmul.h"

namespace sd {
namespace {

struct MatmulShape {
  const char* name;
  int64_t K, M, N, batch;
};

constexpr MatmulShape kMatmulShapes[] = {
    {"unet 4096x320->1280", 320, 1280, 4096, 2},
    {"unet 4096x1280->320", 1280, 320, 4096, 2},
    {"clip 77x768->768", 768, 768, 77, 1},
    {"unet 256x1280->1280", 1280, 1280, 256, 2},
    {"unet time embedding 1280->1280", 1280, 1280, 1, 2},
    // SDXL's 10-block transformers at its third stage (256 tokens at 512x512), where most
    // of its weights are: the GEGLU projection and the feed-forward output.
    {"sdxl 256x1280->10240", 1280, 10240, 256, 2},
    {"sdxl 256x5120->1280", 5120, 1280, 256, 2},
    // FLUX.1 at 512x512 (4096 image + 512 text tokens, width 3072): attention projections,
    // the MLP's up and down projections, where nearly all of its weights are.
    {"flux 4608x3072->3072", 3072, 3072, 4608, 1},
    {"flux 4608x3072->12288", 3072, 12288, 4608, 1},
    {"flux 4608x12288->3072", 12288, 3072, 4608, 1},
    // SDXL's second stage at 512x512 (1024 tokens, width 640), and Wan 2.1 1.3B's
    // feed-forward at 320x192 x 9 frames (720 tokens) and at a test's 96 tokens.
    {"sdxl 1024x640->5120", 640, 5120, 1024, 2},
    {"wan 720x1536->8960", 1536, 8960, 720, 1},
    {"wan 96x8960->1536", 8960, 1536, 96, 2},
    // SDXL's cross-attention keys and values: its 77 context tokens projected in each of
    // its 70 transformer blocks.
    {"sdxl context 77x2048->1280", 2048, 1280, 77, 2},
};
constexpr DType kMatmulTypes[] = {DType::F32, DType::BF16, DType::F16, DType::Q8_0, DType::Q4_K};

// Args: shape index, weight dtype index.
void BM_MatMul(benchmark::State& state) {
  const MatmulShape& s = kMatmulShapes[state.range(0)];
  const DType t = kMatmulTypes[state.range(1)];
  if (s.K % block_size(t) != 0) {
    state.SkipWithError("K is not a multiple of the dtype's block size");
    return;
  }
  const double flops = 2.0 * s.K * s.M * s.N * s.batch;
  bench::run_linalg_bench(
      state, flops,
      [&](Context& ctx) {
        return matmul(ctx, bench::weight(ctx, t, {s.K, s.M}, "w"),
                      ctx.new_tensor(DType::F32, {s.K, s.N, s.batch}, "x"));
      },
      std::string(s.name) + " " + std::string(dtype_name(t)));
}

BENCHMARK(BM_MatMul)
    ->ArgsProduct({{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}, {0, 1, 2, 3, 4}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->ComputeStatistics("max", sd::bench::max_value);

// A chain of 12 products through SDXL's feed-forward widths (1280 -> 5120 -> 1280, six
// times), with weights the packed-weight cache does not keep (157 MB in bf16), so each
// is read from memory and packed on every call, as a large model's are beyond the cache.
// Args: GEMM rows (512: SDXL's 16x16 level with guidance), weight dtype index.
void BM_MatMulUncachedChain(benchmark::State& state) {
  const int64_t rows = state.range(0);
  const DType t = kMatmulTypes[state.range(1)];
  constexpr int64_t kWidth = 1280, kInner = 5120, kPairs = 6;
  const double flops = 2.0 * rows * kWidth * kInner * 2 * kPairs;
  bench::run_linalg_bench(
      state, flops,
      [&](Context& ctx) {
        Tensor* x = ctx.new_tensor(DType::F32, {kWidth, rows}, "x");
        for (int64_t i = 0; i < 2 * kPairs; ++i) {
          const int64_t in = i % 2 ? kInner : kWidth, out = i % 2 ? kWidth : kInner;
          Tensor* w = ctx.new_tensor(t, {in, out}, "w");
          w->flags |= kFlagInput;  // rewritten between calls for all the cache knows
          x = matmul(ctx, w, x);
        }
        return x;
      },
      std::to_string(rows) + " rows " + std::string(dtype_name(t)));
}

BENCHMARK(BM_MatMulUncachedChain)
    ->ArgsProduct({{512, 2048}, {1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->ComputeStatistics("max", sd::bench::max_value);

}  // namespace
}  // namespace sd
