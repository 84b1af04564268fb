// Winograd's minimal filtering F(2x2, 3x3) (Lavin and Gray 2015) in bf16: each 2x2 block
// of outputs is A^T [(G g G^T) . (B^T d B)] A, where g is a 3x3 filter and d the 4x4 input
// patch under the block. The 16 element-wise products, summed over input channels, are 16
// GEMMs, U[k] (Cout x Cin) times V[k] (Cin x tiles): 16 multiplies per 4 outputs where the
// direct method does 36, so a 3x3 convolution runs 2.25x fewer multiplies.
//
// oneDNN 2.6 has Winograd only in f32, so the transforms are ours and the 16 GEMMs are one
// batched oneDNN bf16 matmul. The transforms read and write our NCHW tensors directly:
// tiles sit in vector lanes along a row, so no layout reorder runs on either side (the
// direct bf16 kernel reorders into nhwc and back).
//
// Precision: B and A hold only 0 and +-1, so the input transform is sums of four inputs,
// rounded once to bf16; G holds halves, so the weight transform is rounded once too. Each
// product thus carries bf16 rounding of its two operands, as in the direct bf16 kernel,
// and sums are f32. (F(4x4, 3x3) would save more multiplies but its transforms hold
// fractions and larger constants that bf16 rounding turns into visible error.)
//
// Transformed weights are 16/9 the size of the weights. Caching all of the UNet's raised
// the bf16 sampling peak from 3.26 to 4.09 GB (the direct kernel's packed copies are 1x);
// making all per call cost 0.2-0.3 s of a 1.1 s UNet call's convolutions. So they are
// made per call into scratch on a weight's first use, and cached from its second use
// while the weight cache holds at most DnnlState::winograd_cache_limit: the UNet's are
// reused every step, and its sampling peak stays at 3.69 GB (2.67 s per step against
// 3.20 s uncached); a VAE's are used once per image, and caching them would only add
// fresh memory to fault in. Winograd beats the direct kernel from 16x16 outputs up
// (DnnlState::winograd_bf16_min_pixels) when it has 64 output channels or more
// (DnnlState::winograd_bf16_min_out_channels).
//
// Upsampling convolutions (a nearest 2x upscale, then this 3x3 convolution with padding 1)
// read the upscale's source: each tile's 4x4 patch repeats its middle row and column, so
// 7 of the 16 transformed inputs are zero and 9 GEMMs do the work of 16 (the VAE decode's
// two largest convolutions; 2.70 -> 2.45 s for the decode).
#include "backend/cpu/conv2d_winograd_bf16.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include <omp.h>

#include "backend/cpu/dnnl_state.h"
#include "tensor/float16.h"
#include "tensor/ops/conv2d.h"
#include "tensor/quant/quant.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SD_HAVE_WINOGRAD_BF16 1
#define SD_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))
#endif

namespace sd {

#ifdef SD_HAVE_WINOGRAD_BF16
// GCC 12's AVX-512 headers start some intrinsics from a deliberately undefined vector,
// which its own -Wuninitialized then reports at every use.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#ifndef __clang__  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
namespace {

using dnnl::memory;
using dt = memory::data_type;

constexpr int64_t kLanes = 16;  // f32 lanes of a 512-bit vector
constexpr int64_t kTaps = 16;   // 4x4 transformed values per tile
// The plane of U, V and C that holds tap 4 i + j. An upsampled input (below) leaves the
// taps with i = 2 or j = 2 zero; they go last, so that its GEMMs are a batch over the
// first kUpsampledTaps planes.
constexpr int kPlane[kTaps] = {0, 1, 9, 2, 3, 4, 10, 5, 11, 12, 13, 14, 6, 7, 15, 8};
constexpr int64_t kUpsampledTaps = 9;
// Elements between the end of U[k], V[k] or C[k] and the start of the next one. The
// transforms touch all 16 at once; unskewed, their distance is often a multiple of 4 KiB,
// so all 16 map to the same L1 cache set and evict each other.
constexpr int64_t kSkew = 64 + 16;

struct WinogradShape {
  int64_t W, H, cin, N;  // input
  int64_t OW, OH, cout;  // output
  int64_t p0, p1;        // left and top padding
  int64_t TX, TY;        // 2x2 tiles per output row pair, tile rows per image
  // The input is a nearest 2x upscale of a W/2 x H/2 source (read instead), padding 1.
  bool upsampled;
  int64_t taps() const { return upsampled ? kUpsampledTaps : kTaps; }
  // Elements from U[k] to U[k + 1] (skewed, as V's and C's).
  int64_t u_stride() const { return cout * cin + kSkew; }
};

SD_BF16_TARGET inline __attribute__((always_inline)) void store_bf16(uint16_t* to, __m512 v,
                                                                     __mmask16 m) {
  const auto h = (__m256i)_mm512_cvtneps_pbh(v);
  if (m == 0xffff) {  // a plain store: masked ones are slower on some CPUs (AMD Zen 4)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(to), h);
  } else {
    _mm256_mask_storeu_epi16(to, m, h);
  }
}

inline __mmask16 first_lanes(int64_t n) {
  return static_cast<__mmask16>(n >= kLanes ? 0xffff : n <= 0 ? 0 : (1u << n) - 1);
}

// Lanes l of a vector loaded from column `from` of a row of W values that lie inside it,
// 0 <= from + l < W.
inline __mmask16 lanes_inside(int64_t from, int64_t W) {
  const __mmask16 below = from >= 0 ? 0xffff : static_cast<__mmask16>(0xffff << -from);
  return static_cast<__mmask16>(below & first_lanes(W - from));
}

// U[k][co][ci] = (G g G^T)[k] for the filter g of output channel co and input channel ci,
// with G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]; 16 input channels per vector. This is
// output channel co's part; base is the weights, contiguous [co][ci][ky][kx].
SD_BF16_TARGET void transform_filters(const uint16_t* base, const WinogradShape& s, int64_t co,
                                      uint16_t* u) {
  const int64_t plane = s.u_stride();
  for (int64_t ci = 0; ci < s.cin; ci += kLanes) {
    const int64_t n = std::min(kLanes, s.cin - ci);
    // The 16 filters' 144 taps, contiguous, to f32; then each tap across the filters.
    alignas(64) float aos[kLanes * 9];
    const uint16_t* src = base + (co * s.cin + ci) * 9;
    if (n == kLanes) {
      for (int j = 0; j < 9; ++j) {
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + kLanes * j));
        _mm512_store_ps(aos + kLanes * j,
                        _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
      }
    } else {  // the last, partial block: zeros past its filters
      for (int64_t i = 0; i < kLanes * 9; ++i) aos[i] = i < n * 9 ? bf16_to_f32(src[i]) : 0.0f;
    }
    const __m512i filters =
        _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                           _mm512_set1_epi32(9));
    __m512 f[3][3], gg[4][3];
    for (int t = 0; t < 9; ++t)
      f[t / 3][t % 3] =
          _mm512_i32gather_ps(_mm512_add_epi32(filters, _mm512_set1_epi32(t)), aos, 4);
    const __m512 half = _mm512_set1_ps(0.5f);
    for (int kx = 0; kx < 3; ++kx) {  // G g
      const __m512 outer = _mm512_add_ps(f[0][kx], f[2][kx]);
      gg[0][kx] = f[0][kx];
      gg[1][kx] = _mm512_mul_ps(half, _mm512_add_ps(outer, f[1][kx]));
      gg[2][kx] = _mm512_mul_ps(half, _mm512_sub_ps(outer, f[1][kx]));
      gg[3][kx] = f[2][kx];
    }
    uint16_t* out = u + co * s.cin + ci;
    const __mmask16 m = first_lanes(n);
    for (int i = 0; i < 4; ++i) {  // (G g) G^T
      const __m512 outer = _mm512_add_ps(gg[i][0], gg[i][2]);
      store_bf16(out + kPlane[4 * i] * plane, gg[i][0], m);
      store_bf16(out + kPlane[4 * i + 1] * plane,
                 _mm512_mul_ps(half, _mm512_add_ps(outer, gg[i][1])), m);
      store_bf16(out + kPlane[4 * i + 2] * plane,
                 _mm512_mul_ps(half, _mm512_sub_ps(outer, gg[i][1])), m);
      store_bf16(out + kPlane[4 * i + 3] * plane, gg[i][2], m);
    }
  }
}

// The parallel loop stays outside the AVX-512 function: Clang does not pass a function's
// target attribute on to the OpenMP region it outlines.
void transform_weights(const Tensor* w, const WinogradShape& s, uint16_t* u, int threads) {
  const auto* base = static_cast<const uint16_t*>(w->data);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t co = 0; co < s.cout; ++co) transform_filters(base, s, co, u);
}

// Columns c, c + 2, ... (`even`) and c + 1, c + 3, ... (`odd`) of input row `row`, 16 of
// each from column c on, with zeros outside the row's W columns. Masked lanes are not
// read, so c may start before the row (left padding) or run past its end.
SD_BF16_TARGET inline __attribute__((always_inline)) void load_columns(const float* row, int64_t c,
                                                                       int64_t W, __m512& even,
                                                                       __m512& odd) {
  const __m512i evens = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odds = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  __m512 a, b;
  if (c >= 0 && c + 2 * kLanes <= W) {  // inside the row: plain loads
    a = _mm512_loadu_ps(row + c);
    b = _mm512_loadu_ps(row + c + kLanes);
  } else {
    a = _mm512_maskz_loadu_ps(lanes_inside(c, W), row + c);
    b = _mm512_maskz_loadu_ps(lanes_inside(c + kLanes, W), row + c + kLanes);
  }
  even = _mm512_permutex2var_ps(a, evens, b);
  odd = _mm512_permutex2var_ps(a, odds, b);
}

// V[k][ci][t] = (B^T d B)[k] for the tiles of one tile row of channel ci, d the 4x4 patch
// of tile t, with B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]. `v` points at
// V[0][ci][first tile of the row]; `stride` is the distance between V[k] and V[k + 1].
SD_BF16_TARGET void transform_input_row(const WinogradShape& s, const float* plane, int64_t ty,
                                        uint16_t* v, int64_t stride) {
  for (int64_t tx = 0; tx < s.TX; tx += kLanes) {
    const __mmask16 m = first_lanes(s.TX - tx);
    const int64_t c = 2 * tx - s.p0;  // the first tile's first input column
    __m512 d[4][4];
    for (int r = 0; r < 4; ++r) {
      const int64_t iy = 2 * ty - s.p1 + r;
      if (iy < 0 || iy >= s.H) {
        for (auto& col : d[r]) col = _mm512_setzero_ps();
        continue;
      }
      const float* row = plane + iy * s.W;
      load_columns(row, c, s.W, d[r][0], d[r][1]);
      load_columns(row, c + 2, s.W, d[r][2], d[r][3]);
    }
    __m512 t[4][4];  // B^T d
    for (int col = 0; col < 4; ++col) {
      t[0][col] = _mm512_sub_ps(d[0][col], d[2][col]);
      t[1][col] = _mm512_add_ps(d[1][col], d[2][col]);
      t[2][col] = _mm512_sub_ps(d[2][col], d[1][col]);
      t[3][col] = _mm512_sub_ps(d[1][col], d[3][col]);
    }
    for (int i = 0; i < 4; ++i) {  // (B^T d) B
      uint16_t* at = v + tx;
      store_bf16(at + kPlane[4 * i] * stride, _mm512_sub_ps(t[i][0], t[i][2]), m);
      store_bf16(at + kPlane[4 * i + 1] * stride, _mm512_add_ps(t[i][1], t[i][2]), m);
      store_bf16(at + kPlane[4 * i + 2] * stride, _mm512_sub_ps(t[i][2], t[i][1]), m);
      store_bf16(at + kPlane[4 * i + 3] * stride, _mm512_sub_ps(t[i][1], t[i][3]), m);
    }
  }
}

// The same for an input that is a nearest 2x upscale of `source` (W/2 x H/2), padding 1.
// Tile (tx, ty)'s 4x4 patch then repeats its middle: rows ty - 1, ty, ty, ty + 1 of the
// source and the same columns, so B^T d B has zeros wherever i or j is 2 and the other
// nine taps come from a 3x3 source patch, three plain loads per row (no deinterleaving).
SD_BF16_TARGET void transform_input_row_upsampled(const WinogradShape& s, const float* source,
                                                  int64_t ty, uint16_t* v, int64_t stride) {
  const int64_t SW = s.W / 2, SH = s.H / 2;
  for (int64_t tx = 0; tx < s.TX; tx += kLanes) {
    const __mmask16 m = first_lanes(s.TX - tx);
    // d B for source rows ty - 1, ty, ty + 1: columns (tx - 1) - tx, 2 tx, tx - (tx + 1)
    // for the 16 tiles from tx on (tile t's columns are t - 1, t, t, t + 1).
    __m512 db[3][3];
    for (int r = 0; r < 3; ++r) {
      const int64_t sy = ty - 1 + r;
      if (sy < 0 || sy >= SH) {
        for (auto& col : db[r]) col = _mm512_setzero_ps();
        continue;
      }
      const float* row = source + sy * SW;
      __m512 left, mid, right;
      if (tx >= 1 && tx + kLanes + 1 <= SW) {  // inside the row: plain loads
        left = _mm512_loadu_ps(row + tx - 1);
        mid = _mm512_loadu_ps(row + tx);
        right = _mm512_loadu_ps(row + tx + 1);
      } else {
        left = _mm512_maskz_loadu_ps(lanes_inside(tx - 1, SW), row + tx - 1);
        mid = _mm512_maskz_loadu_ps(lanes_inside(tx, SW), row + tx);
        right = _mm512_maskz_loadu_ps(lanes_inside(tx + 1, SW), row + tx + 1);
      }
      db[r][0] = _mm512_sub_ps(left, mid);
      db[r][1] = _mm512_add_ps(mid, mid);
      db[r][2] = _mm512_sub_ps(mid, right);
    }
    for (int j = 0; j < 3; ++j) {  // B^T (d B); tap column j of 0, 1, 3
      const int col = j == 2 ? 3 : j;
      uint16_t* at = v + tx;
      store_bf16(at + kPlane[col] * stride, _mm512_sub_ps(db[0][j], db[1][j]), m);
      store_bf16(at + kPlane[4 + col] * stride, _mm512_add_ps(db[1][j], db[1][j]), m);
      store_bf16(at + kPlane[12 + col] * stride, _mm512_sub_ps(db[1][j], db[2][j]), m);
    }
  }
}

// Output rows 2 ty and 2 ty + 1 of channel co: A^T M A + bias for each tile, M[k] the GEMM
// results at `c` (C[0][co][first tile of the row]; `stride` between C[k] and C[k + 1]),
// with A^T = [1 1 1 0; 0 1 -1 -1].
// With kNine, only the nine planes an upsampled input leaves nonzero are read.
template <bool kNine>
SD_BF16_TARGET void transform_output_row(const WinogradShape& s, const float* c, int64_t stride,
                                         float bias, float* plane, int64_t ty) {
  const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
  const __m512 b = _mm512_set1_ps(bias);
  const bool second_row = 2 * ty + 1 < s.OH;
  for (int64_t tx = 0; tx < s.TX; tx += kLanes) {
    __m512 sr[2][4];  // A^T M
    for (int j = 0; j < 4; ++j) {
      __m512 m[4];  // taps 4 i + j
      for (int i = 0; i < 4; ++i) {
        m[i] = kNine && (i == 2 || j == 2) ? _mm512_setzero_ps()
                                           : _mm512_loadu_ps(c + kPlane[4 * i + j] * stride + tx);
      }
      const __m512 m0 = m[0], m1 = m[1], m2 = m[2], m3 = m[3];
      sr[0][j] = _mm512_add_ps(_mm512_add_ps(m0, m1), m2);
      sr[1][j] = _mm512_sub_ps(_mm512_sub_ps(m1, m2), m3);
    }
    // Columns 2 tx.. of the output; how many of the 32 exist.
    const int64_t cols = std::min<int64_t>(2 * kLanes, s.OW - 2 * tx);
    for (int i = 0; i < (second_row ? 2 : 1); ++i) {  // (A^T M) A + bias
      const __m512 y0 =
          _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(sr[i][0], sr[i][1]), sr[i][2]), b);
      const __m512 y1 =
          _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(sr[i][1], sr[i][2]), sr[i][3]), b);
      float* row = plane + (2 * ty + i) * s.OW + 2 * tx;
      const __m512 left = _mm512_permutex2var_ps(y0, lo, y1);
      const __m512 right = _mm512_permutex2var_ps(y0, hi, y1);
      if (cols == 2 * kLanes) {
        _mm512_storeu_ps(row, left);
        _mm512_storeu_ps(row + kLanes, right);
      } else {
        _mm512_mask_storeu_ps(row, first_lanes(cols), left);
        _mm512_mask_storeu_ps(row + kLanes, first_lanes(cols - kLanes), right);
      }
    }
  }
}

// f32 with each channel's rows one dense run.
bool dense_planes(const Tensor* t) {
  return t->type == DType::F32 && t->nb[0] == sizeof(float) && t->nb[1] == t->ne[0] * t->nb[0];
}

bool fits(const DnnlState& st, const Tensor* dst) {
  const Tensor* x = dst->src[0];
  const Tensor* w = dst->src[1];
  const Conv2dParams p = conv2d_params(dst);
  return w->type == DType::BF16 && w->ne[0] == 3 && w->ne[1] == 3 && p.groups == 1 && p.s0 == 1 &&
         p.s1 == 1 && p.d0 == 1 && p.d1 == 1 && p.p0 >= 0 && p.p0 <= 1 && p.p1 >= 0 && p.p1 <= 1 &&
         w->is_contiguous() && dense_planes(x) &&
         dst->ne[0] * dst->ne[1] >= st.winograd_bf16_min_pixels &&
         w->ne[3] >= st.winograd_bf16_min_out_channels;
}

// The source to read instead of the input, when the input is a nearest 2x upscale of it
// (conv2d_upsampled_source) with padding 1, in memory this convolution does not write.
const Tensor* upsampled_source(const Tensor* dst) {
  const Tensor* source = conv2d_upsampled_source(dst);
  const Conv2dParams p = conv2d_params(dst);
  if (!source || !source->data || !dense_planes(source) || p.p0 != 1 || p.p1 != 1) return nullptr;
  const auto* a = static_cast<const char*>(source->data);
  const auto* b = static_cast<const char*>(dst->data);
  const bool apart = a + source->nbytes() <= b || b + dst->nbytes() <= a;
  return apart ? source : nullptr;
}

// One convolution's operands, as the two ways of running it below take them.
struct WinogradCall {
  CpuContext& ctx;
  const WinogradShape& s;
  const Tensor* x;  // the input, or the source of an upsampled one
  Tensor* dst;
  const memory& u;    // transformed weights (the first s.taps() planes used)
  const float* bias;  // f32 [cout] or null
  int64_t tile_rows;  // over all images
};

// The input transform of tile rows [g0, g1) into V (`tiles` columns per V[k] row).
void transform_inputs(const WinogradCall& w, int64_t g0, int64_t g1, uint16_t* v, int64_t tiles,
                      int64_t ci) {
  const WinogradShape& s = w.s;
  for (int64_t g = g0; g < g1; ++g) {
    const int64_t n = g / s.TY, ty = g % s.TY;
    const auto* plane = reinterpret_cast<const float*>(static_cast<const char*>(w.x->data) +
                                                       n * w.x->nb[3] + ci * w.x->nb[2]);
    uint16_t* at = v + ci * tiles + (g - g0) * s.TX;
    if (s.upsampled) {
      transform_input_row_upsampled(s, plane, ty, at, s.cin * tiles + kSkew);
    } else {
      transform_input_row(s, plane, ty, at, s.cin * tiles + kSkew);
    }
  }
}

// The output transform of tile rows [g0, g1) of output channel co from C.
void transform_outputs(const WinogradCall& w, int64_t g0, int64_t g1, const float* c, int64_t tiles,
                       int64_t co) {
  const WinogradShape& s = w.s;
  for (int64_t g = g0; g < g1; ++g) {
    const int64_t n = g / s.TY, ty = g % s.TY;
    auto* plane = reinterpret_cast<float*>(static_cast<char*>(w.dst->data) + n * w.dst->nb[3] +
                                           co * w.dst->nb[2]);
    const float* at = c + co * tiles + (g - g0) * s.TX;
    const float bias = w.bias ? w.bias[co] : 0.0f;
    if (s.upsampled) {
      transform_output_row<true>(s, at, s.cout * tiles + kSkew, bias, plane, ty);
    } else {
      transform_output_row<false>(s, at, s.cout * tiles + kSkew, bias, plane, ty);
    }
  }
}

// The batched GEMM C[k] = U[k] V[k] over `tiles` tiles, V and C skewed as in the transforms.
const DnnlPrimitive& gemm(DnnlState& st, const WinogradCall& w, int64_t tiles, const char* kind) {
  const WinogradShape& s = w.s;
  DnnlKey key(kind);
  key << s.cout << s.cin << tiles << s.taps() << w.ctx.threads;
  return st.primitive(key, [&] {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const memory::desc b_md({s.taps(), s.cin, tiles}, dt::bf16, {s.cin * tiles + kSkew, tiles, 1});
    const memory::desc c_md({s.taps(), s.cout, tiles}, dt::f32, {s.cout * tiles + kSkew, tiles, 1});
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(w.u.get_desc(), b_md, c_md), attr,
                                    st.engine);
    return DnnlPrimitive{dnnl::matmul(pd), pd.src_desc(), pd.weights_desc(), pd.dst_desc(),
                         pd.scratchpad_desc()};
  });
}

// Large images (the VAE's 128x128 levels up): chunks of about winograd_chunk_tiles tiles,
// each run start to end by one thread: its input transform, its GEMMs (oneDNN,
// single-threaded inside the parallel region) and its output transform, in the thread's
// own V and C. No thread waits for another between the steps, and C is read back while
// still in cache.
void run_in_chunks(const WinogradCall& w, int64_t rows_per_chunk, int64_t chunks) {
  const WinogradShape& s = w.s;
  DnnlState& st = *w.ctx.dnnl;
  const int threads = static_cast<int>(std::min<int64_t>(w.ctx.threads, chunks));
  const int64_t chunk_tiles = rows_per_chunk * s.TX;
  // Made here, as everything that can fail: the primitive cache is not thread-safe, and
  // nothing may throw inside the parallel region.
  const DnnlPrimitive& full = gemm(st, w, chunk_tiles, "conv2d-winograd-bf16-chunk");
  const int64_t last_tiles = (w.tile_rows - (chunks - 1) * rows_per_chunk) * s.TX;
  const DnnlPrimitive& last = gemm(st, w, last_tiles, "conv2d-winograd-bf16-chunk");
  // Per thread, with a vector of slack: the last row's vector loads reach past its end.
  const int64_t v_elems = s.taps() * (s.cin * chunk_tiles + kSkew) + kLanes;
  const int64_t c_elems = s.taps() * (s.cout * chunk_tiles + kSkew) + kLanes;
  const size_t pad_bytes =
      (std::max(full.scratchpad.get_size(), last.scratchpad.get_size()) + 63) / 64 * 64;
  auto* v_all =
      static_cast<uint16_t*>(st.scratch(DnnlScratch::Src, sizeof(uint16_t) * v_elems * threads));
  auto* c_all =
      static_cast<float*>(st.scratch(DnnlScratch::Dst, sizeof(float) * c_elems * threads));
  auto* pad_all = static_cast<char*>(st.scratch(DnnlScratch::Scratchpad, pad_bytes * threads));
  std::vector<dnnl::stream> streams;
  for (int t = 0; t < threads; ++t) streams.emplace_back(st.engine);

#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    uint16_t* v = v_all + v_elems * t;
    float* c = c_all + c_elems * t;
#pragma omp for schedule(dynamic, 1)
    for (int64_t k = 0; k < chunks; ++k) {
      const int64_t g0 = k * rows_per_chunk, g1 = std::min(w.tile_rows, g0 + rows_per_chunk);
      const int64_t tiles = (g1 - g0) * s.TX;
      for (int64_t ci = 0; ci < s.cin; ++ci) transform_inputs(w, g0, g1, v, tiles, ci);
      const DnnlPrimitive& mm = tiles == chunk_tiles ? full : last;
      mm.prim.execute(streams[t], {{DNNL_ARG_SRC, w.u},
                                   {DNNL_ARG_WEIGHTS, memory(mm.weights, st.engine, v)},
                                   {DNNL_ARG_DST, memory(mm.dst, st.engine, c)},
                                   {DNNL_ARG_SCRATCHPAD,
                                    memory(mm.scratchpad, st.engine, pad_all + pad_bytes * t)}});
      streams[t].wait();
      for (int64_t co = 0; co < s.cout; ++co) transform_outputs(w, g0, g1, c, tiles, co);
    }
  }
}

// Smaller images (the UNet's levels, with more channels): bands of tile rows whose V and C
// take about winograd_band_bytes, each step over all threads: the transforms split by
// channel, the GEMM by oneDNN. One GEMM over many tiles reads U once per band.
void run_in_bands(const WinogradCall& w) {
  const WinogradShape& s = w.s;
  DnnlState& st = *w.ctx.dnnl;
  const auto row_bytes = static_cast<size_t>(s.TX * s.taps() * (s.cin * 2 + s.cout * 4));
  const int64_t band =
      std::clamp<int64_t>(static_cast<int64_t>(st.winograd_band_bytes / row_bytes), 1, w.tile_rows);
  const int64_t band_tiles = band * s.TX;
  // V and C with a vector of slack: the last row's vector loads reach past its end.
  auto* v = static_cast<uint16_t*>(st.scratch(
      DnnlScratch::Src, sizeof(uint16_t) * (s.taps() * (s.cin * band_tiles + kSkew) + kLanes)));
  auto* c = static_cast<float*>(st.scratch(
      DnnlScratch::Dst, sizeof(float) * (s.taps() * (s.cout * band_tiles + kSkew) + kLanes)));

  for (int64_t g0 = 0; g0 < w.tile_rows; g0 += band) {
    const int64_t g1 = std::min(w.tile_rows, g0 + band), tiles = (g1 - g0) * s.TX;
#pragma omp parallel for num_threads(w.ctx.threads) schedule(static)
    for (int64_t ci = 0; ci < s.cin; ++ci) transform_inputs(w, g0, g1, v, tiles, ci);
    const DnnlPrimitive& mm = gemm(st, w, tiles, "conv2d-winograd-bf16");
    st.execute(mm.prim,
               {{DNNL_ARG_SRC, w.u},
                {DNNL_ARG_WEIGHTS, memory(mm.weights, st.engine, v)},
                {DNNL_ARG_DST, memory(mm.dst, st.engine, c)},
                {DNNL_ARG_SCRATCHPAD, st.scratch_memory(DnnlScratch::Scratchpad, mm.scratchpad)}});
#pragma omp parallel for num_threads(w.ctx.threads) schedule(static)
    for (int64_t co = 0; co < s.cout; ++co) transform_outputs(w, g0, g1, c, tiles, co);
  }
}

}  // namespace

bool cpu_conv2d_winograd_bf16(CpuContext& ctx, Tensor* dst) {
  static const bool supported = __builtin_cpu_supports("avx512bf16");
  DnnlState& st = *ctx.dnnl;
  if (!supported || !st.native_bf16 || !fits(st, dst)) return false;
  const Tensor* x = dst->src[0];
  const Tensor* w = dst->src[1];
  const Tensor* bias = dst->src[2];
  const Conv2dParams p = conv2d_params(dst);
  WinogradShape s{};
  s.W = x->ne[0], s.H = x->ne[1], s.cin = x->ne[2], s.N = x->ne[3];
  s.OW = dst->ne[0], s.OH = dst->ne[1], s.cout = dst->ne[2];
  s.p0 = p.p0, s.p1 = p.p1;
  s.TX = (s.OW + 1) / 2, s.TY = (s.OH + 1) / 2;
  const Tensor* source = upsampled_source(dst);
  s.upsampled = source != nullptr;

  // Transformed weights: made per call into scratch on a weight's first use, cached from
  // its second within DnnlState::winograd_cache_limit (see the top).
  const memory::desc u_desc({kTaps, s.cout, s.cin}, dt::bf16, {s.u_stride(), s.cin, 1});
  auto pack = [&](const memory& to) {
    transform_weights(w, s, static_cast<uint16_t*>(to.get_data_handle()), ctx.threads);
  };
  memory u;
  if (st.seen_before(w)) u = st.cached_weights(w, u_desc, pack, false, st.winograd_cache_limit);
  if (!u) {
    u = memory(u_desc, st.engine,
               st.scratch(DnnlScratch::Weights, sizeof(uint16_t) * kTaps * s.u_stride()));
    pack(u);
  }

  float* bias_f32 = nullptr;
  if (bias) {
    bias_f32 = static_cast<float*>(st.scratch(DnnlScratch::Bias, sizeof(float) * s.cout));
    for (int64_t c = 0; c < s.cout; ++c)
      dequantize_row(bias->type, static_cast<const char*>(bias->data) + c * bias->nb[0],
                     bias_f32 + c, 1);
  }

  // An upsampled input's GEMMs use the first kUpsampledTaps planes of the same U.
  const memory u_used =
      s.upsampled
          ? memory(memory::desc({s.taps(), s.cout, s.cin}, dt::bf16, {s.u_stride(), s.cin, 1}),
                   st.engine, u.get_data_handle())
          : u;
  const WinogradCall call{ctx, s, s.upsampled ? source : x, dst, u_used, bias_f32, s.N * s.TY};
  // Chunks pay off once every thread gets several (DnnlState::winograd_chunk_tiles).
  const int64_t rows_per_chunk =
      std::clamp<int64_t>(st.winograd_chunk_tiles / s.TX, 1, call.tile_rows);
  const int64_t chunks = (call.tile_rows + rows_per_chunk - 1) / rows_per_chunk;
  if (chunks >= st.winograd_min_chunks_per_thread * ctx.threads) {
    run_in_chunks(call, rows_per_chunk, chunks);
  } else {
    run_in_bands(call);
  }
  return true;
}

#pragma GCC diagnostic pop

#else  // no AVX512_BF16 kernel for this target

bool cpu_conv2d_winograd_bf16(CpuContext&, Tensor*) {
  return false;
}

#endif

}  // namespace sd
