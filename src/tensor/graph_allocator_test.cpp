#include "tensor/graph_allocator.h"

#include <gtest/gtest.h>

#include "tensor/error.h"
#include "tensor/ops/conv2d.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/reduce.h"
#include "tensor/ops/unary.h"
#include "tensor/ops/upscale.h"
#include "tensor/ops/view.h"
#include "test_support.h"

namespace sd {
namespace {

// A chain where each intermediate dies after the next op: reuse must keep the buffer at
// about two tensors instead of one per op.
std::vector<Tensor*> chain(Context& ctx, int length) {
  Tensor* x = ctx.new_tensor(DType::F32, {256, 64}, "x");
  Tensor* b = ctx.new_tensor(DType::F32, {256, 1}, "b");
  Tensor* y = x;
  for (int i = 0; i < length; ++i) {
    y = add(ctx, silu(ctx, y), b);
    if (i % 3 == 2) y = cont(ctx, transpose(ctx, reshape(ctx, y, {256, 64})));
    if (i % 3 == 2) y = cont(ctx, transpose(ctx, y));
  }
  return {y};
}

TEST(GraphAllocator, ReuseShrinksTheBufferAndKeepsResults) {
  Context ctx;
  Graph g = Graph::build(chain(ctx, 12));
  AllocationPlan reused = plan_allocation(g, 64, true);
  AllocationPlan separate = plan_allocation(g, 64, false);
  EXPECT_EQ(separate.size, separate.size_without_reuse);
  EXPECT_LT(reused.size * 4, separate.size) << "reuse saved too little";

  test::GraphCase c;
  c.build = [](Context& ctx) { return chain(ctx, 12); };
  c.reuse_memory = true;
  auto with_reuse = test::run_case(c, CpuKernels::Fast);
  c.reuse_memory = false;
  auto without = test::run_case(c, CpuKernels::Fast);
  ASSERT_EQ(with_reuse.size(), 1u);
  EXPECT_EQ(with_reuse[0], without[0]);  // bit-identical
}

TEST(GraphAllocator, ChunksHoldWholeTensorsAndTheSameValues) {
  Context ctx;
  Graph g = Graph::build(chain(ctx, 12));
  const AllocationPlan whole = plan_allocation(g, 64, true);
  // 64 KiB per tensor: chunks of 100 KiB hold one each, with room left for none.
  const size_t chunk = 100 * 1024;
  const AllocationPlan chunked = plan_allocation(g, 64, true, InPlace::Auto, chunk);
  EXPECT_EQ(chunked.chunk, chunk);
  EXPECT_GT(chunked.size, chunk);  // more than one chunk
  for (const auto& [t, offset] : chunked.offsets)
    EXPECT_EQ(offset / chunk, (offset + t->nbytes() - 1) / chunk) << t->name << " crosses a chunk";
  EXPECT_EQ(whole.chunk / 64 * 64, whole.chunk);
  // A tensor larger than a chunk cannot be placed, and says so.
  try {
    plan_allocation(g, 64, true, InPlace::Auto, 1024);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("largest allocation"), std::string::npos) << e.what();
  }
}

TEST(GraphAllocator, OutputsAndInputsAreNeverOverwritten) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {1000}, "x");
  Tensor* a = silu(ctx, x);
  Tensor* b = silu(ctx, a);  // a is an output: must survive b's and c's placement
  Tensor* c = silu(ctx, b);
  Graph g = Graph::build({a, c});
  AllocationPlan plan = plan_allocation(g, 64, true);
  std::map<Tensor*, size_t> off(plan.offsets.begin(), plan.offsets.end());
  EXPECT_NE(off[x], off[a]);
  EXPECT_NE(off[a], off[c]);
  EXPECT_NE(off[x], off[c]);
}

// A convolution of a nearest 2x upscale may read the upscale's source (conv2d.h): its
// output must not land on that source, though the upscale was the source's last reader.
// An elementwise node writes over a same-shaped source that dies with it; a source it reads
// twice, or that a later node still reads, keeps its memory, and so do outputs. Results
// stay bit-identical.
TEST(GraphAllocator, ElementwiseNodesWriteOverTheirDyingSource) {
  const auto build = [](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {1000}, "x");
    Tensor* a = silu(ctx, x);    // x is an input: never written over
    Tensor* b = silu(ctx, a);    // over a
    Tensor* c = mul(ctx, b, b);  // b read twice: not over b
    Tensor* d = silu(ctx, c);    // c is read again below: not over c
    Tensor* e = add(ctx, d, c);  // over d
    Tensor* f = sum(ctx, e, 0);  // the output
    return std::vector<Tensor*>{x, a, b, c, d, e, f};
  };
  Context ctx;
  const std::vector<Tensor*> t = build(ctx);
  Graph g = Graph::build({t.back()});
  AllocationPlan plan = plan_allocation(g, 64, true, InPlace::Always);
  std::map<Tensor*, size_t> off(plan.offsets.begin(), plan.offsets.end());
  EXPECT_NE(off.at(t[1]), off.at(t[0]));
  EXPECT_EQ(off.at(t[2]), off.at(t[1]));
  EXPECT_NE(off.at(t[3]), off.at(t[2]));
  EXPECT_NE(off.at(t[4]), off.at(t[3]));
  EXPECT_EQ(off.at(t[5]), off.at(t[4]));
  // A residual block (skip k, a "projection", its bias add and activation, the residual
  // add) needs two blocks written over, three otherwise: Auto picks the two.
  const auto residual_block = [](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {1000}, "x");
    Tensor* bias = ctx.new_tensor(DType::F32, {1000}, "bias");
    Tensor* k = silu(ctx, x);
    Tensor* z = silu(ctx, add(ctx, silu(ctx, k), bias));
    return std::vector<Tensor*>{sum(ctx, add(ctx, z, k), 0)};
  };
  Graph block = Graph::build(residual_block(ctx));
  EXPECT_LT(plan_allocation(block, 64, true).size,
            plan_allocation(block, 64, true, InPlace::Never).size);

  test::GraphCase c;
  c.build = residual_block;
  c.reuse_memory = true;
  auto written_over = test::run_case(c, CpuKernels::Fast);
  auto reference = test::run_case(c, CpuKernels::Reference);
  c.reuse_memory = false;
  auto separate = test::run_case(c, CpuKernels::Fast);
  ASSERT_EQ(written_over.size(), 1u);
  EXPECT_EQ(written_over[0], separate[0]);  // bit-identical
  ASSERT_EQ(reference.size(), 1u);
  ASSERT_NEAR(written_over[0][0], reference[0][0], 1e-3);
}

TEST(GraphAllocator, UpscaleSourceLivesUntilTheConvolutionReadingThroughIt) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {8, 8, 4, 1}, "x");
  Tensor* w = ctx.new_tensor(DType::F32, {3, 3, 4, 1}, "w");
  Tensor* small = silu(ctx, x);  // 1 KiB
  Tensor* up = upscale_nearest(ctx, small, 2);
  Tensor* out = conv2d(ctx, up, w, nullptr, 1, 1, 1, 1, 1, 1);  // 1 KiB: would fit in small's
  ASSERT_EQ(conv2d_upsampled_source(out), small);
  AllocationPlan plan = plan_allocation(Graph::build({out}), 64, true);
  std::map<Tensor*, size_t> off(plan.offsets.begin(), plan.offsets.end());
  const size_t a = off.at(small), b = off.at(out);
  EXPECT_TRUE(a + small->nbytes() <= b || b + out->nbytes() <= a)
      << "the convolution's output overlaps the upscale's source";
}

TEST(GraphAllocator, ViewsShareTheirSourceMemory) {
  test::GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {8, 6, 4}, "x");
    Tensor* s = slice(ctx, permute(ctx, x, {2, 0, 1, 3}), 1, 2, 5);  // [4, 3, 6]
    return std::vector<Tensor*>{scale(ctx, s, 2.0f)};
  };
  c.fill = [](const Tensor& t, int) {
    std::vector<float> v(static_cast<size_t>(t.nelements()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
    return v;
  };
  auto out = test::run_case(c, CpuKernels::Reference)[0];
  ASSERT_EQ(out.size(), 4u * 3 * 6);
  // out[i0, i1, i2] = 2 * x[i1 + 2, i2, i0] = 2 * ((i1 + 2) + 8 * i2 + 48 * i0)
  for (int i2 = 0; i2 < 6; ++i2)
    for (int i1 = 0; i1 < 3; ++i1)
      for (int i0 = 0; i0 < 4; ++i0)
        EXPECT_EQ(out[i0 + 4 * (i1 + 3 * i2)], 2.0f * ((i1 + 2) + 8 * i2 + 48 * i0));
}

TEST(GraphAllocator, StructuralHashIgnoresDataButNotShape) {
  auto hash_of = [](int64_t n) {
    Context ctx;
    Tensor* x = ctx.new_tensor(DType::F32, {n}, "x");
    return Graph::build({silu(ctx, x)}).structural_hash();
  };
  EXPECT_EQ(hash_of(16), hash_of(16));
  EXPECT_NE(hash_of(16), hash_of(32));
}

}  // namespace
}  // namespace sd

#include "sd15_block_graph.h"

namespace sd {
namespace {

// On a real SD1.5 stage most intermediates die young: liveness reuse must keep the
// compute buffer well under one-buffer-per-tensor. The floor is the feed-forward's live
// set (GEGLU projection 84 MiB + gate 42 MiB + product 42 MiB + residual), ~190 MiB.
TEST(GraphAllocator, Sd15StageNeedsAFractionOfTheNaiveMemory) {
  Context ctx;
  test::Sd15BlockBuilder builder(ctx, {});
  Graph g = Graph::build({builder.build()});
  AllocationPlan plan = plan_allocation(g, 64, true);
  const double mib = 1.0 / (1 << 20);
  std::printf("SD1.5 64x64 stage: %zu ops, compute buffer %.0f MiB with reuse, %.0f MiB without\n",
              g.nodes.size(), plan.size * mib, plan.size_without_reuse * mib);
  EXPECT_LT(plan.size * 10, plan.size_without_reuse * 4);
  EXPECT_LT(plan.size, size_t{210} << 20);
  for (auto& [t, offset] : plan.offsets) EXPECT_FALSE(t->has_flag(kFlagParam)) << t->name;
}

}  // namespace
}  // namespace sd
