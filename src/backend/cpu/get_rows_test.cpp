// Fast GetRows against the reference: the same row dequantizer, so results are exact.
#include <gtest/gtest.h>

#include "simd_test_util.h"
#include "tensor/error.h"
#include "tensor/ops/get_rows.h"

namespace sd {
namespace {

constexpr DType kTableTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,
                                 DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                                 DType::Q4_K, DType::Q5_K, DType::Q6_K};

test::GraphCase get_rows_case(DType type, int64_t k, int64_t rows, int64_t n, int64_t batch,
                              int bad_id = 0) {
  test::GraphCase c;
  c.build = [=](Context& ctx) {
    Tensor* table = ctx.new_tensor(type, {k, rows}, "table");
    Tensor* ids = ctx.new_tensor(DType::I32, {n, batch}, "ids");
    return std::vector<Tensor*>{get_rows(ctx, table, ids)};
  };
  c.fill = [=](const Tensor& t, int) {
    if (t.type != DType::I32) return test::random_values(t.nelements(), 41, -2, 2);
    auto ids = test::random_values(t.nelements(), 43, 0, static_cast<float>(rows) - 0.01f);
    if (bad_id) ids[ids.size() / 2] = static_cast<float>(bad_id);
    return ids;
  };
  return c;
}

TEST(CpuGetRows, EveryTableType) {
  for (DType t : kTableTypes) {
    SCOPED_TRACE(dtype_name(t));
    test::expect_fast_path(get_rows_case(t, 256, 50, 77, 2), 1e-30, 0);
  }
  // CLIP-like token embedding rows (768 wide), 77 tokens, enough to spread over threads.
  test::expect_fast_path(get_rows_case(DType::F16, 768, 1000, 77, 1), 1e-30, 0);
}

TEST(CpuGetRows, OutOfRangeIdIsAnErrorNotACrash) {
  for (int bad : {-1, 50}) {
    auto c = get_rows_case(DType::F32, 8, 50, 9, 1, bad);
    EXPECT_FALSE(test::fast_kernel_accepts(c));
    EXPECT_THROW(test::run_case(c, CpuKernels::Fast), Error);
  }
}

}  // namespace
}  // namespace sd
