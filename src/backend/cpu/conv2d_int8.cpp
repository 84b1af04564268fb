// A convolution as im2col and a GEMM, in 8-bit codes. The weight's rows run over
// (kernel y, kernel x, input channel) with input channels innermost, so each 32-value
// block of a row is 32 channels of one tap. Each input pixel's channels are therefore
// quantized once (per 32 channels: codes, a scale, a code sum), and unfolding for a tap
// copies that pixel's codes: the 9 taps of a 3x3 kernel share one quantization instead of
// rounding 9 copies of the input. Output rows are unfolded in bands (kBandBytes of codes)
// so the unfolded input stays small whatever the image size; the GEMM's product is
// pixel-major and becomes channel planes (with the bias) at the end of each band.
#include "backend/cpu/conv2d_int8.h"

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

// Winograd F(2x2, 3x3) on the int8 GEMM (the layout: ops/conv2d.h). Per band of tile rows:
//  1. each tile's 4x4 input patch per channel becomes its 16 transformed values B^T d B
//     (sums of four inputs, in f32), and each tap's row of Cin values is quantized;
//  2. 16 GEMMs, tap k's codes (tiles x Cin) against the kernel's tap k (Cout x Cin);
//  3. each tile's 16 sums per output channel become its 2x2 outputs, A^T m A, plus bias.
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

  std::vector<float> bias_f32(static_cast<size_t>(M), 0.0f);
  if (bias)
    for (int64_t m = 0; m < M; ++m)
      dequantize_row(bias->type, static_cast<const char*>(bias->data) + m * bias->nb[0],
                     &bias_f32[static_cast<size_t>(m)], 1);

  // Tile rows per band: the codes (16 C per tile) and the products (16 M floats per tile)
  // within kBandBytes each.
  const int64_t per_tile_row = TX * 16 * std::max(C, M * 4);
  const int64_t band_rows = std::clamp<int64_t>(kBandBytes / per_tile_row, 1, TY);
  const int64_t band_tiles = band_rows * TX;
  auto* code_buf = static_cast<char*>(
      st.scratch(DnnlScratch::Columns, static_cast<size_t>(16 * band_tiles * (C + 8 * nbc) + 64)));
  auto* codes = reinterpret_cast<int8_t*>(code_buf);                        // [16][tiles][C]
  auto* scales = reinterpret_cast<float*>(code_buf + 16 * band_tiles * C);  // [16][tiles][nbc]
  auto* sums = scales + 16 * band_tiles * nbc;
  auto* product = static_cast<float*>(
      st.scratch(DnnlScratch::Product, static_cast<size_t>(16 * band_tiles * M) * sizeof(float)));

  for (int64_t n = 0; n < N; ++n) {
    const auto* xn = static_cast<const char*>(x->data) + n * x->nb[3];
    for (int64_t ty0 = 0; ty0 < TY; ty0 += band_rows) {
      const int64_t rows = std::min(band_rows, TY - ty0), T = rows * TX;
      // 1. Transform and quantize, one tile row at a time per thread.
#pragma omp parallel num_threads(ctx.threads)
      {
        std::vector<float> v(static_cast<size_t>(TX * 16 * C));  // [tx][k][C]
        std::vector<float> d(static_cast<size_t>(4 * (2 * TX + 2)));
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t ty = ty0 + r;
          for (int64_t c = 0; c < C; ++c) {
            // The 4 input rows under this tile row, zero outside the input.
            const int64_t span = 2 * TX + 2;
            for (int a = 0; a < 4; ++a) {
              const int64_t iy = 2 * ty - p.p1 + a;
              float* row = d.data() + a * span;
              const char* src = xn + iy * x->nb[1] + c * x->nb[2];
              for (int64_t i = 0; i < span; ++i) {
                const int64_t ix = i - p.p0;
                row[i] = iy >= 0 && iy < H && ix >= 0 && ix < W
                             ? *reinterpret_cast<const float*>(src + ix * x->nb[0])
                             : 0.0f;
              }
            }
            for (int64_t tx = 0; tx < TX; ++tx) {
              float t[4][4];
              for (int b = 0; b < 4; ++b) {
                const float d0 = d[0 * span + 2 * tx + b], d1 = d[1 * span + 2 * tx + b];
                const float d2 = d[2 * span + 2 * tx + b], d3 = d[3 * span + 2 * tx + b];
                t[0][b] = d0 - d2;
                t[1][b] = d1 + d2;
                t[2][b] = d2 - d1;
                t[3][b] = d1 - d3;
              }
              float* out = v.data() + tx * 16 * C + c;
              for (int a = 0; a < 4; ++a) {
                out[(4 * a + 0) * C] = t[a][0] - t[a][2];
                out[(4 * a + 1) * C] = t[a][1] + t[a][2];
                out[(4 * a + 2) * C] = t[a][2] - t[a][1];
                out[(4 * a + 3) * C] = t[a][1] - t[a][3];
              }
            }
          }
          for (int64_t tx = 0; tx < TX; ++tx)
            for (int64_t k = 0; k < 16; ++k) {
              const int64_t q = k * T + r * TX + tx;  // tap k's row of this tile
              int8_quantize_row(type, v.data() + (tx * 16 + k) * C, C, codes + q * C,
                                scales + q * nbc, reinterpret_cast<int32_t*>(sums + q * nbc),
                                sums + q * nbc);
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
      // 3. Output transform, one output channel plane at a time.
      auto* out = static_cast<float*>(dst->data) + n * (OW * OH * M);
#pragma omp parallel for num_threads(ctx.threads) schedule(static)
      for (int64_t m = 0; m < M; ++m) {
        float* plane = out + m * OW * OH;
        const float b = bias_f32[static_cast<size_t>(m)];
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t tx = 0; tx < TX; ++tx) {
            const int64_t t = r * TX + tx;
            float s[16];
            for (int k = 0; k < 16; ++k) s[k] = product[(k * T + t) * M + m];
            float rr[2][4];
            for (int j = 0; j < 4; ++j) {
              rr[0][j] = s[j] + s[4 + j] + s[8 + j];
              rr[1][j] = s[4 + j] - s[8 + j] - s[12 + j];
            }
            const int64_t oy = 2 * (ty0 + r), ox = 2 * tx;
            for (int a = 0; a < 2 && oy + a < OH; ++a) {
              float* o = plane + (oy + a) * OW + ox;
              o[0] = rr[a][0] + rr[a][1] + rr[a][2] + b;
              if (ox + 1 < OW) o[1] = rr[a][1] - rr[a][2] - rr[a][3] + b;
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

  std::vector<float> bias_f32(static_cast<size_t>(M), 0.0f);
  if (bias)
    for (int64_t m = 0; m < M; ++m)
      dequantize_row(bias->type, static_cast<const char*>(bias->data) + m * bias->nb[0],
                     &bias_f32[static_cast<size_t>(m)], 1);

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
