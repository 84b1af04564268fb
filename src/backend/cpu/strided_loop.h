// Elementwise kernels see their operands as a few long contiguous runs: dims of size 1 are
// dropped and neighbouring dims that every operand lays out back to back are merged, so
// x[W, H, C, N] + b[1, 1, C, 1] becomes N * C runs of W * H values, each with one b value.
// Broadcast dims get stride 0, which makes "b repeats along this dim" and "b is a scalar
// in this run" the same test for every kernel.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "tensor/tensor.h"

namespace sd {

constexpr int kMaxLoopOperands = 4;

struct StridedLoop {
  int operands = 0;  // 0 is the destination, then the sources in order
  std::array<int64_t, kMaxDims> ne{1, 1, 1, 1};
  std::array<std::array<size_t, kMaxDims>, kMaxLoopOperands> nb{};  // bytes, 0 if broadcast
  std::array<char*, kMaxLoopOperands> data{};
  std::array<DType, kMaxLoopOperands> type{};

  int64_t rows() const { return ne[1] * ne[2] * ne[3]; }
  // The first value of run `row` (a flat index over dims 1..3) in operand k.
  char* row_ptr(int k, int64_t row) const {
    const int64_t i1 = row % ne[1], i23 = row / ne[1];
    const int64_t i2 = i23 % ne[2], i3 = i23 / ne[2];
    return data[k] + i1 * nb[k][1] + i2 * nb[k][2] + i3 * nb[k][3];
  }
  // Runs of operand k are dense; otherwise each run is one repeated value (scalar_runs)
  // or a gather that the fast kernels leave to the reference.
  bool dense_runs(int k) const { return nb[k][0] == type_size(type[k]); }
  bool scalar_runs(int k) const { return nb[k][0] == 0; }
  bool dense_or_scalar(int k) const { return dense_runs(k) || scalar_runs(k); }
};

// Row `row` (a flat index over dims 1..3) of t, for kernels that work on whole rows.
inline char* tensor_row(const Tensor* t, int64_t row) {
  const int64_t i1 = row % t->ne[1], i23 = row / t->ne[1];
  return static_cast<char*>(t->data) + i1 * t->nb[1] + (i23 % t->ne[2]) * t->nb[2] +
         (i23 / t->ne[2]) * t->nb[3];
}

// Builds the collapsed loop of dst (scalar dtype) and sources broadcastable to it.
StridedLoop make_strided_loop(Tensor* dst, std::initializer_list<const Tensor*> srcs);

// Values [i0, i0 + n) of run `row` of source k as f32: a pointer into the tensor when it
// is dense f32, else converted or gathered into `scratch` (n floats). Runs of one
// repeated value (scalar_runs) are read with load_scalar_f32 instead.
const float* load_run_f32(const StridedLoop& loop, int k, int64_t row, int64_t i0, int64_t n,
                          float* scratch);
// The one value of a scalar run of source k.
float load_scalar_f32(const StridedLoop& loop, int k, int64_t row);

// Values per task: 16 KiB of f32, small enough that a task's operands stay in L1/L2 and
// that a single long run still spreads over every thread.
constexpr int64_t kRunChunk = 4096;
// Below this many values a parallel region costs more than it saves.
constexpr int64_t kMinParallelValues = 32768;

// Calls f(row, i0, n, scratch) for pieces [i0, i0 + n) of every run, n <= kRunChunk,
// across `threads`; `scratch` has scratch_floats floats private to the calling thread.
// f must not throw (it runs inside an OpenMP region).
template <typename F>
void parallel_runs(const StridedLoop& loop, int threads, int64_t scratch_floats, F&& f) {
  const int64_t chunks = std::max<int64_t>(1, (loop.ne[0] + kRunChunk - 1) / kRunChunk);
  const int64_t tasks = loop.rows() * chunks;
  const bool parallel = threads > 1 && tasks > 1 && loop.rows() * loop.ne[0] >= kMinParallelValues;
#pragma omp parallel num_threads(threads) if (parallel)
  {
    std::vector<float> scratch(static_cast<size_t>(scratch_floats));
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t row = t / chunks;
      const int64_t i0 = (t % chunks) * kRunChunk;
      f(row, i0, std::min(kRunChunk, loop.ne[0] - i0), scratch.data());
    }
  }
}

}  // namespace sd
