// Fast (Highway + OpenMP) vs reference CPU kernels at Stable Diffusion 1.5 sizes: SiLU,
// conv-bias add and GroupNorm on a 64 x 64 x 320 x 2 activation (512x512, first UNet
// stage), softmax over rows of 4096 keys. bytes_per_second counts one read of each input
// and one write of the output, so it compares directly with memory bandwidth.
// Run: sd-bench --benchmark_filter='Silu|ChannelBias|GroupNorm|Softmax'
#include <benchmark/benchmark.h>

#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "backend/compute_buffer.h"
#include "backend/cpu/cpu_device.h"
#include "backend/cpu/simd_target.h"
#include "backend/registry.h"
#include "tensor/graph.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/norm.h"
#include "tensor/ops/softmax.h"
#include "tensor/ops/unary.h"

namespace sd {
namespace {

// One graph, allocated and filled once, computed once per benchmark iteration.
class OpBench {
 public:
  OpBench(const std::function<Tensor*(Context&)>& build, CpuKernels kernels)
      : cpu_(static_cast<CpuDevice&>(DeviceRegistry::instance().get("CPU"))),
        memory_(cpu_.buffer_type()) {
    out_ = build(ctx_);
    graph_ = Graph::build({out_});
    memory_.allocate(graph_);
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
    for (Tensor* leaf : graph_.leafs) {
      std::vector<float> v(static_cast<size_t>(leaf->nelements()));
      for (float& x : v) x = dist(rng);
      tensor_set(*leaf, v.data());
    }
    backend_ = cpu_.create_backend(BackendOptions{}, kernels);
  }
  void run() {
    backend_->compute(graph_);
    backend_->synchronize();
  }
  // Bytes of every leaf plus the output.
  int64_t bytes() const {
    size_t b = out_->nbytes();
    for (const Tensor* leaf : graph_.leafs) b += leaf->nbytes();
    return static_cast<int64_t>(b);
  }

 private:
  CpuDevice& cpu_;
  Context ctx_;
  Graph graph_;
  ComputeBuffer memory_;
  Tensor* out_ = nullptr;
  std::unique_ptr<Backend> backend_;
};

void run_bench(benchmark::State& state, const std::function<Tensor*(Context&)>& build) {
  const auto kernels = state.range(0) ? CpuKernels::Fast : CpuKernels::Reference;
  OpBench bench(build, kernels);
  for (auto _ : state) bench.run();
  state.SetBytesProcessed(state.iterations() * bench.bytes());
  state.SetLabel(kernels == CpuKernels::Fast ? "fast " + simd_target_name() : "reference");
}

Tensor* sd15_activation(Context& ctx) {
  return ctx.new_tensor(DType::F32, {64, 64, 320, 2}, "x");
}

void BM_Silu(benchmark::State& state) {
  run_bench(state, [](Context& ctx) { return silu(ctx, sd15_activation(ctx)); });
}

void BM_ChannelBiasAdd(benchmark::State& state) {
  run_bench(state, [](Context& ctx) {
    return add(ctx, sd15_activation(ctx), ctx.new_tensor(DType::F32, {1, 1, 320, 1}, "bias"));
  });
}

void BM_GroupNorm(benchmark::State& state) {
  run_bench(state, [](Context& ctx) {
    return group_norm(ctx, sd15_activation(ctx), 32, 1e-5f,
                      ctx.new_tensor(DType::F32, {320}, "weight"),
                      ctx.new_tensor(DType::F32, {320}, "bias"));
  });
}

void BM_Softmax(benchmark::State& state) {
  // 1024 query rows of one head's 4096 keys, scaled by 1/sqrt(40) as SD1.5's first stage.
  run_bench(state, [](Context& ctx) {
    return softmax(ctx, ctx.new_tensor(DType::F32, {4096, 1024}, "scores"), nullptr, 0.15811388f);
  });
}

// Arg 0: reference kernels, arg 1: fast kernels.
BENCHMARK(BM_Silu)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ChannelBiasAdd)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GroupNorm)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Softmax)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace sd
