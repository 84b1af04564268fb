// Fused attention on the CPU. Each task is one (batch, head, block of queries); it walks
// the keys in blocks, computes the block's scores as a register-tiled GEMM, folds them into
// a running max and sum per query (the online softmax of FlashAttention, Dao et al. 2022)
// and accumulates the weighted values, so a thread's memory is a few tiles at any sequence
// length.
//
// Queries sit in vector lanes throughout: scores are kept as [keys x queries], so the
// softmax's max and sum over keys are plain vertical vector ops, and neither head size is
// vectorized: D = 40 (SD1.5's first level) wastes no lanes, and odd sizes need no tails.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "backend/cpu/dnnl_state.h"
#include "backend/cpu/linalg_kernels.h"

#ifndef SD_BACKEND_CPU_ATTENTION_JOB
#define SD_BACKEND_CPU_ATTENTION_JOB
namespace sd {

// One attention node, as the per-target code sees it. k, v and mask rows are contiguous
// (the dispatcher copies them otherwise); q may have any strides (it is packed per task).
struct AttentionJob {
  const char* q;
  const float* k;
  const float* v;
  const float* mask;  // null, or [Lk, Lq] with rows mask_row floats apart
  std::array<size_t, kMaxDims> q_nb;
  int64_t k_row, k_head, k_batch;  // strides in floats
  int64_t v_row, v_head, v_batch;
  int64_t mask_row;
  int64_t D, Dv, Lq, Lk, H, N;
  float scale;
  float* out;  // [Dv, H, Lq, N], contiguous
};

}  // namespace sd
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/attention.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace sd {
namespace HWY_NAMESPACE {
namespace {

namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Register tile: kKeyRows keys x kQV vectors of queries. 8 x 3 accumulators plus 3 query
// vectors fill AVX-512's 32 registers; AVX2 and SSE4 have 16, so 4 x 3.
constexpr int kQV = 3;
#if HWY_TARGET <= HWY_AVX3
constexpr int kKeyRows = 8;
#else
constexpr int kKeyRows = 4;
#endif
// Keys per block: a 128 x 48 score tile (24 KiB) stays in L1 between the three passes over
// it (scores, softmax, values); 64 and 256 measured slower on SD's shapes.
constexpr int64_t kKeyBlock = 128;

size_t query_block() {
  return kQV * hn::Lanes(DF());
}

// s[r][x] = sum_d k[r * ks + d] * qt[d][x] for R keys, folding the tile's maximum per
// query into bm[x] (which saves the softmax a pass over the scores). D >= 1.
template <int R>
HWY_INLINE void score_rows(const float* HWY_RESTRICT qt, int64_t D, const float* k, int64_t ks,
                           float* HWY_RESTRICT s, float* HWY_RESTRICT bm) {
  const DF df;
  const size_t nl = hn::Lanes(df), bq = kQV * nl;
  VF acc[R][kQV];
  {  // the first product initializes the accumulators: no zeroing pass
    VF qv[kQV];
    for (int x = 0; x < kQV; ++x) qv[x] = hn::Load(df, qt + x * nl);
    for (int r = 0; r < R; ++r) {
      const VF kv = hn::Set(df, k[r * ks]);
      for (int x = 0; x < kQV; ++x) acc[r][x] = hn::Mul(kv, qv[x]);
    }
  }
  for (int64_t d = 1; d < D; ++d) {
    VF qv[kQV];
    for (int x = 0; x < kQV; ++x) qv[x] = hn::Load(df, qt + d * bq + x * nl);
    for (int r = 0; r < R; ++r) {
      const VF kv = hn::Set(df, k[r * ks + d]);
      for (int x = 0; x < kQV; ++x) acc[r][x] = hn::MulAdd(kv, qv[x], acc[r][x]);
    }
  }
  for (int x = 0; x < kQV; ++x) {
    VF mx = hn::Load(df, bm + x * nl);
    for (int r = 0; r < R; ++r) {
      hn::Store(acc[r][x], df, s + r * bq + x * nl);
      mx = hn::Max(mx, acc[r][x]);
    }
    hn::Store(mx, df, bm + x * nl);
  }
}

// o[e][x] += sum_{j < nk} v[j * vs + e] * p[j][x] for R value dims e.
template <int R>
HWY_INLINE void value_rows(const float* HWY_RESTRICT p, int64_t nk, const float* v, int64_t vs,
                           float* HWY_RESTRICT o) {
  const DF df;
  const size_t nl = hn::Lanes(df), bq = kQV * nl;
  VF acc[R][kQV];
  for (int r = 0; r < R; ++r)
    for (int x = 0; x < kQV; ++x) acc[r][x] = hn::Load(df, o + r * bq + x * nl);
  for (int64_t j = 0; j < nk; ++j) {
    VF pv[kQV];
    for (int x = 0; x < kQV; ++x) pv[x] = hn::Load(df, p + j * bq + x * nl);
    const float* vj = v + j * vs;
    for (int r = 0; r < R; ++r) {
      const VF vv = hn::Set(df, vj[r]);
      for (int x = 0; x < kQV; ++x) acc[r][x] = hn::MulAdd(vv, pv[x], acc[r][x]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int x = 0; x < kQV; ++x) hn::Store(acc[r][x], df, o + r * bq + x * nl);
}

// Runs Tile<kKeyRows> over rows [0, n) and one smaller Tile for the remainder (R is
// clamped only so that AVX2's kKeyRows = 4 does not instantiate unused wider tiles).
template <template <int> class Tile, typename... Args>
HWY_INLINE void for_rows(int64_t n, Args... args) {
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
  static void run(int64_t j, const float* qt, int64_t D, const float* k, int64_t ks, float* s,
                  float* bm) {
    score_rows<(R < kKeyRows ? R : kKeyRows)>(qt, D, k + j * ks, ks, s + j * kQV * hn::Lanes(DF()),
                                              bm);
  }
};

template <int R>
struct ValueTile {
  static void run(int64_t e, const float* p, int64_t nk, const float* v, int64_t vs, float* o) {
    value_rows<(R < kKeyRows ? R : kKeyRows)>(p, nk, v + e, vs, o + e * kQV * hn::Lanes(DF()));
  }
};

// e^x for the softmax's x = score - running max <= 0. n = round(x / ln 2), r = x - n ln 2 by
// Cody-Waite (ln 2 split in two, so r is exact to f32 rounding), e^r on |r| <= ln 2 / 2 by
// its degree-6 Taylor polynomial (relative error < 1.2e-7, about one ulp), and 2^n added
// into the exponent. x is clamped at -86 first, so masked keys (-inf) weigh e^-86 = 4e-38,
// nothing next to the row's largest weight of 1. About half the instructions of hwy::Exp,
// which serves the whole float range; the softmax's exponentials are a quarter of the
// work at SD's head size 40.
HWY_INLINE VF exp_nonpositive(DF df, VF x) {
  const hn::RebindToSigned<DF> di;
  x = hn::Max(x, hn::Set(df, -86.0f));
  const VF n = hn::Round(hn::Mul(x, hn::Set(df, 1.44269504088896341f)));
  VF r = hn::NegMulAdd(n, hn::Set(df, 0.693359375f), x);  // ln 2 high bits: n * hi is exact
  r = hn::NegMulAdd(n, hn::Set(df, -2.12194440e-4f), r);
  VF p = hn::Set(df, 1.0f / 720);
  p = hn::MulAdd(p, r, hn::Set(df, 1.0f / 120));
  p = hn::MulAdd(p, r, hn::Set(df, 1.0f / 24));
  p = hn::MulAdd(p, r, hn::Set(df, 1.0f / 6));
  p = hn::MulAdd(p, r, hn::Set(df, 0.5f));
  p = hn::MulAdd(p, r, hn::Set(df, 1.0f));
  p = hn::MulAdd(p, r, hn::Set(df, 1.0f));
  const auto scale = hn::ShiftLeft<23>(hn::ConvertTo(di, n));
  return hn::BitCast(df, hn::Add(hn::BitCast(di, p), scale));
}

// bm[x] = the maximum over the block's nk keys of each query's score (after the mask).
void block_max(const float* HWY_RESTRICT s, int64_t nk, float* HWY_RESTRICT bm) {
  const DF df;
  const size_t nl = hn::Lanes(df), bq = kQV * nl;
  for (int x = 0; x < kQV; ++x) {
    VF mx = hn::Set(df, -INFINITY);
    for (int64_t j = 0; j < nk; ++j) mx = hn::Max(mx, hn::Load(df, s + j * bq + x * nl));
    hn::Store(mx, df, bm + x * nl);
  }
}

// Folds a block of scores s[nk][bq] with maxima bm into the running max m and sum l of
// each query, replaces the scores by their exponentials and rescales the output
// accumulators o.
void online_softmax(float* HWY_RESTRICT s, int64_t nk, const float* HWY_RESTRICT bm,
                    float* HWY_RESTRICT m, float* HWY_RESTRICT l, float* HWY_RESTRICT o,
                    int64_t Dv) {
  const DF df;
  const size_t nl = hn::Lanes(df), bq = kQV * nl;
  const VF neg_inf = hn::Set(df, -INFINITY);
  for (int x = 0; x < kQV; ++x) {
    float* sx = s + x * nl;
    const VF m_old = hn::Load(df, m + x * nl);
    const VF m_new = hn::Max(m_old, hn::Load(df, bm + x * nl));
    // While every key so far is masked out, subtract 0 rather than -inf - -inf = NaN; the
    // query ends with zeros (its running max stays -inf, see the end of attention_task).
    const VF m_use = hn::IfThenZeroElse(hn::Eq(m_new, neg_inf), m_new);
    const VF alpha = exp_nonpositive(df, hn::Sub(m_old, m_use));
    VF sum = hn::Zero(df);
    for (int64_t j = 0; j < nk; ++j) {
      const VF p = exp_nonpositive(df, hn::Sub(hn::Load(df, sx + j * bq), m_use));
      hn::Store(p, df, sx + j * bq);
      sum = hn::Add(sum, p);
    }
    hn::Store(hn::MulAdd(hn::Load(df, l + x * nl), alpha, sum), df, l + x * nl);
    hn::Store(m_new, df, m + x * nl);
    for (int64_t e = 0; e < Dv; ++e) {
      float* oe = o + e * bq + x * nl;
      hn::Store(hn::Mul(hn::Load(df, oe), alpha), df, oe);
    }
  }
}

// Whether the mask hides every key of keys j0 .. j0 + nk - 1 from every query of q0 .. q0 +
// nq - 1: such a block adds nothing (a causal mask's blocks above the diagonal, a vision
// tower's other windows), so it is skipped. The first visible key ends the scan.
bool block_masked_out(const float* mask, int64_t mask_row, int64_t q0, int64_t nq, int64_t j0,
                      int64_t nk) {
  for (int64_t i = 0; i < nq; ++i) {
    const float* mrow = mask + (q0 + i) * mask_row + j0;
    for (int64_t j = 0; j < nk; ++j)
      if (mrow[j] != -INFINITY) return false;
  }
  return true;
}

// Floats of per-thread scratch attention_task needs.
size_t task_scratch_floats(int64_t D, int64_t Dv) {
  return query_block() * static_cast<size_t>(D + kKeyBlock + Dv + 3);
}

void attention_task(const AttentionJob& job, int64_t task, float* scratch) {
  const int64_t bq = static_cast<int64_t>(query_block());
  const int64_t nqb = (job.Lq + bq - 1) / bq;
  const int64_t qb = task % nqb, h = (task / nqb) % job.H, n = task / nqb / job.H;
  const int64_t q0 = qb * bq, nq = std::min(bq, job.Lq - q0);
  const int64_t D = job.D, Dv = job.Dv;
  float* qt = scratch;            // [D][bq]: the queries, transposed and scaled
  float* s = qt + D * bq;         // [kKeyBlock][bq]: scores, then probabilities
  float* o = s + kKeyBlock * bq;  // [Dv][bq]: output accumulators
  float* m = o + Dv * bq;         // [bq]: running max per query
  float* l = m + bq;              // [bq]: running sum per query
  float* bm = l + bq;             // [bq]: maximum per query of the current key block

  // Row by row, so q is read in order (it streams from memory once per task). Strides and
  // scale are copied to locals: the stores into qt could alias the job for all the
  // compiler knows.
  const char* qh = job.q + h * job.q_nb[2] + n * job.q_nb[3];
  const size_t qs0 = job.q_nb[0], qs1 = job.q_nb[1];
  const float scale = job.scale;
  for (int64_t i = 0; i < nq; ++i) {
    const char* row = qh + (q0 + i) * qs1;
    if (qs0 == sizeof(float)) {
      const auto* r = reinterpret_cast<const float*>(row);
      for (int64_t d = 0; d < D; ++d) qt[d * bq + i] = r[d] * scale;
    } else {
      for (int64_t d = 0; d < D; ++d) {
        float x;
        std::memcpy(&x, row + d * qs0, sizeof x);
        qt[d * bq + i] = x * scale;
      }
    }
  }
  for (int64_t i = nq; i < bq; ++i)
    for (int64_t d = 0; d < D; ++d) qt[d * bq + i] = 0.0f;
  // The next query block (this thread's likely next task) streams from memory while this
  // one computes: with few keys (cross-attention) reading q is otherwise a fifth of the time.
  if (qs0 == sizeof(float) && q0 + bq < job.Lq) {
    const int64_t next = std::min(bq, job.Lq - q0 - bq);
    for (int64_t i = 0; i < next; ++i) {
      const char* row = qh + (q0 + bq + i) * qs1;
      for (int64_t b = 0; b < D * 4; b += 64) __builtin_prefetch(row + b);
    }
  }
  std::fill(o, o + Dv * bq, 0.0f);
  std::fill(m, m + bq, -INFINITY);
  std::fill(l, l + bq, 0.0f);

  const float* k = job.k + h * job.k_head + n * job.k_batch;
  const float* v = job.v + h * job.v_head + n * job.v_batch;
  for (int64_t j0 = 0; j0 < job.Lk; j0 += kKeyBlock) {
    const int64_t nk = std::min(kKeyBlock, job.Lk - j0);
    if (job.mask && block_masked_out(job.mask, job.mask_row, q0, nq, j0, nk)) continue;
    std::fill(bm, bm + bq, -INFINITY);
    for_rows<ScoreTile>(nk, qt, D, k + j0 * job.k_row, job.k_row, s, bm);
    if (job.mask) {
      for (int64_t i = 0; i < nq; ++i) {
        const float* mrow = job.mask + (q0 + i) * job.mask_row + j0;
        for (int64_t j = 0; j < nk; ++j) s[j * bq + i] += mrow[j];
      }
      block_max(s, nk, bm);
    }
    online_softmax(s, nk, bm, m, l, o, Dv);
    for_rows<ValueTile>(Dv, s, nk, v + j0 * job.v_row, job.v_row, o);
  }

  float* out = job.out + ((n * job.Lq + q0) * job.H + h) * Dv;
  const int64_t out_row = job.H * Dv;
  for (int64_t i = 0; i < nq; ++i) {
    const float inv = m[i] == -INFINITY ? 0.0f : 1.0f / l[i];
    for (int64_t e = 0; e < Dv; ++e) out[i * out_row + e] = o[e * bq + i] * inv;
  }
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace sd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backend/cpu/attention_bf16.h"
#include "tensor/ops/attention.h"

namespace sd {

HWY_EXPORT(task_scratch_floats);
HWY_EXPORT(query_block);
HWY_EXPORT(attention_task);

namespace {

// `t` ([ne0, L, H, N]) with contiguous rows: t's data if it has them, else a copy at `buf`.
const float* contiguous_rows(CpuContext& ctx, const Tensor* t, float* buf) {
  if (t->nb[0] == sizeof(float)) return static_cast<const float*>(t->data);
  const int64_t rows = t->nrows(), n0 = t->ne[0];
#pragma omp parallel for num_threads(ctx.threads) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i1 = r % t->ne[1], i2 = (r / t->ne[1]) % t->ne[2], i3 = r / t->ne[1] / t->ne[2];
    const char* row =
        static_cast<const char*>(t->data) + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
    for (int64_t i0 = 0; i0 < n0; ++i0) std::memcpy(buf + r * n0 + i0, row + i0 * t->nb[0], 4);
  }
  return buf;
}

}  // namespace

bool cpu_attention(CpuContext& ctx, Tensor* dst) {
  const Tensor* q = dst->src[0];
  const Tensor* k = dst->src[1];
  const Tensor* v = dst->src[2];
  const Tensor* mask = dst->src[3];
  if (q->type != DType::F32 || k->type != DType::F32 || v->type != DType::F32 ||
      (mask && mask->type != DType::F32) || !dst->is_contiguous())
    return false;
  if (dst->nelements() == 0) return true;
  if (q->ne[0] == 0) return false;  // no dot products at all: the tiles assume D >= 1
  if (attention_precision(dst) == AttentionPrecision::BF16 && cpu_attention_bf16(ctx, dst))
    return true;

  AttentionJob job{};
  job.D = q->ne[0];
  job.Dv = v->ne[0];
  job.Lq = q->ne[1];
  job.Lk = k->ne[1];
  job.H = q->ne[2];
  job.N = q->ne[3];
  job.scale = dst->param_f32(0);
  job.q = static_cast<const char*>(q->data);
  job.q_nb = q->nb;
  job.out = static_cast<float*>(dst->data);

  // One scratch block: per-thread tiles, then copies of any k, v, mask without dense rows.
  const size_t per_thread =
      (HWY_DYNAMIC_DISPATCH(task_scratch_floats)(job.D, job.Dv) + 15) / 16 * 16;
  const size_t tiles = per_thread * static_cast<size_t>(ctx.threads);
  const size_t k_copy = k->nb[0] == 4 ? 0 : static_cast<size_t>(k->nelements());
  const size_t v_copy = v->nb[0] == 4 ? 0 : static_cast<size_t>(v->nelements());
  const size_t m_copy = !mask || mask->nb[0] == 4 ? 0 : static_cast<size_t>(mask->nelements());
  auto* scratch = static_cast<float*>(
      ctx.dnnl->scratch(DnnlScratch::Kernel, sizeof(float) * (tiles + k_copy + v_copy + m_copy)));
  job.k = contiguous_rows(ctx, k, scratch + tiles);
  job.v = contiguous_rows(ctx, v, scratch + tiles + k_copy);
  auto strides = [](const Tensor* t, bool copied, int64_t& row, int64_t& head, int64_t& batch) {
    row = copied ? t->ne[0] : static_cast<int64_t>(t->nb[1] / 4);
    head = copied ? t->ne[0] * t->ne[1] : static_cast<int64_t>(t->nb[2] / 4);
    batch = copied ? t->ne[0] * t->ne[1] * t->ne[2] : static_cast<int64_t>(t->nb[3] / 4);
  };
  strides(k, k_copy > 0, job.k_row, job.k_head, job.k_batch);
  strides(v, v_copy > 0, job.v_row, job.v_head, job.v_batch);
  if (mask) {
    job.mask = contiguous_rows(ctx, mask, scratch + tiles + k_copy + v_copy);
    job.mask_row = m_copy > 0 ? mask->ne[0] : static_cast<int64_t>(mask->nb[1] / 4);
  }

  const int64_t bq = static_cast<int64_t>(HWY_DYNAMIC_DISPATCH(query_block)());
  const int64_t tasks = job.N * job.H * ((job.Lq + bq - 1) / bq);
#pragma omp parallel for num_threads(ctx.threads) schedule(dynamic, 4)
  for (int64_t t = 0; t < tasks; ++t) {
    HWY_DYNAMIC_DISPATCH(attention_task)(job, t, scratch + per_thread * omp_get_thread_num());
  }
  return true;
}

}  // namespace sd
#endif  // HWY_ONCE
