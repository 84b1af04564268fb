// Fast MatMul (oneDNN) against the reference kernel: odd sizes, K not a multiple of 16,
// broadcast batch dims, strided views and every weight dtype.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>

#include "backend/compute_buffer.h"
#include "backend/cpu/dnnl_state.h"
#include "backend/cpu/linalg_kernels.h"
#include "backend/registry.h"
#include "host_vector_buffer.h"
#include "matmul_case.h"
#include "simd_test_util.h"
#include "tensor/ops/cast.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/view.h"

namespace sd {
namespace {

// Error bounds, for values uniform in [-1, 1] (|a_k b_k| <= 1, a sum of K of them):
// - f32 GEMM (f32 weights, f16 tiles): oneDNN sums in f32 in blocks, the
//   reference in double; observed errors reach 6e-8 K, so 3e-7 K leaves a margin of 5
//   while any indexing bug errs by O(1).
double f32_atol(int64_t K) {
  return 3e-7 * static_cast<double>(K);
}
// - bf16 GEMM (bf16 weights, tiles of the block types): both operands are rounded to 8 significant
//   bits, so each product is off by up to 2^-8 of itself, and K such errors add up like a
//   random walk: 2^-8 sqrt(K) is about four standard deviations (observed up to 0.7 of
//   it), so 2^-7 sqrt(K) bounds it with margin, still small against results of typical
//   size sqrt(K) / 3.
double bf16_atol(int64_t K) {
  return std::sqrt(static_cast<double>(K)) / 128;
}

bool bf16_gemm(DType t) {
  return t == DType::BF16 || (is_quantized(t) && t != DType::Q8_K);
}

double atol_for(DType t, int64_t K) {
  return bf16_gemm(t) ? bf16_atol(K) : f32_atol(K);
}

using test::matmul_case;
using Layout = test::MatMulLayout;

TEST(CpuMatMul, F32OddSizes) {
  for (auto [K, M, N] : {std::array<int64_t, 3>{1, 1, 1},
                         {3, 1, 5},
                         {17, 5, 3},
                         {33, 70, 9},
                         {333, 65, 31},
                         {96, 100, 77}}) {
    SCOPED_TRACE(testing::Message() << "K " << K << " M " << M << " N " << N);
    test::expect_fast_path(matmul_case(DType::F32, make_shape({K, M}), make_shape({K, N, 2})),
                           f32_atol(K), 0);
  }
}

TEST(CpuMatMul, WeightBroadcastsOverBatch) {
  // b's 4 x 6 batch over a's 2 x 3: each a slice serves 2 x 2 slices of b.
  for (DType t : {DType::F32, DType::BF16, DType::F16, DType::Q4_0}) {
    SCOPED_TRACE(dtype_name(t));
    test::expect_fast_path(matmul_case(t, make_shape({64, 7, 2, 3}), make_shape({64, 5, 4, 6})),
                           atol_for(t, 64), 0);
    test::expect_fast_path(matmul_case(t, make_shape({64, 9, 3, 1}), make_shape({64, 4, 3, 2})),
                           atol_for(t, 64), 0);
  }
}

TEST(CpuMatMul, StridedViews) {
  for (DType t : {DType::F32, DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(t));
    test::expect_fast_path(
        matmul_case(t, make_shape({45, 21}), make_shape({45, 19, 3}), Layout::TransposedB),
        atol_for(t, 45), 0);
    test::expect_fast_path(
        matmul_case(t, make_shape({40, 21}), make_shape({40, 19, 3, 2}), Layout::PermutedB),
        atol_for(t, 40), 0);
    test::expect_fast_path(
        matmul_case(t, make_shape({24, 33, 2}), make_shape({24, 10, 4}), Layout::TransposedA),
        atol_for(t, 24), 0);
  }
  test::expect_fast_path(
      matmul_case(DType::Q8_0, make_shape({64, 21}), make_shape({64, 19, 3}), Layout::PermutedB),
      atol_for(DType::Q8_0, 64), 0);
}

TEST(CpuMatMul, EveryWeightDtype) {
  const DType types[] = {DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,
                         DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K,
                         DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K};
  for (DType t : types) {
    SCOPED_TRACE(dtype_name(t));
    const int64_t K = block_size(t) == 256 ? 512 : 96;  // K-quants need whole 256-blocks
    test::expect_fast_path(matmul_case(t, make_shape({K, 37}), make_shape({K, 13, 2})),
                           atol_for(t, K), 0);
  }
}

TEST(CpuMatMul, WeightsLargerThanOneTile) {
  // 512 x 2100 values exceed one 1 Mi-value tile: a full 2048-row tile and a 52-row one.
  for (DType t : {DType::Q4_0, DType::F16}) {
    SCOPED_TRACE(dtype_name(t));
    test::expect_fast_path(matmul_case(t, make_shape({512, 2100}), make_shape({512, 5})),
                           atol_for(t, 512), 0);
  }
}

TEST(CpuMatMul, ActivationsConvertedInChunks) {
  // 4100 rows of K = 256 exceed one 1 Mi-value conversion chunk: 4096 rows, then 4.
  test::expect_fast_path(matmul_case(DType::BF16, make_shape({256, 5}), make_shape({256, 4100})),
                         bf16_atol(256), 0);
  test::expect_fast_path(
      matmul_case(DType::F32, make_shape({256, 5}), make_shape({256, 4100}), Layout::TransposedB),
      f32_atol(256), 0);
}

TEST(CpuMatMul, WeightsComputedInTheGraph) {
  // Not leaves, so never cached: packed per call (here once per batch of b).
  for (DType t : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(t));
    test::GraphCase c;
    c.build = [t](Context& ctx) {
      Tensor* a = cast(ctx, ctx.new_tensor(DType::F32, {48, 20, 2}, "a"), t);
      Tensor* b = ctx.new_tensor(DType::F32, {48, 9, 4}, "b");
      return std::vector<Tensor*>{matmul(ctx, a, b)};
    };
    test::expect_fast_path(c, atol_for(t, 48), 0);
  }
}

// Random values from `seed` written into t in its own dtype.
void set_random(Tensor* t, uint32_t seed) {
  const std::vector<float> v = test::random_values(t->nelements(), seed);
  std::vector<uint8_t> bytes(t->nbytes());
  quantize_rows(t->type, v.data(), bytes.data(), t->nrows(), t->ne[0]);
  tensor_set(*t, bytes.data());
}

// `graph` run on `backend`, and its output y.
std::vector<float> computed(Backend& backend, const Graph& graph, const Tensor* y) {
  backend.compute(graph);
  std::vector<float> out(static_cast<size_t>(y->nelements()));
  tensor_get(*y, out.data());
  return out;
}

// y = a b for a 64x48 weight `a` (a kFlagParam leaf, so the packed-weight cache serves it)
// in a buffer of its own, as a loader places weights, run on the fast and the reference
// backend.
struct WeightMatMul {
  using MakeBuffer = std::function<std::unique_ptr<Buffer>(BufferType&, size_t)>;
  WeightMatMul(DType t, const MakeBuffer& make_buffer)
      : cpu(static_cast<CpuDevice&>(DeviceRegistry::instance().get("CPU"))),
        memory(cpu.buffer_type()) {
    a = ctx.new_tensor(t, {64, 48}, "a");
    a->flags |= kFlagParam;
    b = ctx.new_tensor(DType::F32, {64, 8}, "b");
    y = matmul(ctx, a, b);
    graph = Graph::build({y});
    weights = make_buffer(cpu.buffer_type(), a->nbytes());
    bind_tensor(*a, *weights, 0);
    memory.allocate(graph);
    set_random(b, 1);
  }
  // The fast result's error against the reference's, a's values from `seed`.
  double scaled_error(uint32_t seed, double atol) {
    set_random(a, seed);
    const std::vector<float> got = computed(*fast, graph, y);
    return test::max_scaled_error(got, computed(*ref, graph, y), atol, 0);
  }

  CpuDevice& cpu;
  Context ctx;
  Tensor *a = nullptr, *b = nullptr, *y = nullptr;
  Graph graph;
  std::unique_ptr<Buffer> weights;
  ComputeBuffer memory;
  std::unique_ptr<Backend> fast = cpu.create_backend(BackendOptions{2}, CpuKernels::Fast);
  std::unique_ptr<Backend> ref = cpu.create_backend(BackendOptions{2}, CpuKernels::Reference);
};

// A weight rewritten in place (LoRA applied, another weight loaded at the same address)
// must not be served from the packed-weight cache.
TEST(CpuMatMul, CachedWeightsFollowInPlaceChanges) {
  for (DType t : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(t));
    WeightMatMul mm(t, [](BufferType& type, size_t size) { return type.allocate(size); });
    for (uint32_t seed : {2u, 3u}) {
      EXPECT_LE(mm.scaled_error(seed, atol_for(t, 64)), 1.0) << "weights from seed " << seed;
    }
  }
}

// A host buffer that says its bytes never change, as a read-only file mapping does. The
// test writes it behind that promise to play a different file mapped at the same address.
class ReadOnlyHostBuffer final : public test::HostVectorBuffer {
 public:
  using HostVectorBuffer::HostVectorBuffer;
  bool read_only() const override { return true; }
};

// Read-only weights are checked at two pieces only, not re-read every call; another weight
// mapped at the same address still gets its own packed copy.
TEST(CpuMatMul, ReadOnlyWeightsAtTheSameAddressAreTold) {
  WeightMatMul mm(DType::F32, [](BufferType& type, size_t size) {
    return std::make_unique<ReadOnlyHostBuffer>(type, size);
  });
  for (uint32_t seed : {2u, 2u, 3u}) {
    EXPECT_LE(mm.scaled_error(seed, atol_for(DType::F32, 64)), 1.0) << "weights from seed " << seed;
  }
}

// At few rows, a bf16 weight the packed-weight cache does not keep is read as stored
// instead of packed into scratch on every call; more rows pack it per call. Cached,
// read as stored or packed per call, the product is the same.
TEST(CpuMatMul, Bf16WeightsTheCacheDoesNotKeepAreReadAsStored) {
  if (!__builtin_cpu_supports("avx512bf16")) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  auto& cpu = static_cast<CpuDevice&>(DeviceRegistry::instance().get("CPU"));
  for (int64_t rows : {77, 154, 300}) {
    std::vector<float> cached;
    for (size_t limit : {size_t{64} << 20, size_t{0}}) {
      SCOPED_TRACE(testing::Message() << rows << " rows, cache limit " << limit);
      Context ctx;
      Tensor* a = ctx.new_tensor(DType::BF16, {96, 40}, "a");
      a->flags |= kFlagParam;
      Tensor* y = matmul(ctx, a, ctx.new_tensor(DType::F32, {96, rows}, "b"));
      const Graph graph = Graph::build({y});
      const std::unique_ptr<Buffer> weights = cpu.buffer_type().allocate(a->nbytes());
      bind_tensor(*a, *weights, 0);
      ComputeBuffer memory(cpu.buffer_type());
      memory.allocate(graph);
      set_random(a, 5);
      set_random(y->src[1], 6);
      CpuContext cpu_ctx;
      cpu_ctx.threads = 2;
      cpu_ctx.dnnl->weight_cache_limit = limit;
      ASSERT_TRUE(cpu_matmul(cpu_ctx, y));
      std::vector<float> got(static_cast<size_t>(y->nelements()));
      tensor_get(*y, got.data());
      EXPECT_EQ(cpu_ctx.dnnl->weight_cache_bytes() > 0, limit > 0);
      auto ref = cpu.create_backend(BackendOptions{2}, CpuKernels::Reference);
      EXPECT_LE(test::max_scaled_error(got, computed(*ref, graph, y), bf16_atol(96), 0), 1.0);
      if (limit > 0)
        cached = got;
      else
        EXPECT_EQ(got, cached) << "differs from the cached copy's product";
    }
  }
}

}  // namespace
}  // namespace sd
