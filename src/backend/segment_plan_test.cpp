#include "backend/segment_plan.h"

#include <gtest/gtest.h>

#include "tensor/context.h"
#include "tensor/error.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/view.h"

namespace sd {
namespace {

// x -> W0 -> W1 -> ... : one 64x64 f32 weight (16 KiB) per layer; `shared` is read by
// layers 2 and 4.
struct Chain {
  Context ctx;
  std::vector<Tensor*> weights;
  Graph graph;

  explicit Chain(int layers, bool shared = false) {
    Tensor* h = ctx.new_tensor(DType::F32, {64, 4}, "x");
    h->flags |= kFlagInput;
    Tensor* w_shared = nullptr;
    for (int i = 0; i < layers; ++i) {
      Tensor* w = nullptr;
      if (shared && (i == 2 || i == 4) && w_shared) {
        w = w_shared;
      } else {
        w = ctx.new_tensor(DType::F32, {64, 64}, "w" + std::to_string(i));
        w->flags |= kFlagParam;
        weights.push_back(w);
        if (shared && i == 2) w_shared = w;
      }
      // Read through a view, as models read reshaped weights.
      h = matmul(ctx, reshape(ctx, w, {64, 64}), h);
    }
    graph = Graph::build({h});
  }
};

constexpr size_t kWeight = 64 * 64 * 4;

TEST(SegmentPlan, EverythingInOneSegmentWhenItFits) {
  Chain c(6);
  const SegmentPlan p = plan_segments(c.graph, c.weights, 6 * kWeight, 1, 64);
  ASSERT_EQ(p.segments.size(), 1u);
  EXPECT_EQ(p.segments[0].first, 0u);
  EXPECT_EQ(p.segments[0].end, c.graph.nodes.size());
  EXPECT_EQ(p.segments[0].weights.size(), 6u);
  EXPECT_EQ(p.weight_bytes, 6 * kWeight);
  EXPECT_EQ(p.slot_bytes, std::vector<size_t>{6 * kWeight});
}

TEST(SegmentPlan, SegmentsFillTheirSlotAndCoverEveryNodeInOrder) {
  Chain c(7);
  const SegmentPlan p = plan_segments(c.graph, c.weights, 2 * kWeight, 2, 64);
  ASSERT_EQ(p.segments.size(), 4u);  // 2 + 2 + 2 + 1 weights
  size_t next = 0;
  for (size_t j = 0; j < p.segments.size(); ++j) {
    const Segment& s = p.segments[j];
    EXPECT_EQ(s.first, next);
    EXPECT_LT(s.first, s.end);
    next = s.end;
    EXPECT_EQ(s.slot, static_cast<int>(j % 2));
    EXPECT_LE(s.bytes, 2 * kWeight);
    // Every weight a node of the segment reads is in it, at its own place in the slot.
    for (size_t i = s.first; i < s.end; ++i) {
      const Tensor* n = c.graph.nodes[i];
      if (n->op != Op::MatMul) continue;
      const Tensor* w = n->src[0]->view_src;
      bool found = false;
      for (const SegmentWeight& sw : s.weights) found = found || sw.leaf == w;
      EXPECT_TRUE(found) << "node " << i << " reads " << w->name << " outside its segment";
    }
  }
  EXPECT_EQ(next, c.graph.nodes.size());
  EXPECT_EQ(p.slot_bytes, (std::vector<size_t>{2 * kWeight, 2 * kWeight}));
}

TEST(SegmentPlan, NeverCutsBetweenTwoReadersOfOneWeight) {
  Chain c(6, /*shared=*/true);  // layers 2..4 read the shared weight: one piece
  const SegmentPlan p = plan_segments(c.graph, c.weights, 2 * kWeight, 1, 64);
  for (const Segment& s : p.segments) {
    for (const SegmentWeight& w : s.weights) {
      if (w.leaf->name != "w2") continue;
      // Both readers of w2 run in this segment.
      int readers = 0;
      for (size_t i = s.first; i < s.end; ++i)
        if (c.graph.nodes[i]->op == Op::MatMul && c.graph.nodes[i]->src[0]->view_src == w.leaf)
          ++readers;
      EXPECT_EQ(readers, 2);
    }
  }
}

TEST(SegmentPlan, APieceLargerThanASlotIsAnErrorNamingIt) {
  Chain c(6, /*shared=*/true);  // layers 2..4 need w2 and w3 together
  try {
    plan_segments(c.graph, c.weights, kWeight + 100, 1, 64);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cannot be split"), std::string::npos) << m;
    EXPECT_NE(m.find("'w2'"), std::string::npos) << m;
    EXPECT_NE(m.find("MiB"), std::string::npos) << m;
  }
}

TEST(SegmentPlan, AlignmentCountsInTheSlot) {
  Chain c(2);
  const SegmentPlan p = plan_segments(c.graph, c.weights, 1 << 20, 1, 4096 * 3);
  ASSERT_EQ(p.segments.size(), 1u);
  EXPECT_EQ(p.segments[0].weights[1].offset, 4096u * 6);  // 16 KiB rounded up to 24 KiB
  EXPECT_EQ(p.slot_bytes[0], 4096u * 12);
}

}  // namespace
}  // namespace sd
