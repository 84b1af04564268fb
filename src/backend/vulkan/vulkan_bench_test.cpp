// Throughput of the Vulkan kernels that dominate a generation, beside the CPU backend's on
// the same graph, in one process: a ratio, not an absolute time (disabled by default; run
// with --gtest_also_run_disabled_tests --gtest_filter='*VulkanBench*' on a machine with a
// GPU). Prints GFLOP/s per device.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>

#include "backend/compute_buffer.h"
#include "backend/vulkan/vulkan_test_util.h"
#include "tensor/graph.h"
#include "tensor/ops/attention.h"
#include "tensor/ops/conv2d.h"
#include "tensor/ops/matmul.h"

namespace sd::vulkan {
namespace {

// Seconds per run of the graph `build` makes, on `device` (after one warm-up run); inputs
// are left as allocated: throughput does not depend on the values.
double seconds_per_run(Device& device, const std::function<Tensor*(Context&)>& build) {
  Context ctx;
  Tensor* out = build(ctx);
  Graph graph = Graph::build({out});
  ComputeBuffer memory(device.buffer_type());
  memory.allocate(graph);
  for (Tensor* leaf : graph.leafs) {
    std::vector<uint8_t> zeros(leaf->nbytes(), 0);
    tensor_set(*leaf, zeros.data());
  }
  auto backend = device.create_backend(BackendOptions{});
  backend->compute(graph);
  backend->synchronize();
  // At least 3 runs and half a second: a GPU idle before the first run raises its clocks
  // during the first few milliseconds.
  int runs = 0;
  double seconds = 0;
  const auto start = std::chrono::steady_clock::now();
  while (runs < 3 || seconds < 0.5) {
    backend->compute(graph);
    backend->synchronize();
    ++runs;
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return seconds / runs;
}

void report(const char* what, double flops, const std::function<Tensor*(Context&)>& build) {
  SD_REQUIRE_VULKAN(device);
  Device& cpu = DeviceRegistry::instance().get("CPU");
  const double gpu_s = seconds_per_run(*device, build);
  const double cpu_s = seconds_per_run(cpu, build);
  std::printf("%s: %s %.1f GFLOP/s (%.2f ms), CPU %.1f GFLOP/s (%.2f ms): %.1fx\n", what,
              device->name().c_str(), flops / gpu_s * 1e-9, gpu_s * 1e3, flops / cpu_s * 1e-9,
              cpu_s * 1e3, cpu_s / gpu_s);
}

TEST(VulkanBench, DISABLED_MatMulF16Weights) {
  const int64_t K = 4096, M = 4096, N = 4096;
  report("matmul 4096^3, f16 weights", 2.0 * K * M * N, [&](Context& ctx) {
    Tensor* a = ctx.new_tensor(DType::F16, make_shape({K, M}), "a");
    Tensor* b = ctx.new_tensor(DType::F32, make_shape({K, N}), "b");
    return matmul(ctx, a, b);
  });
}

TEST(VulkanBench, DISABLED_MatMulQ8_0Weights) {
  const int64_t K = 4096, M = 4096, N = 4096;
  report("matmul 4096^3, q8_0 weights", 2.0 * K * M * N, [&](Context& ctx) {
    Tensor* a = ctx.new_tensor(DType::Q8_0, make_shape({K, M}), "a");
    Tensor* b = ctx.new_tensor(DType::F32, make_shape({K, N}), "b");
    return matmul(ctx, a, b);
  });
}

TEST(VulkanBench, DISABLED_Conv3x3Sd15UnetBlock) {
  // SD 1.5's 64x64 latent, 320 channels in and out, batch 2 (cfg).
  const int64_t W = 64, H = 64, C = 320, N = 2;
  report("conv2d 3x3 320->320 64x64 x2", 2.0 * W * H * C * C * 9 * N, [&](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, make_shape({W, H, C, N}), "x");
    Tensor* w = ctx.new_tensor(DType::F16, make_shape({3, 3, C, C}), "w");
    return conv2d(ctx, x, w, nullptr, 1, 1, 1, 1, 1, 1);
  });
}

// Self-attention of `tokens` queries and keys, `heads` heads of `dim`, `batch` sequences.
void report_attention(const char* what, int64_t dim, int64_t tokens, int64_t heads, int64_t batch) {
  const double flops = 4.0 * tokens * tokens * dim * heads * batch;
  report(what, flops, [&](Context& ctx) {
    Tensor* q = ctx.new_tensor(DType::F32, make_shape({dim, tokens, heads, batch}), "q");
    Tensor* k = ctx.new_tensor(DType::F32, make_shape({dim, tokens, heads, batch}), "k");
    Tensor* v = ctx.new_tensor(DType::F32, make_shape({dim, tokens, heads, batch}), "v");
    return attention(ctx, q, k, v, nullptr, 1.0f / std::sqrt(static_cast<float>(dim)));
  });
}

TEST(VulkanBench, DISABLED_AttentionSd15Self) {
  // SD 1.5's first self-attention: 4096 tokens, 8 heads of 40, batch 2 (cfg).
  report_attention("attention 4096 tokens, 8x40, x2", 40, 4096, 8, 2);
}

TEST(VulkanBench, DISABLED_AttentionFluxJoint) {
  // FLUX.1's joint attention at 1024x1024: 4096 image + 512 text tokens, 24 heads of 128.
  report_attention("attention 4608 tokens, 24x128", 128, 4608, 24, 1);
}

TEST(VulkanBench, DISABLED_AttentionVaeMidBlock) {
  // The VAE decoder's single-head attention at 512x512: 4096 pixels, 512 channels.
  report_attention("attention 4096 tokens, 1x512", 512, 4096, 1, 1);
}

}  // namespace
}  // namespace sd::vulkan
