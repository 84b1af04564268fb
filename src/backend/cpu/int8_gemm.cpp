// The int8 GEMM in three steps:
//  1. activations: each row's 32-value blocks become int8 codes with one f32 scale (the
//     block's max / 127) and the sum of their codes (for the weight's offset);
//  2. weights, a tile of columns at a time: each 16 columns become a panel whose 64-byte
//     vectors hold 4 consecutive codes of all 16 columns, the layout vpdpbusd multiplies
//     against 4 broadcast activation codes, with each block's 16 scales and offsets;
//  3. a register tile of rows x panels accumulates each block in int32, then adds it in
//     f32 times the two scales.
// Panels are built per call from the weight's own bytes and bounded by kTileBytes: no
// weight is ever held whole in another form.
#include "backend/cpu/int8_gemm.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "backend/cpu/dnnl_state.h"
#include "tensor/quant/block_codes.h"
#include "tensor/quant/blocks.h"

// GCC 12's AVX-512 reductions, masked stores and shuffles start from _mm512_undefined_*(),
// which -W(maybe-)uninitialized reports at every use; nothing here reads an undefined lane.
#ifndef __clang__  // GCC-only warnings
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#define SD_INT8_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))

namespace sd {

namespace {

constexpr int kLanes = 16;                        // columns per panel (int32/f32 lanes)
constexpr int kBlockBytes = kCodeBlock * kLanes;  // one block's codes in a panel
// Panel bytes per weight tile: the tile stays in the last-level cache while every row
// block passes over it.
constexpr int64_t kTileBytes = int64_t{4} << 20;
// Activation code bytes one thread takes at a time (rows x K): they stay in its L2 while
// the register tiles sweep the weight tile.
constexpr int64_t kRowBlockBytes = int64_t{192} << 10;
// Register tile: kRows rows x kPanels panels of 16 columns.
constexpr int kRows = 6;
constexpr int kPanels = 2;

// A tile of weight columns as panels (step 2).
struct Panels {
  const uint8_t* codes;  // [G][nb][kBlockBytes]
  const float* scale;    // [G][nb][16]
  const float* offset;   // [G][nb][16], or null with a zero point
  int64_t nb;
};

SD_INT8_TARGET void quantize_row_int8(const float* x, int64_t K, int zero_point, int8_t* codes,
                                      float* scale, int32_t* zsum, float* fsum) {
  for (int64_t b = 0; b < K / kCodeBlock; ++b) {
    const float* v = x + b * kCodeBlock;
    const __m512 v0 = _mm512_loadu_ps(v), v1 = _mm512_loadu_ps(v + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float d = amax / 127.0f;
    const __m512 inv = _mm512_set1_ps(d > 0.0f ? 1.0f / d : 0.0f);
    const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, inv));
    const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, inv));
    int8_t* out = codes + b * kCodeBlock;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_cvtsepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16), _mm512_cvtsepi32_epi8(q1));
    const int32_t sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
    scale[b] = d;
    // Wrapping arithmetic: non-finite inputs give codes whose sum may not fit (their
    // result is garbage either way, and must not be undefined).
    if (zero_point >= 0)
      zsum[b] =
          static_cast<int32_t>(0u - static_cast<uint32_t>(zero_point) * static_cast<uint32_t>(sum));
    else
      fsum[b] = d * static_cast<float>(sum);
  }
}

// One block of a panel from 16 rows of 32 codes each (row c at first + c * stride), as
// vector shuffles instead of 4-byte copies: rows c and c + 8 share a vector, an 8 x 8
// transpose of 4-byte groups runs in each half, and a two-source permute puts the four
// quarter rows of group j together. `flip` is xor-ed into every code (0x80 makes q8_0's
// signed codes unsigned).
SD_INT8_TARGET void transpose_block(const char* first, size_t stride, uint8_t* out, __m512i flip) {
  const __m512i low = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
  const __m512i high = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  __m512i z[8];
  for (int c = 0; c < 8; ++c) {
    const auto* lo = reinterpret_cast<const __m256i*>(first + c * stride);
    const auto* hi = reinterpret_cast<const __m256i*>(first + (c + 8) * stride);
    z[c] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(lo)),
                              _mm256_loadu_si256(hi), 1);
  }
  __m512i t[8], u[8];
  for (int c = 0; c < 8; c += 2) {
    t[c] = _mm512_unpacklo_epi32(z[c], z[c + 1]);
    t[c + 1] = _mm512_unpackhi_epi32(z[c], z[c + 1]);
  }
  for (int h = 0; h < 8; h += 4) {  // rows 0-3 (with 8-11), then 4-7 (with 12-15)
    u[h + 0] = _mm512_unpacklo_epi64(t[h], t[h + 2]);      // groups 0 and 4
    u[h + 1] = _mm512_unpackhi_epi64(t[h], t[h + 2]);      // 1 and 5
    u[h + 2] = _mm512_unpacklo_epi64(t[h + 1], t[h + 3]);  // 2 and 6
    u[h + 3] = _mm512_unpackhi_epi64(t[h + 1], t[h + 3]);  // 3 and 7
  }
  for (int j = 0; j < 4; ++j) {
    const __m512i first_half = _mm512_permutex2var_epi64(u[j], low, u[4 + j]);
    const __m512i second_half = _mm512_permutex2var_epi64(u[j], high, u[4 + j]);
    _mm512_storeu_si512(out + j * kLanes * 4, _mm512_xor_si512(first_half, flip));
    _mm512_storeu_si512(out + (j + 4) * kLanes * 4, _mm512_xor_si512(second_half, flip));
  }
}

// Builds panel g of a tile whose first column is weight row `m0`: 16 weight rows decoded
// to codes, then regrouped 4 codes at a time. Columns past M get zero codes, scales and
// offsets.
SD_INT8_TARGET void pack_panel(DType type, const char* w, size_t w_row_bytes, int64_t M, int64_t K,
                               int64_t m0, int64_t g, bool offsets, uint8_t* codes, float* scale,
                               float* offset, std::vector<uint8_t>& row_codes,
                               std::vector<float>& row_floats) {
  const int64_t nb = K / kCodeBlock;
  row_codes.resize(static_cast<size_t>(kLanes * K));
  row_floats.resize(static_cast<size_t>(kLanes * 2 * nb));
  uint8_t* panel = codes + g * nb * kBlockBytes;
  float* panel_scale = scale + g * nb * kLanes;
  float* panel_offset = offsets ? offset + g * nb * kLanes : nullptr;
  const int64_t first_row = m0 + g * kLanes;
  const int rows = static_cast<int>(std::clamp<int64_t>(M - first_row, 0, kLanes));
  for (int c = 0; c < kLanes; ++c) {
    uint8_t* row = row_codes.data() + c * K;
    float* row_scale = row_floats.data() + c * 2 * nb;
    float* row_offset = row_scale + nb;
    if (c < rows) {
      decode_block_codes(type, w + (first_row + c) * w_row_bytes, K, row, row_scale,
                         offsets ? row_offset : nullptr);
    } else {
      std::memset(row, 0, static_cast<size_t>(K));
      std::fill(row_scale, row_scale + 2 * nb, 0.0f);  // scales and offsets
    }
    for (int64_t b = 0; b < nb; ++b) {
      panel_scale[b * kLanes + c] = row_scale[b];
      if (offsets) panel_offset[b * kLanes + c] = row_offset[b];
    }
  }
  const auto* first = reinterpret_cast<const char*>(row_codes.data());
  for (int64_t b = 0; b < nb; ++b)
    transpose_block(first + b * kCodeBlock, static_cast<size_t>(K), panel + b * kBlockBytes,
                    _mm512_setzero_si512());
}

// pack_panel for a q8_0 weight whose 16 columns all exist, straight from the weight's
// blocks (the int8 convolution's small levels pack more weight bytes than they multiply);
// +128 makes the codes unsigned. The 16 scales are one gather.
SD_INT8_TARGET void pack_panel_q8_0(const char* w, size_t w_row_bytes, int64_t first_row,
                                    int64_t nb, uint8_t* codes, float* scale) {
  const char* rows = w + first_row * static_cast<int64_t>(w_row_bytes);
  const __m512i row_offsets =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int>(w_row_bytes)));
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < nb; ++b) {
    const char* block = rows + b * static_cast<int64_t>(sizeof(quant::BlockQ8_0));
    const __m512i d16 = _mm512_i32gather_epi32(row_offsets, block, 1);
    _mm512_storeu_ps(scale + b * kLanes, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(d16)));
    transpose_block(block + 2, w_row_bytes, codes + b * kBlockBytes, bias);
  }
}

// R rows x P panels over all of K, written to out (row stride ldo); `last_cols` of the
// last panel's 16 columns are stored.
template <int R, int P, bool kOffsets>
SD_INT8_TARGET void tile_kernel(const Int8Rows& x, int64_t n0, const Panels& w, int64_t g0,
                                float* out, int64_t ldo, int last_cols) {
  const int64_t nb = w.nb;
  const int64_t panel_codes = nb * kBlockBytes, panel_floats = nb * kLanes;
  __m512 acc[R][P];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
  const uint8_t* wc = w.codes + g0 * panel_codes;
  const float* ws = w.scale + g0 * panel_floats;
  const float* wo = kOffsets ? w.offset + g0 * panel_floats : nullptr;
  const int8_t* xc[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) xc[r] = x.codes + (n0 + r) * x.K;
  for (int64_t b = 0; b < nb; ++b) {
    __m512i dot[R][P];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      // The zero point's share of the block, folded into the integer sum.
      const __m512i init =
          kOffsets ? _mm512_setzero_si512() : _mm512_set1_epi32(x.zsum[(n0 + r) * nb + b]);
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) dot[r][p] = init;
    }
    const uint8_t* wb = wc + b * kBlockBytes;
#pragma GCC unroll 8
    for (int j = 0; j < kCodeBlock / 4; ++j) {
      __m512i wv[P];
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) wv[p] = _mm512_loadu_si512(wb + p * panel_codes + j * kLanes * 4);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        int32_t four;
        std::memcpy(&four, xc[r] + b * kCodeBlock + j * 4, 4);
        const __m512i xv = _mm512_set1_epi32(four);
#pragma GCC unroll 8
        for (int p = 0; p < P; ++p) dot[r][p] = _mm512_dpbusd_epi32(dot[r][p], wv[p], xv);
      }
    }
    __m512 scale[P], offset[P];
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) {
      scale[p] = _mm512_loadu_ps(ws + p * panel_floats + b * kLanes);
      if (kOffsets) offset[p] = _mm512_loadu_ps(wo + p * panel_floats + b * kLanes);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const int64_t i = (n0 + r) * nb + b;
      const __m512 xs = _mm512_set1_ps(x.scale[i]);
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p)
        acc[r][p] =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[r][p]), _mm512_mul_ps(scale[p], xs), acc[r][p]);
      if (kOffsets) {
        const __m512 xsum = _mm512_set1_ps(x.fsum[i]);
#pragma GCC unroll 8
        for (int p = 0; p < P; ++p) acc[r][p] = _mm512_fmadd_ps(offset[p], xsum, acc[r][p]);
      }
    }
  }
  const __mmask16 last = static_cast<__mmask16>((1u << last_cols) - 1);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) {
      float* o = out + r * ldo + p * kLanes;
      if (p == P - 1 && last_cols < kLanes)
        _mm512_mask_storeu_ps(o, last, acc[r][p]);
      else
        _mm512_storeu_ps(o, acc[r][p]);
    }
}

using TileKernel = void (*)(const Int8Rows&, int64_t, const Panels&, int64_t, float*, int64_t, int);

template <bool kOffsets, int... I>
constexpr std::array<TileKernel, sizeof...(I)> kernel_table(std::integer_sequence<int, I...>) {
  return {tile_kernel<I / kPanels + 1, I % kPanels + 1, kOffsets>...};
}

// The kernel for a tile of `rows` rows and `panels` panels (at most kRows, kPanels).
template <bool kOffsets>
TileKernel pick_kernel(int rows, int panels) {
  static constexpr auto table =
      kernel_table<kOffsets>(std::make_integer_sequence<int, kRows * kPanels>());
  return table[(rows - 1) * kPanels + panels - 1];
}

// Rows [n0, n1) against the tile's columns [m0, m0 + mc) of out (row stride M).
void run_row_block(const Int8Rows& x, int64_t n0, int64_t n1, const Panels& w, int64_t m0,
                   int64_t mc, int64_t M, float* out, bool offsets) {
  const int64_t groups = (mc + kLanes - 1) / kLanes;
  for (int64_t g = 0; g < groups; g += kPanels) {
    const int panels = static_cast<int>(std::min<int64_t>(kPanels, groups - g));
    const int64_t cols_left = mc - (g + panels - 1) * kLanes;
    const int last_cols = static_cast<int>(std::min<int64_t>(kLanes, cols_left));
    for (int64_t n = n0; n < n1; n += kRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kRows, n1 - n));
      const TileKernel kernel =
          offsets ? pick_kernel<true>(rows, panels) : pick_kernel<false>(rows, panels);
      kernel(x, n, w, g, out + n * M + m0 + g * kLanes, M, last_cols);
    }
  }
}

}  // namespace

bool int8_gemm_available() {
  static const bool available = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vnni");
  }();
  return available;
}

bool int8_gemm_supports(DType type) {
  return has_block_codes(type);
}

void int8_quantize_row(DType type, const float* x, int64_t K, int8_t* codes, float* scale,
                       int32_t* zsum, float* fsum) {
  quantize_row_int8(x, K, block_code_zero_point(type), codes, scale, zsum, fsum);
}

void int8_gemm(CpuContext& ctx, DType type, const void* w, size_t w_row_bytes, int64_t M, int64_t K,
               const float* x, int64_t N, float* out) {
  DnnlState& st = *ctx.dnnl;
  const int64_t nb = K / kCodeBlock;
  const int zero_point = block_code_zero_point(type);

  // Step 1: activation codes, scales and sums in one scratch slot.
  const size_t code_bytes = static_cast<size_t>(N * K);
  const size_t sums_bytes = static_cast<size_t>(N * nb) * sizeof(float);
  auto* xbuf = static_cast<char*>(st.scratch(DnnlScratch::Codes, code_bytes + 2 * sums_bytes + 64));
  auto* xscale = reinterpret_cast<float*>(xbuf + (code_bytes + 63) / 64 * 64);
  auto* xsum = xscale + N * nb;
  auto* xcodes = reinterpret_cast<int8_t*>(xbuf);
#pragma omp parallel for num_threads(ctx.threads) schedule(static)
  for (int64_t n = 0; n < N; ++n)
    quantize_row_int8(x + n * K, K, zero_point, xcodes + n * K, xscale + n * nb,
                      reinterpret_cast<int32_t*>(xsum) + n * nb, xsum + n * nb);
  const Int8Rows rows{xcodes, xscale, reinterpret_cast<const int32_t*>(xsum), xsum, K, nb};
  int8_gemm_rows(ctx, type, w, w_row_bytes, M, rows, N, out);
}

void int8_gemm_rows(CpuContext& ctx, DType type, const void* w, size_t w_row_bytes, int64_t M,
                    const Int8Rows& rows, int64_t N, float* out) {
  DnnlState& st = *ctx.dnnl;
  const int threads = ctx.threads;
  const int64_t K = rows.K, nb = rows.nb;
  const bool offsets = block_code_zero_point(type) < 0;

  // Step 2 and 3, one tile of columns at a time.
  const int64_t panel_bytes = nb * (kBlockBytes + (offsets ? 2 : 1) * kLanes * 4);
  const int64_t tile_groups =
      std::max<int64_t>(kPanels, kTileBytes / panel_bytes / kPanels * kPanels);
  const int64_t total_groups = (M + kLanes - 1) / kLanes;
  const int64_t groups_per_tile = std::min(tile_groups, total_groups);
  auto* tile = static_cast<char*>(st.scratch(DnnlScratch::Stage, groups_per_tile * panel_bytes));
  auto* pcodes = reinterpret_cast<uint8_t*>(tile);
  auto* pscale = reinterpret_cast<float*>(tile + groups_per_tile * nb * kBlockBytes);
  float* poffset = offsets ? pscale + groups_per_tile * nb * kLanes : nullptr;
  const Panels panels{pcodes, pscale, poffset, nb};
  const auto* wbytes = static_cast<const char*>(w);
  // Row blocks that fit a thread's L2, and at least one per thread where N allows it (a
  // few hundred rows would otherwise be one block, computed by one thread).
  const int64_t per_thread = (N + threads - 1) / threads;
  const int64_t row_block = std::max<int64_t>(
      kRows,
      std::min(kRowBlockBytes / K, (per_thread + kRows - 1) / kRows * kRows) / kRows * kRows);
  const int64_t row_blocks = (N + row_block - 1) / row_block;
  for (int64_t m0 = 0; m0 < M; m0 += groups_per_tile * kLanes) {
    const int64_t mc = std::min(groups_per_tile * kLanes, M - m0);
    const int64_t groups = (mc + kLanes - 1) / kLanes;
#pragma omp parallel num_threads(threads)
    {
      std::vector<uint8_t> row_codes;
      std::vector<float> row_floats;
#pragma omp for schedule(static)
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t first_row = m0 + g * kLanes;
        if (type == DType::Q8_0 && first_row + kLanes <= M)
          pack_panel_q8_0(wbytes, w_row_bytes, first_row, nb, pcodes + g * nb * kBlockBytes,
                          pscale + g * nb * kLanes);
        else
          pack_panel(type, wbytes, w_row_bytes, M, K, m0, g, offsets, pcodes, pscale, poffset,
                     row_codes, row_floats);
      }
#pragma omp for schedule(dynamic, 1)
      for (int64_t rb = 0; rb < row_blocks; ++rb)
        run_row_block(rows, rb * row_block, std::min(N, (rb + 1) * row_block), panels, m0, mc, M,
                      out, offsets);
    }
  }
}

}  // namespace sd
