// Shared by the linear-algebra benches: one graph, built, allocated and filled once, then
// computed per iteration with the fast CPU kernels. Weights are kFlagParam leaves in their
// own buffer, as a model loader places them, so the CPU backend's packed-weight cache
// behaves as in a real run. Rates are reported as a FLOP/s counter; bench/README.md puts
// them against this machine's peak (peak_bench.cpp).
#pragma once

#include <benchmark/benchmark.h>
#include <omp.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/compute_buffer.h"
#include "backend/cpu/cpu_device.h"
#include "backend/registry.h"
#include "tensor/context.h"
#include "tensor/graph.h"
#include "tensor/quant/quant.h"

namespace sd::bench {

class LinalgBench {
 public:
  // `build` returns the node to time; leaves it marks kFlagParam are treated as weights.
  explicit LinalgBench(const std::function<Tensor*(Context&)>& build)
      : cpu_(static_cast<CpuDevice&>(DeviceRegistry::instance().get("CPU"))),
        memory_(cpu_.buffer_type()) {
    Tensor* out = build(ctx_);
    graph_ = Graph::build({out});
    size_t weight_bytes = 0;
    for (Tensor* leaf : graph_.leafs) {
      if (leaf->has_flag(kFlagParam)) weight_bytes += (leaf->nbytes() + 63) / 64 * 64;
    }
    weights_ = cpu_.buffer_type().allocate(weight_bytes);
    size_t offset = 0;
    for (Tensor* leaf : graph_.leafs) {
      if (!leaf->has_flag(kFlagParam)) continue;
      bind_tensor(*leaf, *weights_, offset);
      offset += (leaf->nbytes() + 63) / 64 * 64;
    }
    memory_.allocate(graph_);
    uint32_t seed = 1;
    for (Tensor* leaf : graph_.leafs) fill(*leaf, seed++);
    backend_ = cpu_.create_backend(BackendOptions{threads()}, CpuKernels::Fast);
  }

  // OMP_NUM_THREADS as the process started: a backend sets OpenMP's default to its own
  // thread count, so read it once, before any backend runs.
  static int threads() {
    static const int n = omp_get_max_threads();
    return n;
  }

  void run() {
    backend_->compute(graph_);
    backend_->synchronize();
  }

 private:
  // Values uniform in [-1, 1), quantized to the leaf's dtype.
  static void fill(Tensor& t, uint32_t seed) {
    std::vector<float> v(static_cast<size_t>(t.nelements()));
    uint32_t s = seed * 2654435761u;
    for (float& x : v) {
      s = s * 1664525u + 1013904223u;
      x = static_cast<float>(s >> 8) / 8388608.0f - 1.0f;
    }
    std::vector<uint8_t> bytes(t.nbytes());
    quantize_rows(t.type, v.data(), bytes.data(), t.nrows(), t.ne[0]);
    tensor_set(t, bytes.data());
  }

  CpuDevice& cpu_;
  Context ctx_;
  Graph graph_;
  std::unique_ptr<Buffer> weights_;
  ComputeBuffer memory_;
  std::unique_ptr<Backend> backend_;
};

// Times `build`'s node and reports `flops` per run as the "FLOPS" rate counter.
inline void run_linalg_bench(benchmark::State& state, double flops,
                             const std::function<Tensor*(Context&)>& build,
                             const std::string& label) {
  LinalgBench bench(build);
  state.counters["threads"] = LinalgBench::threads();
  bench.run();  // warm-up: primitives are created and weights packed on the first call
  for (auto _ : state) bench.run();
  state.counters["FLOPS"] = benchmark::Counter(flops * static_cast<double>(state.iterations()),
                                               benchmark::Counter::kIsRate);
  state.SetLabel(label);
}

// The largest of a benchmark's repetitions, registered as the "max" statistic: on a
// machine shared with other work, the fastest repetition is the one least disturbed, so
// bench/README.md reports the FLOPS counter of the _max rows (their time column is the
// slowest repetition's and means nothing).
inline double max_value(const std::vector<double>& v) {
  double m = v.empty() ? 0 : v[0];
  for (double x : v) m = x > m ? x : m;
  return m;
}

// A weight leaf: flagged kFlagParam so it is cached as a loaded model's weights are.
inline Tensor* weight(Context& ctx, DType type, std::initializer_list<int64_t> ne,
                      const char* name) {
  Tensor* t = ctx.new_tensor(type, ne, name);
  t->flags |= kFlagParam;
  return t;
}

}  // namespace sd::bench
