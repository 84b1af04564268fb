// The f16 GEMM as dot products along K: a register tile of kRows activation rows by
// kCols weight rows keeps one 16-lane accumulator per pair, each 16 weight values are
// widened once and multiplied into every row of the tile, and the lanes are summed at the
// end of K. Nothing is packed: weight rows are read in place (from the mapped file), and
// each thread takes its own columns, so every weight value is read once per row block.
#include "backend/cpu/f16_gemm.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <utility>

// GCC 12's AVX-512 reductions and masked loads start from _mm512_undefined_*(), which
// -W(maybe-)uninitialized reports at every use; nothing here reads an undefined lane.
#ifndef __clang__  // GCC-only warnings
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#define SD_F16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl")))

namespace sd {

namespace {

constexpr int kLanes = 16;
// Register tile: 4 rows x 6 weight rows, 24 accumulators, 4 activation vectors and the
// widened weight vector: 29 of the 32 vector registers.
constexpr int kRows = 4;
constexpr int kCols = 6;
// K is taken in chunks so that a block of activation rows (rows x chunk of f32) stays in
// the core's L2 while the thread's weight rows pass over it.
constexpr int64_t kChunk = 2048;
constexpr int64_t kRowBlockBytes = int64_t{768} << 10;

// One step of 16 values along K (fewer where `mask` says so) into the tile's accumulators.
template <int R, int C>
SD_F16_TARGET inline __attribute__((always_inline)) void dot_step(const float* x, int64_t ldx,
                                                                  const uint16_t* w, int64_t ldw,
                                                                  int64_t k, __mmask16 mask,
                                                                  __m512 (&acc)[R][C]) {
  __m512 xv[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) xv[r] = _mm512_maskz_loadu_ps(mask, x + r * ldx + k);
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) {
    const __m512 wv = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, w + c * ldw + k));
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r][c] = _mm512_fmadd_ps(xv[r], wv, acc[r][c]);
  }
}

// The lane sums of 8 vectors, in a tree of 128-bit and in-lane shuffles (23 instructions
// against about 8 for each vector alone): sums[i] = sum of v[i]'s 16 lanes.
SD_F16_TARGET inline __attribute__((always_inline)) void sum_lanes8(const __m512* v, float* sums) {
  __m512 half[4], quarter[2];
  for (int i = 0; i < 4; ++i)  // 256-bit halves: [v0 lo + hi, v1 lo + hi], ...
    half[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44),
                            _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xee));
  for (int i = 0; i < 2; ++i)  // 128-bit chunks: chunk j holds 4 partial sums of v[4i + j]
    quarter[i] = _mm512_add_ps(_mm512_shuffle_f32x4(half[2 * i], half[2 * i + 1], 0x88),
                               _mm512_shuffle_f32x4(half[2 * i], half[2 * i + 1], 0xdd));
  // Within each chunk j: v[j] and v[j + 4] two partial sums each, then one.
  const __m512 pairs = _mm512_add_ps(_mm512_unpacklo_ps(quarter[0], quarter[1]),
                                     _mm512_unpackhi_ps(quarter[0], quarter[1]));
  const __m512 total = _mm512_add_ps(pairs, _mm512_permute_ps(pairs, 0x4e));
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, total);
  for (int j = 0; j < 4; ++j) {
    sums[j] = lanes[4 * j];
    sums[j + 4] = lanes[4 * j + 1];
  }
}

// out[r * ldo + c] (+)= sum over k < K of x[r * ldx + k] * w[c * ldw + k], r < R, c < C.
template <int R, int C>
SD_F16_TARGET void dot_tile(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, int64_t K,
                            float* out, int64_t ldo, bool accumulate) {
  __m512 acc[R][C];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + kLanes <= K; k += kLanes) dot_step<R, C>(x, ldx, w, ldw, k, 0xffff, acc);
  if (k < K) dot_step<R, C>(x, ldx, w, ldw, k, static_cast<__mmask16>((1u << (K - k)) - 1), acc);
  // The tile's lane sums, eight accumulators at a time (zeros past the last).
  constexpr int kGroups = (R * C + 7) / 8;
  __m512 flat[kGroups * 8];
  float sums[kGroups * 8];
#pragma GCC unroll 32
  for (int i = 0; i < kGroups * 8; ++i)
    flat[i] = i < R * C ? acc[i / C][i % C] : _mm512_setzero_ps();
#pragma GCC unroll 4
  for (int g = 0; g < kGroups; ++g) sum_lanes8(flat + 8 * g, sums + 8 * g);
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      const float sum = sums[r * C + c];
      out[r * ldo + c] = accumulate ? out[r * ldo + c] + sum : sum;
    }
}

using TileKernel = void (*)(const float*, int64_t, const uint16_t*, int64_t, int64_t, float*,
                            int64_t, bool);

template <int... I>
constexpr std::array<TileKernel, sizeof...(I)> kernel_table(std::integer_sequence<int, I...>) {
  return {dot_tile<I / kCols + 1, I % kCols + 1>...};
}

// The kernel for a tile of `rows` rows and `cols` weight rows (at most kRows, kCols).
TileKernel pick_kernel(int rows, int cols) {
  static constexpr auto table = kernel_table(std::make_integer_sequence<int, kRows * kCols>());
  return table[(rows - 1) * kCols + cols - 1];
}

}  // namespace

bool f16_gemm_available() {
  static const bool available = [] {
    __builtin_cpu_init();
    // AVX-512F has the 512-bit f16 widening (vcvtph2ps) itself.
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
  }();
  return available;
}

void f16_gemm(CpuContext& ctx, const void* w, size_t w_row_bytes, int64_t M, int64_t K,
              const float* x, int64_t N, float* out) {
  const auto* weights = static_cast<const uint16_t*>(w);
  const int64_t ldw = static_cast<int64_t>(w_row_bytes / sizeof(uint16_t));
  const int64_t chunk = std::min(K, kChunk);
  const int64_t row_block =
      std::max<int64_t>(kRows, std::min(N, kRowBlockBytes / (4 * chunk)) / kRows * kRows);
  const int64_t groups = (M + kCols - 1) / kCols;
  // Each thread its own run of column groups: a weight row is read by one thread only.
#pragma omp parallel num_threads(ctx.threads)
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t g0 = groups * t / threads, g1 = groups * (t + 1) / threads;
    for (int64_t k0 = 0; k0 < K; k0 += chunk) {
      const int64_t kc = std::min(chunk, K - k0);
      for (int64_t n0 = 0; n0 < N; n0 += row_block) {
        const int64_t n1 = std::min(N, n0 + row_block);
        for (int64_t g = g0; g < g1; ++g) {
          const int64_t m = g * kCols;
          const int cols = static_cast<int>(std::min<int64_t>(kCols, M - m));
          for (int64_t n = n0; n < n1; n += kRows) {
            const int rows = static_cast<int>(std::min<int64_t>(kRows, n1 - n));
            pick_kernel(rows, cols)(x + n * K + k0, K, weights + m * ldw + k0, ldw, kc,
                                    out + n * M + m, M, k0 > 0);
          }
        }
      }
    }
  }
}

}  // namespace sd
