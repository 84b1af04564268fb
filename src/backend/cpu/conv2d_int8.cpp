// A convolution as im2col and a GEMM, in 8-bit codes. The weight's rows run over
// (kernel y, kernel x, input channel) with input channels innermost, so each 32-value
// block of a row is 32 channels of one tap. Each input pixel's channels are therefore
// quantized once (per 32 channels: codes, a scale, a code sum), and unfolding for a tap
// copies that pixel's codes: the 9 taps of a 3x3 kernel share one quantization instead of
// rounding 9 copies of the input. Output rows are unfolded in bands (kBandBytes of codes)
// so the unfolded input stays small whatever the image size; the GEMM's product is
// pixel-major and becomes channel planes (with the bias) at the end of each band.
#include "backend/cpu/conv2d_int8.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/dnnl_state.h"
#include "backend/cpu/int8_gemm.h"
#include "tensor/ops/conv2d.h"
#include "tensor/quant/block_codes.h"
#include "tensor/quant/quant.h"

namespace sd {

namespace {

// Unfolded code bytes per band of output rows.
constexpr int64_t kBandBytes = int64_t{8} << 20;
// Winograd's per-band bytes of tap products (f32, 16 per tile and output channel): one band
// holds a 512x512 image pair's largest level, so each tap's weights are packed once.
constexpr int64_t kWinogradBandBytes = int64_t{48} << 20;

// The bias as M floats (zeros without one).
std::vector<float> bias_values(const Tensor* bias, int64_t M) {
  std::vector<float> values(static_cast<size_t>(M), 0.0f);
  if (bias)
    for (int64_t m = 0; m < M; ++m)
      dequantize_row(bias->type, static_cast<const char*>(bias->data) + m * bias->nb[0],
                     &values[static_cast<size_t>(m)], 1);
  return values;
}

// Codes of every pixel of one image: pixel p's C codes at codes + p * C, its C / 32
// scales and sums at scale / sum + p * (C / 32).
struct PixelCodes {
  int8_t* codes;
  float* scale;
  float* sum;  // int32 (weights with a zero point) or f32 (with offsets), as Int8Rows
};

void quantize_pixels(CpuContext& ctx, DType type, const Tensor* x, int64_t n,
                     const PixelCodes& px) {
  const int64_t W = x->ne[0], H = x->ne[1], C = x->ne[2], nbc = C / kCodeBlock;
  const auto* base = static_cast<const char*>(x->data) + n * x->nb[3];
#pragma omp parallel num_threads(ctx.threads)
  {
    std::vector<float> row(static_cast<size_t>(W * C));  // row y as [W][C]
#pragma omp for schedule(static)
    for (int64_t y = 0; y < H; ++y) {
      for (int64_t c = 0; c < C; ++c) {
        const char* src = base + y * x->nb[1] + c * x->nb[2];
        for (int64_t i = 0; i < W; ++i)
          row[static_cast<size_t>(i * C + c)] = *reinterpret_cast<const float*>(src + i * x->nb[0]);
      }
      for (int64_t i = 0; i < W; ++i) {
        const int64_t p = y * W + i;
        int8_quantize_row(type, row.data() + i * C, C, px.codes + p * C, px.scale + p * nbc,
                          reinterpret_cast<int32_t*>(px.sum + p * nbc), px.sum + p * nbc);
      }
    }
  }
}

// The int8 GEMM's CPUs have AVX-512: the transforms run 16 channels per vector.
#define SD_WINOGRAD_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

// v[k][c] = (B^T d B)[k] for one tile's 4x4 patch d[a][b] (each C channels), with
// B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]; C a multiple of 16.
SD_WINOGRAD_TARGET void transform_input_tile(const float* const d[4][4], int64_t C, float* v) {
  for (int64_t c = 0; c < C; c += 16) {
    __m512 t[4][4];
    for (int b = 0; b < 4; ++b) {
      const __m512 x0 = _mm512_loadu_ps(d[0][b] + c), x1 = _mm512_loadu_ps(d[1][b] + c);
      const __m512 x2 = _mm512_loadu_ps(d[2][b] + c), x3 = _mm512_loadu_ps(d[3][b] + c);
      t[0][b] = _mm512_sub_ps(x0, x2);
      t[1][b] = _mm512_add_ps(x1, x2);
      t[2][b] = _mm512_sub_ps(x2, x1);
      t[3][b] = _mm512_sub_ps(x1, x3);
    }
    for (int a = 0; a < 4; ++a) {
      _mm512_storeu_ps(v + (4 * a + 0) * C + c, _mm512_sub_ps(t[a][0], t[a][2]));
      _mm512_storeu_ps(v + (4 * a + 1) * C + c, _mm512_add_ps(t[a][1], t[a][2]));
      _mm512_storeu_ps(v + (4 * a + 2) * C + c, _mm512_sub_ps(t[a][2], t[a][1]));
      _mm512_storeu_ps(v + (4 * a + 3) * C + c, _mm512_sub_ps(t[a][1], t[a][3]));
    }
  }
}

// One tile's 2x2 outputs per output channel from its 16 tap sums s[k * stride + m]:
// A^T m A with A^T = [1 1 1 0; 0 1 -1 -1]; y0 / y1 get output rows 0 / 1 as [2][M].
SD_WINOGRAD_TARGET void transform_output_tile(const float* s, int64_t stride, int64_t M, float* y0,
                                              float* y1) {
  for (int64_t m = 0; m < M; m += 16) {
    const __mmask16 lanes = static_cast<__mmask16>(M - m >= 16 ? 0xffff : (1u << (M - m)) - 1);
    __m512 r[2][4];
    for (int j = 0; j < 4; ++j) {
      const __m512 s0 = _mm512_maskz_loadu_ps(lanes, s + j * stride + m);
      const __m512 s1 = _mm512_maskz_loadu_ps(lanes, s + (4 + j) * stride + m);
      const __m512 s2 = _mm512_maskz_loadu_ps(lanes, s + (8 + j) * stride + m);
      const __m512 s3 = _mm512_maskz_loadu_ps(lanes, s + (12 + j) * stride + m);
      r[0][j] = _mm512_add_ps(_mm512_add_ps(s0, s1), s2);
      r[1][j] = _mm512_sub_ps(_mm512_sub_ps(s1, s2), s3);
    }
    float* rows[2] = {y0, y1};
    for (int a = 0; a < 2; ++a) {
      _mm512_mask_storeu_ps(rows[a] + m, lanes,
                            _mm512_add_ps(_mm512_add_ps(r[a][0], r[a][1]), r[a][2]));
      _mm512_mask_storeu_ps(rows[a] + M + m, lanes,
                            _mm512_sub_ps(_mm512_sub_ps(r[a][1], r[a][2]), r[a][3]));
    }
  }
}

// Winograd F(2x2, 3x3) on the int8 GEMM (the layout: ops/conv2d.h). The images are first
// made channels-last in f32, so every step below runs along contiguous channels. Then per
// band of tile rows (the images' tile rows one after another, so a batch shares a band):
//  1. each tile's 16 transformed inputs B^T d B per channel (sums of four inputs), each
//     tap's row of Cin values quantized;
//  2. 16 GEMMs, tap k's codes (tiles x Cin) against the kernel's tap k (Cout x Cin);
//  3. each tile's 16 sums per output channel become its 2x2 outputs, A^T m A, gathered per
//     tile row and written as channel planes with the bias.
// The rounding to 8 bits happens after the input transform, so each product carries one
// rounding of each operand, as in the direct kernel.
void winograd_f2x3_int8(CpuContext& ctx, Tensor* dst, const Conv2dParams& p) {
  const Tensor* x = dst->src[0];
  const Tensor* w = dst->src[1];
  const Tensor* bias = dst->src[2];
  DnnlState& st = *ctx.dnnl;
  const DType type = w->type;
  const int64_t W = x->ne[0], H = x->ne[1], C = x->ne[2], N = x->ne[3];
  const int64_t OW = dst->ne[0], OH = dst->ne[1], M = dst->ne[2];
  const int64_t nbc = C / kCodeBlock, TX = (OW + 1) / 2, TY = (OH + 1) / 2;
  const size_t row_bytes = w->nb[1];  // one tap of one output channel: C values

  const std::vector<float> bias_f32 = bias_values(bias, M);
  const std::vector<float> zeros(static_cast<size_t>(C), 0.0f);  // a pixel in the padding

  // Tile rows per band: the products (16 M floats per tile) within kWinogradBandBytes.
  const int64_t per_tile_row = TX * 16 * std::max(C, M * 4);
  const int64_t band_rows = std::clamp<int64_t>(kWinogradBandBytes / per_tile_row, 1, N * TY);
  const int64_t band_tiles = band_rows * TX;
  auto* images = static_cast<float*>(
      st.scratch(DnnlScratch::Src, static_cast<size_t>(N * W * H * C) * sizeof(float)));
  auto* code_buf = static_cast<char*>(
      st.scratch(DnnlScratch::Columns, static_cast<size_t>(16 * band_tiles * (C + 8 * nbc) + 64)));
  auto* codes = reinterpret_cast<int8_t*>(code_buf);                        // [16][tiles][C]
  auto* scales = reinterpret_cast<float*>(code_buf + 16 * band_tiles * C);  // [16][tiles][nbc]
  auto* sums = scales + 16 * band_tiles * nbc;
  auto* product = static_cast<float*>(
      st.scratch(DnnlScratch::Product, static_cast<size_t>(16 * band_tiles * M) * sizeof(float)));
  // Per thread: one tile's transformed inputs [16][C], or a tile row's outputs [2][2 TX][M]
  // (scratch, not fresh memory: these are needed on every call).
  const int64_t per_thread = std::max(16 * C, 4 * TX * M);
  auto* thread_buf = static_cast<float*>(st.scratch(
      DnnlScratch::Kernel, static_cast<size_t>(ctx.threads * per_thread) * sizeof(float)));

  // The images channels-last: pixel (ix, iy) of image n at images + ((n H + iy) W + ix) C,
  // transposed in 16 x 16 blocks of channels and columns.
  constexpr int64_t kB = 16;
#pragma omp parallel for collapse(2) num_threads(ctx.threads) schedule(static)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t iy = 0; iy < H; ++iy) {
      const auto* row = static_cast<const char*>(x->data) + n * x->nb[3] + iy * x->nb[1];
      float* to = images + (n * H + iy) * W * C;
      for (int64_t c0 = 0; c0 < C; c0 += kB)
        for (int64_t ix0 = 0; ix0 < W; ix0 += kB)
          for (int64_t c = c0; c < std::min(C, c0 + kB); ++c)
            for (int64_t ix = ix0; ix < std::min(W, ix0 + kB); ++ix)
              to[ix * C + c] = *reinterpret_cast<const float*>(row + c * x->nb[2] + ix * x->nb[0]);
    }
  auto pixel = [&](int64_t n, int64_t iy, int64_t ix) {
    return iy >= 0 && iy < H && ix >= 0 && ix < W ? images + ((n * H + iy) * W + ix) * C
                                                  : zeros.data();
  };
  const int64_t all_rows = N * TY;  // tile rows of every image
  for (int64_t g0 = 0; g0 < all_rows; g0 += band_rows) {
    const int64_t rows = std::min(band_rows, all_rows - g0), T = rows * TX;
    // 1. Transform and quantize, tile by tile.
#pragma omp parallel num_threads(ctx.threads)
    {
      float* v = thread_buf + omp_get_thread_num() * per_thread;  // [k][C]
#pragma omp for schedule(static)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t g = g0 + t / TX, n = g / TY;
        const int64_t iy0 = 2 * (g % TY) - p.p1, ix0 = 2 * (t % TX) - p.p0;
        const float* d[4][4];
        for (int a = 0; a < 4; ++a)
          for (int b = 0; b < 4; ++b) d[a][b] = pixel(n, iy0 + a, ix0 + b);
        transform_input_tile(d, C, v);
        for (int64_t k = 0; k < 16; ++k) {
          const int64_t q = k * T + t;  // tap k's row of this tile
          int8_quantize_row(type, v + k * C, C, codes + q * C, scales + q * nbc,
                            reinterpret_cast<int32_t*>(sums + q * nbc), sums + q * nbc);
        }
      }
    }
    // 2. The 16 GEMMs: tap k's rows are every 16th row of the weight.
    for (int64_t k = 0; k < 16; ++k) {
      const Int8Rows tap{codes + k * T * C,
                         scales + k * T * nbc,
                         reinterpret_cast<const int32_t*>(sums + k * T * nbc),
                         sums + k * T * nbc,
                         C,
                         nbc};
      int8_gemm_rows(ctx, type, static_cast<const char*>(w->data) + k * row_bytes, 16 * row_bytes,
                     M, tap, T, product + k * T * M);
    }
    // 3. Output transform, a tile row at a time: its two output rows as [2][2 TX][M],
    // then as channel planes.
#pragma omp parallel num_threads(ctx.threads)
    {
      float* y = thread_buf + omp_get_thread_num() * per_thread;
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t tx = 0; tx < TX; ++tx) {
          transform_output_tile(product + (r * TX + tx) * M, T * M, M, y + (2 * tx) * M,
                                y + (2 * TX + 2 * tx) * M);
        }
        const int64_t g = g0 + r, oy = 2 * (g % TY);
        float* out = static_cast<float*>(dst->data) + (g / TY) * (OW * OH * M);
        for (int64_t m = 0; m < M; ++m) {
          const float b = bias_f32[static_cast<size_t>(m)];
          for (int a = 0; a < 2 && oy + a < OH; ++a) {
            float* o = out + (m * OH + oy + a) * OW;
            const float* from = y + a * 2 * TX * M + m;
            for (int64_t ox = 0; ox < OW; ++ox) o[ox] = from[ox * M] + b;
          }
        }
      }
    }
  }
}

}  // namespace

bool cpu_conv2d_int8(CpuContext& ctx, Tensor* dst) {
  const Tensor* x = dst->src[0];
  const Tensor* w = dst->src[1];
  const Tensor* bias = dst->src[2];
  const Conv2dParams p = conv2d_params(dst);
  if (p.layout == ConvKernelLayout::Standard || !int8_gemm_available() ||
      !int8_gemm_supports(w->type) || x->type != DType::F32 || !w->is_contiguous() ||
      !dst->is_contiguous() || p.cin_per_group % kCodeBlock != 0)
    return false;
  if (p.layout == ConvKernelLayout::WinogradF2x3) {
    winograd_f2x3_int8(ctx, dst, p);
    return true;
  }
  DnnlState& st = *ctx.dnnl;
  const int64_t W = x->ne[0], H = x->ne[1], C = x->ne[2], N = x->ne[3];
  const int64_t OW = dst->ne[0], OH = dst->ne[1], M = dst->ne[2];
  const int64_t nbc = C / kCodeBlock, taps = p.kw * p.kh, K = taps * C, nb = taps * nbc;

  const std::vector<float> bias_f32 = bias_values(bias, M);

  // Scratch: the image's pixel codes, a band's unfolded rows, the band's product.
  const int64_t pixels = W * H;
  auto* pixel_buf = static_cast<char*>(
      st.scratch(DnnlScratch::Src, static_cast<size_t>(pixels * (C + 8 * nbc) + 64)));
  const PixelCodes px{reinterpret_cast<int8_t*>(pixel_buf + pixels * 8 * nbc),
                      reinterpret_cast<float*>(pixel_buf),
                      reinterpret_cast<float*>(pixel_buf) + pixels * nbc};
  const int64_t band_rows = std::clamp<int64_t>(kBandBytes / std::max<int64_t>(1, OW * K), 1, OH);
  const int64_t band_pixels = band_rows * OW;
  auto* band_buf = static_cast<char*>(
      st.scratch(DnnlScratch::Columns, static_cast<size_t>(band_pixels * (K + 8 * nb) + 64)));
  auto* band_scale = reinterpret_cast<float*>(band_buf);
  auto* band_sum = band_scale + band_pixels * nb;
  auto* band_codes = reinterpret_cast<int8_t*>(band_sum + band_pixels * nb);
  auto* product = static_cast<float*>(
      st.scratch(DnnlScratch::Product, static_cast<size_t>(band_pixels * M) * sizeof(float)));

  for (int64_t n = 0; n < N; ++n) {
    quantize_pixels(ctx, w->type, x, n, px);
    for (int64_t y0 = 0; y0 < OH; y0 += band_rows) {
      const int64_t rows = std::min(band_rows, OH - y0), P = rows * OW;
      // Unfold: output pixel q's row is, tap by tap, its input pixel's codes (zeros where
      // the tap falls in the padding).
#pragma omp parallel for num_threads(ctx.threads) schedule(static)
      for (int64_t q = 0; q < P; ++q) {
        const int64_t oy = y0 + q / OW, ox = q % OW;
        int8_t* codes = band_codes + q * K;
        float* scale = band_scale + q * nb;
        float* sum = band_sum + q * nb;
        for (int64_t ky = 0; ky < p.kh; ++ky)
          for (int64_t kx = 0; kx < p.kw; ++kx) {
            const int64_t t = ky * p.kw + kx;
            const int64_t iy = oy * p.s1 - p.p1 + ky * p.d1, ix = ox * p.s0 - p.p0 + kx * p.d0;
            if (iy < 0 || iy >= H || ix < 0 || ix >= W) {
              std::memset(codes + t * C, 0, static_cast<size_t>(C));
              std::memset(scale + t * nbc, 0, static_cast<size_t>(nbc) * sizeof(float));
              std::memset(sum + t * nbc, 0, static_cast<size_t>(nbc) * sizeof(float));
              continue;
            }
            const int64_t src = iy * W + ix;
            std::memcpy(codes + t * C, px.codes + src * C, static_cast<size_t>(C));
            std::memcpy(scale + t * nbc, px.scale + src * nbc, static_cast<size_t>(nbc) * 4);
            std::memcpy(sum + t * nbc, px.sum + src * nbc, static_cast<size_t>(nbc) * 4);
          }
      }
      const Int8Rows band{band_codes, band_scale, reinterpret_cast<const int32_t*>(band_sum),
                          band_sum,   K,          nb};
      int8_gemm_rows(ctx, w->type, w->data, w->nb[3], M, band, P, product);
      // [P][M] -> channel planes, with the bias.
      auto* out = static_cast<float*>(dst->data) + n * (OW * OH * M) + y0 * OW;
#pragma omp parallel for num_threads(ctx.threads) schedule(static)
      for (int64_t m = 0; m < M; ++m) {
        float* plane = out + m * OW * OH;
        const float b = bias_f32[static_cast<size_t>(m)];
        for (int64_t q = 0; q < P; ++q) plane[q] = product[q * M + m] + b;
      }
    }
  }
  return true;
}

}  // namespace sd
