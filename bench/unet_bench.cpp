// One UNet evaluation at a 64x64 latent (a 512x512 image), batch 1 and 2 (2: classifier-
// free guidance's conditional and unconditional halves in one call), with random f16
// weights as a loaded f16 checkpoint has them, or bf16 ones as `--type bf16` makes. A sampling step
// is one batch-2 call or two batch-1 calls.
//   BM_Unet/<config>/<batch>/<dtype> seconds per call, and GFLOP/s over the matmul, conv
//                                    and attention work (2 FLOPs per multiply-add)
//   BM_UnetProfile/<config>/<batch>/<dtype>  the same graph run node by node: wall seconds per op
//                                    kind as counters, and a table of wall and CPU seconds
//                                    on stderr
// config: 0 = SD1.x, 1 = SD2.x, 2 = SDXL base (2.6G values, 5 GB in f16); dtype: 0 = f16 weights
// (f32 compute), 1 = bf16. Creating the random weights (860M values) takes a while before the first
// run. Run: OMP_NUM_THREADS=2 sd-bench
// --benchmark_filter=Unet
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/compute_buffer.h"
#include "backend/cpu/cpu_device.h"
#include "backend/registry.h"
#include "models/unet.h"
#include "nn/random_weights.h"
#include "process_time.h"
#include "tensor/graph.h"
#include "tensor/graph_flops.h"

namespace sd {
namespace {

constexpr int64_t kLatent = 64, kTokens = 77;

models::UnetConfig config_of(int64_t index) {
  if (index == 2) return models::UnetConfig::sdxl();
  return index == 0 ? models::UnetConfig::sd1() : models::UnetConfig::sd2();
}

const char* config_name(int64_t index) {
  static const char* const names[] = {"SD1", "SD2", "SDXL"};
  return names[index];
}

// One random weight set per config and dtype (0 f16, 1 bf16), shared by every benchmark of
// the process.
nn::RandomWeights& weights_of(int64_t index, int64_t dtype) {
  static std::map<std::pair<int64_t, int64_t>, std::unique_ptr<nn::RandomWeights>> sets;
  auto& w = sets[{index, dtype}];
  if (!w) w = std::make_unique<nn::RandomWeights>(dtype == 0 ? DType::F16 : DType::BF16);
  return *w;
}

int threads() {
  static const int n = omp_get_max_threads();  // before any backend changes it
  return n;
}

std::string kind_of(const Tensor* n) {
  if (n->op == Op::Unary) return std::string(unary_name(static_cast<UnaryOp>(n->params[0])));
  return std::string(op_name(n->op));
}

// A matmul's shape as "rows x K -> N", the key of the profile's second table: which
// GEMMs of the network fall short of the peak.
std::string matmul_shape_of(const Tensor* n) {
  const int64_t k = n->src[0]->ne[0], cols = n->ne[0];
  return std::to_string(n->nelements() / cols) + " x " + std::to_string(k) + " -> " +
         std::to_string(cols);
}

// The UNet graph for one call, allocated once, inputs filled with fixed values.
class UnetCall {
 public:
  UnetCall(int64_t config_index, int64_t batch, int64_t dtype)
      : cpu_(static_cast<CpuDevice&>(DeviceRegistry::instance().get("CPU"))),
        memory_(cpu_.buffer_type()) {
    const models::UnetConfig c = config_of(config_index);
    Tensor* x = input({kLatent, kLatent, c.in_channels, batch});
    Tensor* t = input({batch});
    Tensor* context = input({c.context_dim, kTokens, batch});
    Tensor* y = c.adm_in_channels > 0 ? input({c.adm_in_channels, batch}) : nullptr;
    Tensor* out = models::unet_forward(
        nn::Scope(ctx_, weights_of(config_index, dtype), "model.diffusion_model."), c, x, t,
        context, y);
    graph_ = Graph::build({out});
    memory_.allocate(graph_);
    for (Tensor* in : inputs_) {
      std::vector<float> v(static_cast<size_t>(in->nelements()));
      for (size_t i = 0; i < v.size(); ++i) v[i] = in == t ? 500.0f : 0.01f * (i % 200) - 1.0f;
      tensor_set(*in, v.data());
    }
    backend_ = cpu_.create_backend(BackendOptions{threads()}, CpuKernels::Fast);
    flops_ = graph_flops(graph_);
  }

  void run() {
    backend_->compute(graph_);
    backend_->synchronize();
  }

  // Runs every node alone and returns the seconds spent per op kind: wall time, and the
  // CPU time of all threads (with one thread, a measure of the work that other load on
  // the machine does not inflate).
  struct Seconds {
    double wall = 0, cpu = 0, flops = 0;
    int64_t count = 0;  // nodes (the matmul table's)
  };
  std::map<std::string, Seconds> profile(std::map<std::string, Seconds>& matmuls) {
    std::map<std::string, Seconds> seconds;
    for (Tensor* n : graph_.nodes) {
      if (is_view_op(n->op)) continue;
      Graph one;
      one.nodes = {n};
      const double cpu0 = process_cpu_seconds();
      const auto start = std::chrono::steady_clock::now();
      backend_->compute(one);
      backend_->synchronize();
      const double wall =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      Seconds& s = seconds[kind_of(n)];
      s.wall += wall;
      s.cpu += process_cpu_seconds() - cpu0;
      s.flops += node_flops(n);
      if (n->op == Op::MatMul) {
        Seconds& m = matmuls[matmul_shape_of(n)];
        m.wall += wall;
        m.flops += node_flops(n);
        m.count += 1;
      }
    }
    return seconds;
  }

  double flops() const { return flops_; }
  size_t compute_bytes() const { return memory_.capacity(); }

 private:
  Tensor* input(std::initializer_list<int64_t> ne) {
    Tensor* t = ctx_.new_tensor(DType::F32, ne);
    t->flags |= kFlagInput;
    inputs_.push_back(t);
    return t;
  }

  CpuDevice& cpu_;
  Context ctx_;
  std::vector<Tensor*> inputs_;
  Graph graph_;
  ComputeBuffer memory_;
  std::unique_ptr<Backend> backend_;
  double flops_ = 0;
};

void BM_Unet(benchmark::State& state) {
  UnetCall call(state.range(0), state.range(1), state.range(2));
  // Warm-up: primitives created, weights converted and packed; bf16 Winograd weights are
  // cached from their second use.
  call.run();
  call.run();
  for (auto _ : state) call.run();
  state.counters["threads"] = threads();
  state.counters["GFLOP"] = call.flops() / 1e9;
  state.counters["FLOPS"] =
      benchmark::Counter(call.flops() * state.iterations(), benchmark::Counter::kIsRate);
  state.counters["compute_MiB"] = static_cast<double>(call.compute_bytes()) / (1 << 20);
}

void BM_UnetProfile(benchmark::State& state) {
  UnetCall call(state.range(0), state.range(1), state.range(2));
  call.run();  // warm-up, twice as BM_Unet's
  call.run();
  std::map<std::string, UnetCall::Seconds> total, matmuls;
  for (auto _ : state) {
    for (const auto& [kind, s] : call.profile(matmuls)) {
      total[kind].wall += s.wall;
      total[kind].cpu += s.cpu;
      total[kind].flops += s.flops;
    }
  }
  const double calls = static_cast<double>(state.iterations());
  double wall_sum = 0, cpu_sum = 0;
  std::vector<std::pair<double, std::string>> rows;
  for (const auto& [kind, s] : total) {
    wall_sum += s.wall;
    cpu_sum += s.cpu;
    state.counters[kind] = s.wall / calls;
    rows.emplace_back(s.cpu, kind);
  }
  std::sort(rows.rbegin(), rows.rend());
  std::fprintf(stderr, "UNet %s batch %lld, %d threads, per call by op kind:\n",
               config_name(state.range(0)), static_cast<long long>(state.range(1)), threads());
  std::fprintf(stderr, "  %-18s %9s %9s %7s %9s\n", "op", "wall s", "cpu s", "cpu %", "GFLOP/s");
  for (const auto& [cpu, kind] : rows) {
    const UnetCall::Seconds& k = total[kind];
    std::fprintf(stderr, "  %-18s %9.3f %9.3f %6.1f%% %9.0f\n", kind.c_str(), k.wall / calls,
                 cpu / calls, 100.0 * cpu / cpu_sum, k.flops / 1e9 / k.wall);
  }
  std::fprintf(stderr, "  %-18s %9.3f %9.3f\n", "total", wall_sum / calls, cpu_sum / calls);

  std::vector<std::pair<double, std::string>> shapes;
  for (const auto& [shape, s] : matmuls) shapes.emplace_back(s.wall, shape);
  std::sort(shapes.rbegin(), shapes.rend());
  std::fprintf(stderr, "matmuls by shape (rows x K -> N), per call:\n");
  std::fprintf(stderr, "  %-26s %6s %9s %9s\n", "shape", "count", "wall s", "GFLOP/s");
  for (const auto& [wall, shape] : shapes) {
    const UnetCall::Seconds& m = matmuls[shape];
    std::fprintf(stderr, "  %-26s %6.0f %9.3f %9.0f\n", shape.c_str(), m.count / calls,
                 wall / calls, m.flops / 1e9 / wall);
  }
}

BENCHMARK(BM_Unet)
    ->ArgsProduct({{0, 1, 2}, {1, 2}, {0, 1}})
    ->Unit(benchmark::kSecond)
    ->UseRealTime()
    ->Iterations(2);
BENCHMARK(BM_UnetProfile)
    ->ArgsProduct({{0, 1, 2}, {1, 2}, {0, 1}})
    ->Unit(benchmark::kSecond)
    ->UseRealTime()
    ->Iterations(1);

}  // namespace
}  // namespace sd
