// The bf16 attention kernel. vdpbf16ps multiplies pairs of bf16 lanes and adds both
// products into one f32 lane, so every operand is laid out in pairs along the summed
// dimension:
//   scores  s[j][x] = sum_d k[j][d] q[x][d]: queries x in lanes, pairs of d. The queries
//           are packed per task as qt[d / 2][x][2]; a key's (d, d + 1) pair is one 32-bit
//           broadcast from k packed as [key][D rounded up to even].
//   output  o[e][x] += sum_j p[j][x] v[j][e]: pairs of keys. The softmax writes its
//           weights as p[j / 2][x][2]; v is packed as [j / 2][e][2], so a (j, j + 1)
//           pair is one broadcast and a tile's value dims sit side by side.
// Padding (an odd head size, an odd key count) is zeros on both sides of a product.
// Highway 1.0 has no bf16 dot product, so this file uses AVX-512 intrinsics in functions
// compiled for that target only, called after a CPU check.
#include "backend/cpu/attention_bf16.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "backend/cpu/dnnl_state.h"
#include "tensor/float16.h"
#include "tensor/ops/attention.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "backend/cpu/transpose16_avx512.h"
#define SD_HAVE_BF16_KERNEL 1
#define SD_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))
#endif

namespace sd {

#ifdef SD_HAVE_BF16_KERNEL
// GCC 12's AVX-512 headers start some intrinsics from a deliberately undefined vector,
// which its own -Wuninitialized then reports at every use.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#ifndef __clang__  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
namespace {

constexpr int64_t kLanes = 16;  // f32 lanes of a 512-bit vector
constexpr int kQV = 3;          // query vectors per tile: 48 queries per task
constexpr int64_t kBq = kQV * kLanes;
constexpr int kKeyRows = 8;         // 8 x 3 accumulators, 3 query vectors, 1 broadcast
constexpr int64_t kKeyBlock = 128;  // keys per block, even: pairs never straddle blocks

uint32_t load_pair(const uint16_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// s[r][x] = k[r] . q[x] for R keys over `pairs` pairs of dimensions, folding each query's
// maximum over the tile into bm.
template <int R>
SD_BF16_TARGET void score_rows(const uint16_t* qt, int64_t pairs, const uint16_t* k, int64_t ks,
                               float* s, float* bm) {
  __m512 acc[R][kQV];
  for (int r = 0; r < R; ++r)
    for (int x = 0; x < kQV; ++x) acc[r][x] = _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p) {
    __m512bh qv[kQV];
    for (int x = 0; x < kQV; ++x)
      qv[x] = (__m512bh)_mm512_loadu_si512(qt + (p * kBq + x * kLanes) * 2);
    for (int r = 0; r < R; ++r) {
      const auto kv = (__m512bh)_mm512_set1_epi32(static_cast<int>(load_pair(k + r * ks + 2 * p)));
      for (int x = 0; x < kQV; ++x) acc[r][x] = _mm512_dpbf16_ps(acc[r][x], kv, qv[x]);
    }
  }
  for (int x = 0; x < kQV; ++x) {
    __m512 mx = _mm512_loadu_ps(bm + x * kLanes);
    for (int r = 0; r < R; ++r) {
      _mm512_storeu_ps(s + r * kBq + x * kLanes, acc[r][x]);
      mx = _mm512_max_ps(mx, acc[r][x]);
    }
    _mm512_storeu_ps(bm + x * kLanes, mx);
  }
}

// o[r][x] += sum_j p[j][x] v[j][r] for R value dims over `pairs` pairs of keys; v points at
// the first pair's dim 0, pairs `vs` values apart.
template <int R>
SD_BF16_TARGET void value_rows(const uint16_t* p, int64_t pairs, const uint16_t* v, int64_t vs,
                               float* o) {
  __m512 acc[R][kQV];
  for (int r = 0; r < R; ++r)
    for (int x = 0; x < kQV; ++x) acc[r][x] = _mm512_loadu_ps(o + r * kBq + x * kLanes);
  for (int64_t jp = 0; jp < pairs; ++jp) {
    __m512bh pv[kQV];
    for (int x = 0; x < kQV; ++x)
      pv[x] = (__m512bh)_mm512_loadu_si512(p + (jp * kBq + x * kLanes) * 2);
    for (int r = 0; r < R; ++r) {
      const auto vv = (__m512bh)_mm512_set1_epi32(static_cast<int>(load_pair(v + jp * vs + 2 * r)));
      for (int x = 0; x < kQV; ++x) acc[r][x] = _mm512_dpbf16_ps(acc[r][x], vv, pv[x]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int x = 0; x < kQV; ++x) _mm512_storeu_ps(o + r * kBq + x * kLanes, acc[r][x]);
}

// Tile<kKeyRows> over rows [0, n), then one smaller tile for the remainder.
template <template <int> class Tile, typename... Args>
SD_BF16_TARGET void for_rows(int64_t n, Args... args) {
  int64_t i = 0;
  for (; i + kKeyRows <= n; i += kKeyRows) Tile<kKeyRows>::run(i, args...);
  switch (n - i) {
    case 1:
      return Tile<1>::run(i, args...);
    case 2:
      return Tile<2>::run(i, args...);
    case 3:
      return Tile<3>::run(i, args...);
    case 4:
      return Tile<4>::run(i, args...);
    case 5:
      return Tile<5>::run(i, args...);
    case 6:
      return Tile<6>::run(i, args...);
    case 7:
      return Tile<7>::run(i, args...);
    default:
      return;
  }
}

template <int R>
struct ScoreTile {
  SD_BF16_TARGET static void run(int64_t j, const uint16_t* qt, int64_t pairs, const uint16_t* k,
                                 int64_t ks, float* s, float* bm) {
    score_rows<R>(qt, pairs, k + j * ks, ks, s + j * kBq, bm);
  }
};

template <int R>
struct ValueTile {
  SD_BF16_TARGET static void run(int64_t e, const uint16_t* p, int64_t pairs, const uint16_t* v,
                                 int64_t vs, float* o) {
    value_rows<R>(p, pairs, v + 2 * e, vs, o + e * kBq);
  }
};

// Lane order that interleaves two halves [a0..a15, b0..b15] of 16-bit lanes into pairs
// [a0, b0, a1, b1, ...].
alignas(64) constexpr uint16_t kInterleave[32] = {0,  16, 1,  17, 2,  18, 3,  19, 4,  20, 5,
                                                  21, 6,  22, 7,  23, 8,  24, 9,  25, 10, 26,
                                                  11, 27, 12, 28, 13, 29, 14, 30, 15, 31};

// Rows a and b (n <= 16 floats each; b may be null for zeros) rounded to bf16 and
// interleaved into n pairs (a[i], b[i]) at out.
SD_BF16_TARGET void store_pairs(const float* a, const float* b, int64_t n, uint16_t* out) {
  const auto m = static_cast<__mmask16>((1u << n) - 1);
  const __m512 va = _mm512_maskz_loadu_ps(m, a);
  const __m512 vb = b ? _mm512_maskz_loadu_ps(m, b) : _mm512_setzero_ps();
  const auto halves = (__m512i)_mm512_cvtne2ps_pbh(vb, va);
  _mm512_mask_storeu_epi32(out, m,
                           _mm512_permutexvar_epi16(_mm512_loadu_si512(kInterleave), halves));
}

// n <= 16 floats times `scale`, rounded to bf16, at out.
SD_BF16_TARGET void store_row(const float* a, int64_t n, float scale, uint16_t* out) {
  const auto m = static_cast<__mmask16>((1u << n) - 1);
  const __m512 va = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, a), _mm512_set1_ps(scale));
  _mm256_mask_storeu_epi16(out, m, (__m256i)_mm512_cvtneps_pbh(va));
}

// e^x for x <= 0, to bf16's precision: n = round(x / ln 2), r = x - n ln 2, e^r by its
// degree-4 Taylor polynomial on |r| <= ln 2 / 2 (relative error < 5e-5, a tenth of bf16's
// rounding step), scaled by 2^n. x is clamped at -86 first, so masked keys (-inf) weigh
// e^-86, nothing next to the row's largest weight of 1.
SD_BF16_TARGET __m512 exp_nonpositive(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-86.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693147180559945f), x);
  __m512 p = _mm512_set1_ps(1.0f / 24);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// Folds a block of scores s[nk][kBq] with maxima bm into each query's running max m and
// sum l, writes the block's weights as bf16 pairs p[nk / 2][kBq][2] (an odd last key
// paired with a zero) and rescales the output accumulators o.
SD_BF16_TARGET void online_softmax(const float* s, int64_t nk, const float* bm, float* m, float* l,
                                   float* o, int64_t Dv, uint16_t* p) {
  const __m512i interleave = _mm512_loadu_si512(kInterleave);
  const __m512 neg_inf = _mm512_set1_ps(-INFINITY);
  for (int x = 0; x < kQV; ++x) {
    const __m512 m_old = _mm512_loadu_ps(m + x * kLanes);
    const __m512 m_new = _mm512_max_ps(m_old, _mm512_loadu_ps(bm + x * kLanes));
    // While every key so far is masked out, subtract 0 rather than -inf - -inf = NaN.
    const __m512 m_use =
        _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(m_new, neg_inf, _CMP_NEQ_OQ), m_new);
    const __m512 alpha = exp_nonpositive(_mm512_sub_ps(m_old, m_use));
    __m512 sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < nk; j += 2) {
      const __m512 a =
          exp_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(s + j * kBq + x * kLanes), m_use));
      const __m512 b = j + 1 < nk ? exp_nonpositive(_mm512_sub_ps(
                                        _mm512_loadu_ps(s + (j + 1) * kBq + x * kLanes), m_use))
                                  : _mm512_setzero_ps();
      sum = _mm512_add_ps(sum, _mm512_add_ps(a, b));
      const __m512i halves = (__m512i)_mm512_cvtne2ps_pbh(b, a);
      _mm512_storeu_si512(p + ((j / 2) * kBq + x * kLanes) * 2,
                          _mm512_permutexvar_epi16(interleave, halves));
    }
    _mm512_storeu_ps(l + x * kLanes, _mm512_fmadd_ps(_mm512_loadu_ps(l + x * kLanes), alpha, sum));
    _mm512_storeu_ps(m + x * kLanes, m_new);
    for (int64_t e = 0; e < Dv; ++e) {
      float* oe = o + e * kBq + x * kLanes;
      _mm512_storeu_ps(oe, _mm512_mul_ps(_mm512_loadu_ps(oe), alpha));
    }
  }
}

// One attention node with its operands packed to bf16.
struct Bf16Job {
  const Tensor* q;
  const Tensor* mask;  // null, or f32 [Lk, Lq] with any strides
  const uint16_t* k;   // [N][H][Lk][Dp]
  const uint16_t* v;   // [N][H][Lkp / 2][Dv][2]
  int64_t D, Dp, Dv, Lq, Lk, Lkp, H, N;
  float scale;
  float* out;  // [Dv, H, Lq, N], contiguous
};

float load_f32_at(const Tensor* t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  float v;
  std::memcpy(&v,
              static_cast<const char*>(t->data) + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] +
                  i3 * t->nb[3],
              sizeof v);
  return v;
}

// Whether the mask hides keys j0 .. j0 + nk - 1 from every query of q0 .. q0 + nq - 1 (a
// causal mask's blocks above the diagonal, a vision tower's other windows).
bool block_masked_out(const Tensor* mask, int64_t q0, int64_t nq, int64_t j0, int64_t nk) {
  for (int64_t i = 0; i < nq; ++i)
    for (int64_t j = 0; j < nk; ++j)
      if (load_f32_at(mask, j0 + j, q0 + i, 0, 0) != -INFINITY) return false;
  return true;
}

// Floats of per-thread scratch a task needs (bf16 arrays counted in floats, rounded up).
int64_t task_scratch_floats(int64_t Dp, int64_t Dv) {
  return (Dp * kBq) / 2 + kKeyBlock * kBq + (kKeyBlock * kBq) / 2 + Dv * kBq + 3 * kBq;
}

// The task's queries q0 .. q0 + nq - 1 (rows of D contiguous floats) scaled, rounded to
// bf16 and paired along d into qt[Dp / 2][kBq][2]: per 16 queries and 32 dims, 16 rows of
// 16 pairs transposed in registers (a scalar store per pair was a tenth of a cross-
// attention's time); queries past nq are zeros.
SD_BF16_TARGET void pack_queries(const Bf16Job& job, int64_t q0, int64_t nq, int64_t h, int64_t n,
                                 uint16_t* qt) {
  const __m512 scale = _mm512_set1_ps(job.scale);
  const char* head = static_cast<const char*>(job.q->data) + h * job.q->nb[2] + n * job.q->nb[3];
  for (int64_t d0 = 0; d0 < job.D; d0 += 32) {
    const int64_t nd = std::min<int64_t>(32, job.D - d0);
    const auto lo = static_cast<__mmask16>((1u << std::min<int64_t>(16, nd)) - 1);
    const auto hi = static_cast<__mmask16>(nd > 16 ? (1u << (nd - 16)) - 1 : 0);
    const int64_t pairs = std::min<int64_t>(16, job.Dp / 2 - d0 / 2);
    for (int64_t x = 0; x < kQV; ++x) {
      __m512i r[16];
      for (int64_t i = 0; i < 16; ++i) {
        const int64_t q = x * kLanes + i;
        if (q >= nq) {
          r[i] = _mm512_setzero_si512();
          continue;
        }
        const float* row = reinterpret_cast<const float*>(head + (q0 + q) * job.q->nb[1]) + d0;
        r[i] =
            (__m512i)_mm512_cvtne2ps_pbh(_mm512_mul_ps(_mm512_maskz_loadu_ps(hi, row + 16), scale),
                                         _mm512_mul_ps(_mm512_maskz_loadu_ps(lo, row), scale));
      }
      transpose16x16(r);
      for (int64_t p = 0; p < pairs; ++p)
        _mm512_storeu_si512(qt + ((d0 / 2 + p) * kBq + x * kLanes) * 2, r[p]);
    }
  }
}

// out's rows q0 .. q0 + nq - 1 from the accumulators o[Dv][kBq] divided by each query's
// sum (zeros for a query every key was masked from), 16 queries by 16 dims transposed in
// registers.
SD_BF16_TARGET void store_output(const Bf16Job& job, const float* o, const float* m, const float* l,
                                 int64_t q0, int64_t nq, int64_t h, int64_t n) {
  const int64_t Dv = job.Dv, out_row = job.H * Dv;
  float* out = job.out + ((n * job.Lq + q0) * job.H + h) * Dv;
  for (int64_t x = 0; x < kQV && x * kLanes < nq; ++x) {
    const __mmask16 seen =
        _mm512_cmp_ps_mask(_mm512_loadu_ps(m + x * kLanes), _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);
    const __m512 inv =
        _mm512_maskz_div_ps(seen, _mm512_set1_ps(1.0f), _mm512_loadu_ps(l + x * kLanes));
    const int64_t queries = std::min<int64_t>(kLanes, nq - x * kLanes);
    for (int64_t e0 = 0; e0 < Dv; e0 += 16) {
      const int64_t ne = std::min<int64_t>(16, Dv - e0);
      __m512i r[16];
      for (int64_t j = 0; j < 16; ++j)
        r[j] = j < ne ? _mm512_castps_si512(
                            _mm512_mul_ps(_mm512_loadu_ps(o + (e0 + j) * kBq + x * kLanes), inv))
                      : _mm512_setzero_si512();
      transpose16x16(r);
      const auto mask = static_cast<__mmask16>((1u << ne) - 1);
      for (int64_t i = 0; i < queries; ++i)
        _mm512_mask_storeu_ps(out + (x * kLanes + i) * out_row + e0, mask,
                              _mm512_castsi512_ps(r[i]));
    }
  }
}

SD_BF16_TARGET void attention_task(const Bf16Job& job, int64_t task, float* scratch) {
  const int64_t nqb = (job.Lq + kBq - 1) / kBq;
  const int64_t qb = task % nqb, h = (task / nqb) % job.H, n = task / nqb / job.H;
  const int64_t q0 = qb * kBq, nq = std::min(kBq, job.Lq - q0);
  const int64_t D = job.D, Dp = job.Dp, Dv = job.Dv;
  auto* qt = reinterpret_cast<uint16_t*>(scratch);             // [Dp / 2][kBq][2]
  float* s = scratch + (Dp * kBq) / 2;                         // [kKeyBlock][kBq]
  auto* p = reinterpret_cast<uint16_t*>(s + kKeyBlock * kBq);  // [kKeyBlock / 2][kBq][2]
  float* o = s + kKeyBlock * kBq + (kKeyBlock * kBq) / 2;      // [Dv][kBq]
  float* m = o + Dv * kBq;                                     // [kBq] running max
  float* l = m + kBq;                                          // [kBq] running sum
  float* bm = l + kBq;                                         // [kBq] block max

  // Queries scaled, rounded to bf16 and paired along d; padding queries and dims are 0.
  if (job.q->nb[0] == sizeof(float)) {
    pack_queries(job, q0, nq, h, n, qt);
  } else {  // a strided view: value by value
    std::memset(qt, 0, sizeof(uint16_t) * Dp * kBq);
    for (int64_t i = 0; i < nq; ++i)
      for (int64_t d = 0; d < D; ++d)
        qt[((d / 2) * kBq + i) * 2 + d % 2] =
            f32_to_bf16(load_f32_at(job.q, d, q0 + i, h, n) * job.scale);
  }
  std::fill(o, o + Dv * kBq, 0.0f);
  std::fill(m, m + kBq, -INFINITY);
  std::fill(l, l + kBq, 0.0f);

  const uint16_t* k = job.k + (n * job.H + h) * job.Lk * Dp;
  const uint16_t* v = job.v + (n * job.H + h) * job.Lkp * Dv;
  for (int64_t j0 = 0; j0 < job.Lk; j0 += kKeyBlock) {
    const int64_t nk = std::min(kKeyBlock, job.Lk - j0);
    if (job.mask && block_masked_out(job.mask, q0, nq, j0, nk)) continue;  // adds nothing
    std::fill(bm, bm + kBq, -INFINITY);
    for_rows<ScoreTile>(nk, qt, Dp / 2, k + j0 * Dp, Dp, s, bm);
    if (job.mask) {
      for (int64_t i = 0; i < nq; ++i)
        for (int64_t j = 0; j < nk; ++j)
          s[j * kBq + i] += load_f32_at(job.mask, j0 + j, q0 + i, 0, 0);
      std::fill(bm, bm + kBq, -INFINITY);
      for (int64_t j = 0; j < nk; ++j)
        for (int64_t i = 0; i < kBq; ++i) bm[i] = std::max(bm[i], s[j * kBq + i]);
    }
    online_softmax(s, nk, bm, m, l, o, Dv, p);
    for_rows<ValueTile>(Dv, p, (nk + 1) / 2, v + j0 * Dv, 2 * Dv, o);
  }

  store_output(job, o, m, l, q0, nq, h, n);
}

// k and v to bf16: each head's k as rows of Dp (a zero after an odd D), its v as pairs of
// keys [Lkp / 2][Dv][2] (a zero key after an odd Lk).
SD_BF16_TARGET void pack_kv(CpuContext& ctx, const Bf16Job& job, const Tensor* k, const Tensor* v,
                            uint16_t* packed_k, uint16_t* packed_v) {
  const int64_t heads = job.N * job.H;
#pragma omp parallel for num_threads(ctx.threads) schedule(static)
  for (int64_t nh = 0; nh < heads; ++nh) {
    const int64_t n = nh / job.H, h = nh % job.H;
    uint16_t* kh = packed_k + nh * job.Lk * job.Dp;
    for (int64_t j = 0; j < job.Lk; ++j) {
      uint16_t* out = kh + j * job.Dp;
      if (k->nb[0] == sizeof(float)) {
        const auto* row = reinterpret_cast<const float*>(
            static_cast<const char*>(k->data) + j * k->nb[1] + h * k->nb[2] + n * k->nb[3]);
        for (int64_t d0 = 0; d0 < job.D; d0 += 16)
          store_row(row + d0, std::min<int64_t>(16, job.D - d0), 1.0f, out + d0);
      } else {
        for (int64_t d = 0; d < job.D; ++d) out[d] = f32_to_bf16(load_f32_at(k, d, j, h, n));
      }
      if (job.Dp > job.D) out[job.D] = 0;
    }
    uint16_t* vh = packed_v + nh * job.Lkp * job.Dv;
    for (int64_t j = 0; j < job.Lk; j += 2) {
      uint16_t* out = vh + j * job.Dv;  // pair j / 2
      const bool second = j + 1 < job.Lk;
      if (v->nb[0] == sizeof(float)) {
        auto row = [&](int64_t key) {
          return reinterpret_cast<const float*>(static_cast<const char*>(v->data) + key * v->nb[1] +
                                                h * v->nb[2] + n * v->nb[3]);
        };
        for (int64_t e0 = 0; e0 < job.Dv; e0 += 16)
          store_pairs(row(j) + e0, second ? row(j + 1) + e0 : nullptr,
                      std::min<int64_t>(16, job.Dv - e0), out + 2 * e0);
      } else {
        for (int64_t e = 0; e < job.Dv; ++e) {
          out[2 * e] = f32_to_bf16(load_f32_at(v, e, j, h, n));
          out[2 * e + 1] = second ? f32_to_bf16(load_f32_at(v, e, j + 1, h, n)) : 0;
        }
      }
    }
  }
}

}  // namespace

bool cpu_attention_bf16(CpuContext& ctx, Tensor* dst) {
  static const bool supported = __builtin_cpu_supports("avx512bf16");
  if (!supported) return false;
  const Tensor* q = dst->src[0];
  const Tensor* k = dst->src[1];
  const Tensor* v = dst->src[2];
  Bf16Job job{};
  job.q = q;
  job.mask = dst->src[3];
  job.D = q->ne[0];
  job.Dp = (job.D + 1) / 2 * 2;
  job.Dv = v->ne[0];
  job.Lq = q->ne[1];
  job.Lk = k->ne[1];
  job.Lkp = (job.Lk + 1) / 2 * 2;
  job.H = q->ne[2];
  job.N = q->ne[3];
  job.scale = dst->param_f32(0);
  job.out = static_cast<float*>(dst->data);

  const int64_t heads = job.N * job.H;
  const int64_t k_size = heads * job.Lk * job.Dp, v_size = heads * job.Lkp * job.Dv;
  const int64_t per_thread = (task_scratch_floats(job.Dp, job.Dv) + 15) / 16 * 16;
  const int64_t packed_floats = (k_size + v_size + 1) / 2;
  auto* scratch = static_cast<float*>(ctx.dnnl->scratch(
      DnnlScratch::Kernel, sizeof(float) * (per_thread * ctx.threads + packed_floats)));
  auto* packed_k = reinterpret_cast<uint16_t*>(scratch + per_thread * ctx.threads);
  uint16_t* packed_v = packed_k + k_size;
  job.k = packed_k;
  job.v = packed_v;
  pack_kv(ctx, job, k, v, packed_k, packed_v);

  const int64_t tasks = heads * ((job.Lq + kBq - 1) / kBq);
#pragma omp parallel for num_threads(ctx.threads) schedule(dynamic, 4)
  for (int64_t t = 0; t < tasks; ++t)
    attention_task(job, t, scratch + per_thread * omp_get_thread_num());
  return true;
}

#pragma GCC diagnostic pop

#else  // no AVX512_BF16 kernel for this target

bool cpu_attention_bf16(CpuContext&, Tensor*) {
  return false;
}

#endif

}  // namespace sd
