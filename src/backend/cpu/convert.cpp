// Fast Cast and Cont. Cast: float types to each other, block types to f32 through the
// fast row dequantizers, f32/f16/bf16 to block types through the reference quantizers
// (bit-exact with GGUF, so only the row loop is ours). Cont: a contiguous copy of a view;
// dense runs are memcpy'd, a transposed source goes through cache-sized tiles.
#include "backend/cpu/simd_kernels.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/strided_loop.h"
#include "tensor/quant/quant.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/convert.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/simd_loops-inl.h"

HWY_BEFORE_NAMESPACE();
namespace sd {
namespace HWY_NAMESPACE {
namespace {

// f32 -> bf16 rounding to nearest even with quiet NaNs, bit-exact with f32_to_bf16 in
// float16.h. (Highway 1.0's DemoteTo(bf16) truncates, so it cannot be used.)
HWY_INLINE hn::Vec<hn::Rebind<uint16_t, DF>> bf16_bits(DF d, VF v) {
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint16_t, DF> du16;
  const auto u = hn::BitCast(du, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1));
  const auto rounded = hn::ShiftRight<16>(hn::Add(u, hn::Add(lsb, hn::Set(du, 0x7fff))));
  const auto is_nan =
      hn::Gt(hn::BitCast(di, hn::And(u, hn::Set(du, 0x7fffffff))), hn::Set(di, 0x7f800000));
  const auto quiet = hn::Or(hn::ShiftRight<16>(u), hn::Set(du, 64));
  const auto bits = hn::IfThenElse(hn::RebindMask(du, is_nan), quiet, rounded);
  return hn::DemoteTo(du16, hn::BitCast(di, bits));  // every value fits in 16 bits
}

void f32_to_bf16_run(const float* x, uint16_t* y, int64_t n) {
  const DF d;
  const hn::Rebind<uint16_t, DF> du16;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(bf16_bits(d, hn::LoadU(d, x + i)), du16, y + i);
  if (i < n) {
    HWY_ALIGN float xs[kMaxFloatLanes] = {};
    HWY_ALIGN uint16_t ys[kMaxFloatLanes];
    const size_t rest = static_cast<size_t>(n - i);
    std::memcpy(xs, x + i, rest * sizeof(float));
    hn::Store(bf16_bits(d, hn::Load(d, xs)), du16, ys);
    std::memcpy(y + i, ys, rest * sizeof(uint16_t));
  }
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace sd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sd {

HWY_EXPORT(f32_to_bf16_run);

namespace {

// Writes n f32 values in dst's float dtype.
void store_run(DType type, const float* x, void* y, int64_t n) {
  if (type == DType::BF16) {
    HWY_DYNAMIC_DISPATCH(f32_to_bf16_run)(x, static_cast<uint16_t*>(y), n);
  } else {
    quantize_row(type, x, y, n);  // f32: memcpy, f16: F16C
  }
}

// Block rows to f32 rows; every row of a block tensor is contiguous.
bool dequantize_rows(CpuContext& ctx, Tensor* dst, const Tensor* a) {
  if (dst->type != DType::F32 || !dst->rows_contiguous()) return false;
  const int64_t rows = a->nrows(), n = a->ne[0];
#pragma omp parallel for num_threads(ctx.threads) schedule(static) if (rows > 1)
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(a->type, tensor_row(a, r), reinterpret_cast<float*>(tensor_row(dst, r)), n);
  }
  return true;
}

// Float rows to block rows with the reference quantizers.
bool quantize_into_blocks(CpuContext& ctx, Tensor* dst, const Tensor* a) {
  if (!a->rows_contiguous() || !dst->is_contiguous()) return false;
  const int64_t rows = a->nrows(), n = a->ne[0];
  if (a->type == DType::F32 && a->is_contiguous()) {
    quantize_rows(dst->type, static_cast<const float*>(a->data), dst->data, rows, n);
    return true;
  }
#pragma omp parallel num_threads(ctx.threads) if (rows > 1)
  {
    std::vector<float> row(static_cast<size_t>(n));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(a->type, tensor_row(a, r), row.data(), n);
      quantize_row(dst->type, row.data(), tensor_row(dst, r), n);
    }
  }
  return true;
}

// Copies element by element with the source stride; T is the element's size class.
template <typename T>
void gather_run(const char* src, size_t stride, char* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * sizeof(T), src + i * stride, sizeof(T));
}

void gather(size_t es, const char* src, size_t stride, char* dst, int64_t n) {
  if (es == 4) return gather_run<uint32_t>(src, stride, dst, n);
  if (es == 2) return gather_run<uint16_t>(src, stride, dst, n);
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * es, src + i * stride, es);
}

// dst dim 0 is the source's dim j (stride es) and vice versa: a 2-D transpose per index of
// the other two dims. Square tiles keep both the rows read and the rows written in L1
// instead of touching a new cache line for every element read.
void transpose_copy(CpuContext& ctx, const StridedLoop& loop, int j, size_t es) {
  constexpr int64_t kTile = 32;
  int outer_dims[2], k = 0;
  for (int d = 1; d < kMaxDims; ++d) {
    if (d != j) outer_dims[k++] = d;
  }
  const int64_t n0 = loop.ne[0], nj = loop.ne[j];
  const int64_t t0 = (n0 + kTile - 1) / kTile, tj = (nj + kTile - 1) / kTile;
  const int64_t no1 = loop.ne[outer_dims[0]], no2 = loop.ne[outer_dims[1]];
  const int64_t tasks = no1 * no2 * t0 * tj;
  const auto& db = loop.nb[0];
  const auto& sb = loop.nb[1];
#pragma omp parallel for num_threads(ctx.threads) schedule(static) if (tasks > 4)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t a = t % t0, b = (t / t0) % tj, o = t / (t0 * tj);
    const int64_t o1 = o % no1, o2 = o / no1;
    const size_t outer_d = o1 * db[outer_dims[0]] + o2 * db[outer_dims[1]];
    const size_t outer_s = o1 * sb[outer_dims[0]] + o2 * sb[outer_dims[1]];
    const int64_t i0 = a * kTile, len0 = std::min(kTile, n0 - i0);
    for (int64_t ij = b * kTile; ij < std::min(nj, (b + 1) * kTile); ++ij) {
      char* out = loop.data[0] + outer_d + ij * db[j] + i0 * es;
      const char* in = loop.data[1] + outer_s + ij * sb[j] + i0 * sb[0];
      gather(es, in, sb[0], out, len0);
    }
  }
}

}  // namespace

bool cpu_cast(CpuContext& ctx, Tensor* dst) {
  const Tensor* a = dst->src[0];
  if (is_quantized(a->type)) return dequantize_rows(ctx, dst, a);
  if (!is_float(a->type)) return false;
  if (is_quantized(dst->type)) return quantize_into_blocks(ctx, dst, a);
  if (!is_float(dst->type)) return false;
  const StridedLoop loop = make_strided_loop(dst, {a});
  if (!loop.dense_runs(0) || !loop.dense_runs(1)) return false;
  const size_t es_dst = type_size(dst->type), es_src = type_size(a->type);
  const DType from = a->type, to = dst->type;
  parallel_runs(loop, ctx.threads, to == DType::F32 ? 0 : kRunChunk,
                [&](int64_t row, int64_t i0, int64_t n, float* scratch) {
                  const char* x = loop.row_ptr(1, row) + i0 * es_src;
                  char* y = loop.row_ptr(0, row) + i0 * es_dst;
                  if (from == to) {
                    std::memcpy(y, x, n * es_dst);
                  } else if (to == DType::F32) {
                    dequantize_row(from, x, reinterpret_cast<float*>(y), n);
                  } else {
                    store_run(to, load_run_f32(loop, 1, row, i0, n, scratch), y, n);
                  }
                });
  return true;
}

bool cpu_cont(CpuContext& ctx, Tensor* dst) {
  const Tensor* a = dst->src[0];
  if (dst->type != a->type || !dst->is_contiguous()) return false;
  if (is_quantized(a->type)) {
    const int64_t rows = a->nrows();
    const size_t bytes = row_size(a->type, a->ne[0]);
#pragma omp parallel for num_threads(ctx.threads) schedule(static) if (rows * bytes >= 1 << 17)
    for (int64_t r = 0; r < rows; ++r) std::memcpy(tensor_row(dst, r), tensor_row(a, r), bytes);
    return true;
  }
  const StridedLoop loop = make_strided_loop(dst, {a});
  const size_t es = type_size(a->type);
  if (!loop.dense_runs(0)) return false;
  if (loop.dense_runs(1)) {
    parallel_runs(loop, ctx.threads, 0, [&](int64_t row, int64_t i0, int64_t n, float*) {
      std::memcpy(loop.row_ptr(0, row) + i0 * es, loop.row_ptr(1, row) + i0 * es, n * es);
    });
    return true;
  }
  for (int j = 1; j < kMaxDims; ++j) {
    if (loop.ne[j] > 1 && loop.nb[1][j] == es) {
      transpose_copy(ctx, loop, j, es);
      return true;
    }
  }
  parallel_runs(loop, ctx.threads, 0, [&](int64_t row, int64_t i0, int64_t n, float*) {
    gather(es, loop.row_ptr(1, row) + i0 * loop.nb[1][0], loop.nb[1][0],
           loop.row_ptr(0, row) + i0 * es, n);
  });
  return true;
}

}  // namespace sd
#endif  // HWY_ONCE
