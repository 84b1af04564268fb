// This machine's f32 and bf16 peak, so the op benches can be read as a fraction of it:
// - BM_PeakGemm: a large square oneDNN matmul with weights packed once (the best a GEMM
//   reaches here; arg 0 f32, 1 bf16);
// - BM_PeakFma: register-only AVX-512 loops (16 independent accumulators, no memory
//   traffic) of vfmadd (f32) and vdpbf16ps (bf16): the arithmetic ceiling.
// All on OMP_NUM_THREADS threads. Run: OMP_NUM_THREADS=2 sd-bench --benchmark_filter=Peak
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <omp.h>

#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>

#include "linalg_bench.h"

namespace {

void BM_PeakGemm(benchmark::State& state) {
  using dnnl::memory;
  omp_set_num_threads(sd::bench::LinalgBench::threads());
  const int64_t n = 2048;
  const auto type = state.range(0) ? memory::data_type::bf16 : memory::data_type::f32;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(eng);
  const memory::desc src({n, n}, type, memory::format_tag::ab);
  const memory::desc dst({n, n}, memory::data_type::f32, memory::format_tag::ab);
  dnnl::matmul::primitive_desc pd(
      dnnl::matmul::desc(src, memory::desc({n, n}, type, memory::format_tag::any), dst), eng);
  memory a(src, eng), w(pd.weights_desc(), eng), c(dst, eng);
  std::memset(a.get_data_handle(), 0, src.get_size());
  std::memset(w.get_data_handle(), 0, pd.weights_desc().get_size());
  dnnl::matmul mm(pd);
  auto run = [&] {
    mm.execute(stream, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, c}});
    stream.wait();
  };
  run();
  for (auto _ : state) run();
  state.counters["FLOPS"] = benchmark::Counter(
      2.0 * n * n * n * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(std::string(state.range(0) ? "bf16 " : "f32 ") + pd.impl_info_str());
}
BENCHMARK(BM_PeakGemm)
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->ComputeStatistics("max", sd::bench::max_value);

constexpr int kChains = 16;          // independent accumulators: hides the FMA latency
constexpr int64_t kSteps = 1 << 20;  // per thread and run

// (Not _mm512_reduce_add_ps: GCC 12's version of it trips -Wuninitialized.)
__attribute__((target("avx512f"))) float horizontal_sum(__m512 v) {
  float lanes[16];
  _mm512_storeu_ps(lanes, v);
  float s = 0;
  for (float x : lanes) s += x;
  return s;
}

__attribute__((target("avx512f"))) float fma_f32() {
  __m512 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm512_set1_ps(static_cast<float>(j));
  const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-6f);
  for (int64_t i = 0; i < kSteps; ++i)
    for (int j = 0; j < kChains; ++j) acc[j] = _mm512_fmadd_ps(acc[j], m, a);
  __m512 sum = acc[0];
  for (int j = 1; j < kChains; ++j) sum = _mm512_add_ps(sum, acc[j]);
  return horizontal_sum(sum);
}

__attribute__((target("avx512f,avx512bf16"))) float dot_bf16() {
  __m512 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm512_set1_ps(static_cast<float>(j));
  const __m512bh x = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(2e-3f));
  for (int64_t i = 0; i < kSteps; ++i)
    for (int j = 0; j < kChains; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], x, x);
  __m512 sum = acc[0];
  for (int j = 1; j < kChains; ++j) sum = _mm512_add_ps(sum, acc[j]);
  return horizontal_sum(sum);
}

// Arg 0: f32 FMA (32 FLOPs per instruction), 1: bf16 dot product (64 FLOPs: 32 pairs).
void BM_PeakFma(benchmark::State& state) {
  const bool bf16 = state.range(0) != 0;
  if (!__builtin_cpu_supports("avx512f") || (bf16 && !__builtin_cpu_supports("avx512bf16"))) {
    state.SkipWithError("this CPU lacks the instructions");
    return;
  }
  const int threads = sd::bench::LinalgBench::threads();
  float sink = 0;
  for (auto _ : state) {
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    sink += bf16 ? dot_bf16() : fma_f32();
  }
  benchmark::DoNotOptimize(sink);
  const double per_run = (bf16 ? 64.0 : 32.0) * kChains * kSteps * threads;
  state.counters["FLOPS"] = benchmark::Counter(per_run * static_cast<double>(state.iterations()),
                                               benchmark::Counter::kIsRate);
  state.SetLabel(std::string(bf16 ? "vdpbf16ps" : "vfmadd231ps") + " x " + std::to_string(threads) +
                 " threads");
}
BENCHMARK(BM_PeakFma)
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->ComputeStatistics("max", sd::bench::max_value);

}  // namespace
