// VAE decode at Stable Diffusion 1.5 sizes with random weights (nn::RandomWeights): the
// AutoencoderKL (a 64x64 latent is a 512x512 image) in f16 and f32 weights, and TAESD.
// Counters: the compute buffer the graph needed (MiB) and the CPU seconds of all threads
// per decode (process_cpu_s). BM_VaeDecodeOps times every node alone and reports seconds
// per op kind (conv2d, group_norm, ...), to find hot spots; BM_VaeConv3x3 rates the
// decoder's conv shapes.
// Run: OMP_NUM_THREADS=2 sd-bench --benchmark_filter=Vae
#include <benchmark/benchmark.h>
#include <omp.h>
#include <sys/resource.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/compute_buffer.h"
#include "backend/cpu/cpu_device.h"
#include "backend/registry.h"
#include "linalg_bench.h"
#include "models/taesd.h"
#include "models/vae.h"
#include "nn/graph_runner.h"
#include "nn/random_weights.h"
#include "process_time.h"
#include "tensor/graph.h"
#include "tensor/ops/conv2d.h"

namespace sd {
namespace {

// User + system CPU seconds of the whole process: on a shared machine, where wall time
// depends on the neighbours, CPU time / threads estimates the wall time of a quiet one.
int bench_threads() {
  static const int n = omp_get_max_threads();  // before any backend changes the default
  return n;
}

std::vector<float> latent_values(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t s = 12345;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) / 8388608.0f - 1.0f;
  }
  return v;
}

// Args: latent side (64 = 512x512 image), weight dtype (0 f16, 1 f32), model (0 KL, 1 TAESD).
void BM_VaeDecode(benchmark::State& state) {
  const int64_t side = state.range(0);
  const DType type = state.range(1) == 0 ? DType::F16 : DType::F32;
  const bool taesd = state.range(2) == 1;
  auto backend =
      DeviceRegistry::instance().get("CPU").create_backend(BackendOptions{bench_threads()});
  nn::RandomWeights weights(type);
  nn::GraphRunner runner(*backend);
  const models::VaeConfig cfg = models::VaeConfig::sd();
  const std::vector<float> z = latent_values(side * side * 4);
  auto decode = [&] {
    nn::GraphCall call;
    Tensor* in = call.input_f32("z", make_shape({side, side, 4, 1}), z.data());
    Tensor* image =
        taesd ? models::taesd_decode(nn::Scope(call.ctx(), weights, "tae."), in)
              : models::vae_decode(nn::Scope(call.ctx(), weights, "first_stage_model."), cfg, in);
    return runner.run(call, image);
  };
  decode();  // weights created, buffer sized, packed-weight cache warm
  const double cpu0 = process_cpu_seconds();
  for (auto _ : state) benchmark::DoNotOptimize(decode());
  state.counters["process_cpu_s"] =
      benchmark::Counter(process_cpu_seconds() - cpu0, benchmark::Counter::kAvgIterations);
  state.counters["buffer_MiB"] = static_cast<double>(runner.compute_buffer_size()) / (1 << 20);
  state.SetLabel(std::to_string(side * 8) + "px " + std::string(dtype_name(type)) +
                 (taesd ? " taesd" : " kl"));
}

BENCHMARK(BM_VaeDecode)
    ->Args({32, 0, 0})
    ->Args({64, 0, 0})
    ->Args({64, 1, 0})
    ->Args({64, 0, 1})
    ->Unit(benchmark::kSecond)
    ->UseRealTime()
    ->Iterations(1);

// One decode, node by node: seconds per op kind (conv2d split by kernel size). Args:
// latent side, weight dtype (0 f16, 1 bf16).
void BM_VaeDecodeOps(benchmark::State& state) {
  const int64_t side = state.range(0);
  const DType type = state.range(1) == 0 ? DType::F16 : DType::BF16;
  auto& cpu = static_cast<CpuDevice&>(DeviceRegistry::instance().get("CPU"));
  auto backend = cpu.create_backend(BackendOptions{bench_threads()}, CpuKernels::Fast);
  nn::RandomWeights weights(type);
  nn::GraphCall call;
  const std::vector<float> z = latent_values(side * side * 4);
  Tensor* in = call.input_f32("z", make_shape({side, side, 4, 1}), z.data());
  Tensor* image = models::vae_decode(nn::Scope(call.ctx(), weights, "first_stage_model."),
                                     models::VaeConfig::sd(), in);
  Graph graph = Graph::build({image});
  ComputeBuffer memory(cpu.buffer_type());
  memory.allocate(graph);
  tensor_set(*in, z.data());
  // Two untimed passes first, for the steady state of a process that decodes many images:
  // the first faults the compute buffer in, the second caches the transformed weights of
  // the bf16 Winograd convolutions (they are cached from a weight's second use).
  for (int warm = 0; warm < 2; ++warm) {
    backend->compute(graph);
    backend->synchronize();
  }
  std::map<std::string, double> seconds;
  for (auto _ : state) {
    seconds.clear();
    for (Tensor* node : graph.nodes) {
      Graph one;
      one.nodes = {node};
      const auto t0 = std::chrono::steady_clock::now();
      backend->compute(one);
      backend->synchronize();
      const double dt =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::string kind(op_name(node->op));
      if (node->op == Op::Conv2d) kind += node->src[1]->ne[0] == 1 ? "_1x1" : "_3x3";
      if (node->op == Op::Unary) {
        kind += '_';
        kind += unary_name(static_cast<UnaryOp>(node->params[0]));
      }
      seconds[kind] += dt;
    }
  }
  for (const auto& [kind, s] : seconds) state.counters[kind] = s;
  state.counters["buffer_MiB"] = static_cast<double>(memory.capacity()) / (1 << 20);
}

BENCHMARK(BM_VaeDecodeOps)
    ->Args({64, 0})
    ->Args({64, 1})
    ->Unit(benchmark::kSecond)
    ->UseRealTime()
    ->Iterations(1);

// The decoder's 3x3 convs, batch 1, with the FLOPS counter of the linear-algebra benches
// (direct-method FLOPs, so Winograd shows as a higher rate). Args: shape index, weight
// dtype (0 f16, 1 bf16).
struct VaeConvShape {
  const char* name;
  int64_t cin, cout, side;
};
constexpr VaeConvShape kVaeConvs[] = {
    {"128->128@512 (up.0 blocks)", 128, 128, 512}, {"256->256@512 (up.1 upsample)", 256, 256, 512},
    {"256->256@256 (up.1 blocks)", 256, 256, 256}, {"512->512@256 (up.2 upsample)", 512, 512, 256},
    {"512->512@128 (up.2 blocks)", 512, 512, 128}, {"512->512@64 (mid, up.3)", 512, 512, 64},
    {"128->3@512 (conv_out)", 128, 3, 512}};

void BM_VaeConv3x3(benchmark::State& state) {
  const VaeConvShape& s = kVaeConvs[state.range(0)];
  const DType type = state.range(1) == 0 ? DType::F16 : DType::BF16;
  const double flops = 2.0 * s.cin * s.cout * 9 * s.side * s.side;
  bench::run_linalg_bench(
      state, flops,
      [&](Context& ctx) {
        Tensor* x = ctx.new_tensor(DType::F32, {s.side, s.side, s.cin, 1}, "x");
        return conv2d(ctx, x, bench::weight(ctx, type, {3, 3, s.cin, s.cout}, "w"),
                      bench::weight(ctx, DType::F32, {s.cout}, "b"), 1, 1, 1, 1, 1, 1);
      },
      std::string(s.name) + " " + std::string(dtype_name(type)));
}

BENCHMARK(BM_VaeConv3x3)
    ->ArgsProduct({{0, 1, 2, 3, 4, 5, 6}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace sd
