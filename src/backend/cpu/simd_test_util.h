// Test helper for the Highway kernels: besides agreeing with the reference (which a
// declining fast kernel would do trivially), the common layouts must take the fast path.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backend/compute_buffer.h"
#include "backend/cpu/cpu_context.h"
#include "backend/cpu/kernels.h"
#include "backend/registry.h"
#include "tensor/graph.h"
#include "tensor/ops/reference.h"
#include "tensor/quant/quant.h"
#include "test_support.h"

namespace sd::test {

// Runs c's graph with reference kernels up to its last output node and reports whether
// that node's fast kernel accepts it (returns true) instead of declining.
inline bool fast_kernel_accepts(const GraphCase& c) {
  auto& cpu = static_cast<CpuDevice&>(DeviceRegistry::instance().get("CPU"));
  Context ctx;
  std::vector<Tensor*> outputs = c.build(ctx);
  Graph graph = Graph::build(outputs);
  ComputeBuffer memory(cpu.buffer_type());
  memory.allocate(graph);
  for (size_t i = 0; i < graph.leafs.size(); ++i) {
    Tensor& leaf = *graph.leafs[i];
    std::vector<float> values = c.fill ? c.fill(leaf, static_cast<int>(i)) : std::vector<float>{};
    if (values.empty()) values = random_values(leaf.nelements(), c.seed + static_cast<uint32_t>(i));
    std::vector<uint8_t> bytes(leaf.nbytes());
    if (leaf.type == DType::I32) {
      for (size_t j = 0; j < values.size(); ++j) {
        const auto v = static_cast<int32_t>(values[j]);
        std::memcpy(bytes.data() + 4 * j, &v, 4);
      }
    } else {
      quantize_rows(leaf.type, values.data(), bytes.data(), leaf.nrows(), leaf.ne[0]);
    }
    tensor_set(leaf, bytes.data());
  }
  CpuContext cpu_ctx;
  cpu_ctx.threads = 2;
  for (Tensor* node : graph.nodes) {
    if (is_view_op(node->op)) continue;
    if (node == outputs.back()) {
      CpuKernel fast = cpu_fast_kernel(node->op);
      return fast && fast(cpu_ctx, node);
    }
    reference_kernel(node->op)(node);
  }
  return false;
}

// The last output takes the fast path, and every output matches the reference kernels.
inline void expect_fast_path(const GraphCase& c, double atol, double rtol) {
  EXPECT_TRUE(fast_kernel_accepts(c)) << "the fast kernel declined a layout it should handle";
  expect_fast_matches_reference(c, atol, rtol);
}

}  // namespace sd::test
