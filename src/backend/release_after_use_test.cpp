#include "backend/release_after_use.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "backend/compute_buffer.h"
#include "backend/registry.h"
#include "host_vector_buffer.h"
#include "tensor/ops/elementwise.h"

namespace sd {
namespace {

// Host memory standing for a mapped weight kept on disk: records, per eviction, how many
// nodes had been computed by then.
class ReleasableBuffer final : public test::HostVectorBuffer {
 public:
  ReleasableBuffer(BufferType& type, size_t size, const size_t& nodes_done)
      : HostVectorBuffer(type, size), nodes_done_(nodes_done) {}
  bool evict_after_use() const override { return true; }
  void evict(const void* data, size_t) override { evictions.push_back({data, nodes_done_}); }

  std::vector<std::pair<const void*, size_t>> evictions;  // (weight data, nodes done)

 private:
  const size_t& nodes_done_;
};

// The CPU backend, counting the nodes computed so far.
class CountingBackend final : public Backend {
 public:
  CountingBackend() : cpu_(DeviceRegistry::instance().get("CPU").create_backend({})) {}
  Device& device() override { return cpu_->device(); }
  void compute_nodes(const Graph& graph, size_t first, size_t end) override {
    EXPECT_EQ(first, done);  // in order, each node once
    cpu_->compute_nodes(graph, first, end);
    done = end;
    ++calls;
  }
  size_t done = 0;
  int calls = 0;

 private:
  std::unique_ptr<Backend> cpu_;
};

struct TwoWeightGraph {
  Context ctx;
  Tensor* x;
  Tensor* w1;
  Tensor* w2;
  Tensor* out;
  Graph graph;

  // Places both weights in `weights` and the intermediates in a compute buffer.
  void place(Backend& backend, Buffer& weights) {
    bind_tensor(*w1, weights, 0);
    bind_tensor(*w2, weights, 4 * sizeof(float));
    memory = std::make_unique<ComputeBuffer>(backend.device().buffer_type());
    memory->allocate(graph);
  }
  std::unique_ptr<ComputeBuffer> memory;

  TwoWeightGraph() {
    x = ctx.new_tensor(DType::F32, {4}, "x");
    w1 = ctx.new_tensor(DType::F32, {4}, "w1");
    w2 = ctx.new_tensor(DType::F32, {4}, "w2");
    w1->flags |= kFlagParam;
    w2->flags |= kFlagParam;
    // w2 is read by the second node only, w1 by the first and the last.
    out = add(ctx, mul(ctx, add(ctx, x, w1), w2), w1);
    out->flags |= kFlagOutput;
    graph = Graph::build({out});
  }
};

TEST(ComputeReleasingWeights, DropsEachWeightOnceAfterItsLastReader) {
  CountingBackend backend;
  TwoWeightGraph g;
  ReleasableBuffer weights(backend.device().buffer_type(), 2 * 4 * sizeof(float), backend.done);
  g.place(backend, weights);
  const float x[4] = {1, 2, 3, 4}, w1[4] = {1, 1, 1, 1}, w2[4] = {2, 2, 2, 2};
  tensor_set(*g.x, x);
  tensor_set(*g.w1, w1);
  tensor_set(*g.w2, w2);

  std::map<const Tensor*, size_t> last_reader;
  for (size_t i = 0; i < g.graph.nodes.size(); ++i)
    for (const Tensor* s : g.graph.nodes[i]->src)
      if (s == g.w1 || s == g.w2) last_reader[s] = i;

  compute_releasing_weights(backend, g.graph, /*batch_bytes=*/1);

  float out[4];
  tensor_get(*g.out, out);
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(out[i], (x[i] + 1) * 2 + 1);
  EXPECT_EQ(backend.done, g.graph.nodes.size());
  ASSERT_EQ(weights.evictions.size(), 2u);
  for (const auto& [data, nodes_done] : weights.evictions) {
    const Tensor* w = data == g.w1->data ? g.w1 : g.w2;
    EXPECT_EQ(nodes_done, last_reader.at(w) + 1) << w->name << " left at the wrong time";
  }
  EXPECT_NE(weights.evictions[0].first, weights.evictions[1].first);
}

TEST(ComputeReleasingWeights, GraphWithoutReleasableWeightsRunsInOneCall) {
  CountingBackend backend;
  TwoWeightGraph g;
  auto weights = backend.device().buffer_type().allocate(2 * 4 * sizeof(float));
  g.place(backend, *weights);
  compute_releasing_weights(backend, g.graph);
  EXPECT_EQ(backend.calls, 1);
  EXPECT_EQ(backend.done, g.graph.nodes.size());
}

TEST(ComputeReleasingWeights, BatchesReleasesIntoFewCalls) {
  CountingBackend backend;
  TwoWeightGraph g;
  ReleasableBuffer weights(backend.device().buffer_type(), 2 * 4 * sizeof(float), backend.done);
  g.place(backend, weights);
  // A batch larger than both weights: one call, both released at its end.
  compute_releasing_weights(backend, g.graph, /*batch_bytes=*/1 << 20);
  EXPECT_EQ(backend.calls, 1);
  ASSERT_EQ(weights.evictions.size(), 2u);
  for (const auto& e : weights.evictions) EXPECT_EQ(e.second, g.graph.nodes.size());
}

}  // namespace
}  // namespace sd
