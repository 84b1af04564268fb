// Fast Add/Sub/Mul/Div with broadcasting, Scale and Clamp. Operands are collapsed into
// contiguous runs (strided_loop.h); a broadcast source is either a dense run (a bias
// repeated along rows) or one value per run (a per-channel bias over NCHW activations).
#include "backend/cpu/simd_kernels.h"

#include "backend/cpu/strided_loop.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/elementwise.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/simd_loops-inl.h"

HWY_BEFORE_NAMESPACE();
namespace sd {
namespace HWY_NAMESPACE {
namespace {

// a or b null: that operand is the scalar beside it.
void binary_run(Op op, const float* a, float as, const float* b, float bs, float* y, int64_t n) {
  switch (op) {
    case Op::Add:
      return map_binary(a, as, b, bs, y, n, [](VF x, VF z) { return hn::Add(x, z); });
    case Op::Sub:
      return map_binary(a, as, b, bs, y, n, [](VF x, VF z) { return hn::Sub(x, z); });
    case Op::Mul:
      return map_binary(a, as, b, bs, y, n, [](VF x, VF z) { return hn::Mul(x, z); });
    case Op::Div:
      return map_binary(a, as, b, bs, y, n, [](VF x, VF z) { return hn::Div(x, z); });
    default:
      return;
  }
}

void scale_run(const float* x, float* y, int64_t n, float s, float bias) {
  map_unary(x, y, n,
            [s, bias](DF d, VF v) { return hn::MulAdd(v, hn::Set(d, s), hn::Set(d, bias)); });
}

void clamp_run(const float* x, float* y, int64_t n, float lo, float hi) {
  map_unary(x, y, n, [lo, hi](DF d, VF v) {
    // std::clamp keeps a NaN (both comparisons are false); Min/Max would not.
    const VF c = hn::Min(hn::Max(v, hn::Set(d, lo)), hn::Set(d, hi));
    return hn::IfThenElse(hn::Eq(v, v), c, v);
  });
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace sd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sd {

HWY_EXPORT(binary_run);
HWY_EXPORT(scale_run);
HWY_EXPORT(clamp_run);

namespace {

// One dense f32 destination and float sources: dense, strided or one value per run.
bool loop_supported(const StridedLoop& loop) {
  if (loop.type[0] != DType::F32 || !loop.dense_runs(0)) return false;
  for (int k = 1; k < loop.operands; ++k) {
    if (!is_float(loop.type[k])) return false;  // strided runs are gathered (load_run_f32)
  }
  return true;
}

// The unary elementwise ops: y = run(x) over dense runs.
template <typename Run>
bool unary_runs(CpuContext& ctx, Tensor* dst, const Run& run) {
  const StridedLoop loop = make_strided_loop(dst, {dst->src[0]});
  if (!loop_supported(loop)) return false;
  parallel_runs(loop, ctx.threads, kRunChunk, [&](int64_t row, int64_t i0, int64_t n, float* tmp) {
    const float* x = load_run_f32(loop, 1, row, i0, n, tmp);
    run(x, reinterpret_cast<float*>(loop.row_ptr(0, row)) + i0, n);
  });
  return true;
}

}  // namespace

bool cpu_binary(CpuContext& ctx, Tensor* dst) {
  const StridedLoop loop = make_strided_loop(dst, {dst->src[0], dst->src[1]});
  if (!loop_supported(loop)) return false;
  const Op op = dst->op;
  parallel_runs(loop, ctx.threads, 2 * kRunChunk,
                [&](int64_t row, int64_t i0, int64_t n, float* scratch) {
                  const float* a = nullptr;
                  const float* b = nullptr;
                  float as = 0, bs = 0;
                  if (loop.scalar_runs(1)) {
                    as = load_scalar_f32(loop, 1, row);
                  } else {
                    a = load_run_f32(loop, 1, row, i0, n, scratch);
                  }
                  if (loop.scalar_runs(2)) {
                    bs = load_scalar_f32(loop, 2, row);
                  } else {
                    b = load_run_f32(loop, 2, row, i0, n, scratch + kRunChunk);
                  }
                  float* y = reinterpret_cast<float*>(loop.row_ptr(0, row)) + i0;
                  HWY_DYNAMIC_DISPATCH(binary_run)(op, a, as, b, bs, y, n);
                });
  return true;
}

bool cpu_scale(CpuContext& ctx, Tensor* dst) {
  const float s = dst->param_f32(0), bias = dst->param_f32(1);
  return unary_runs(ctx, dst, [&](const float* x, float* y, int64_t n) {
    HWY_DYNAMIC_DISPATCH(scale_run)(x, y, n, s, bias);
  });
}

bool cpu_clamp(CpuContext& ctx, Tensor* dst) {
  const float lo = dst->param_f32(0), hi = dst->param_f32(1);
  return unary_runs(ctx, dst, [&](const float* x, float* y, int64_t n) {
    HWY_DYNAMIC_DISPATCH(clamp_run)(x, y, n, lo, hi);
  });
}

}  // namespace sd
#endif  // HWY_ONCE
