#include "tensor/ops/get_rows.h"

#include <gtest/gtest.h>

#include <map>

#include "tensor/error.h"
#include "tensor/ops/cast.h"
#include "tensor/ops/view.h"
#include "test_support.h"

namespace sd {
namespace {

using Values = test::NamedValues;

std::vector<float> iota(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return v;
}

// Row r of a [k, rows] table stored contiguously.
std::vector<float> row(const std::vector<float>& table, int64_t k, int64_t r) {
  return {table.begin() + r * k, table.begin() + (r + 1) * k};
}

TEST(GetRows, GathersRowsInIdOrder) {
  auto out = test::run_reference(
      [](Context& ctx) {
        Tensor* table = ctx.new_tensor(DType::F32, {3, 5}, "table");
        Tensor* ids = ctx.new_tensor(DType::I32, {3}, "ids");
        Tensor* t = get_rows(ctx, table, ids);
        EXPECT_EQ(t->ne, make_shape({3, 3}));
        return std::vector<Tensor*>{t};
      },
      {{"table", iota(15)}, {"ids", {4, 0, 4}}});
  EXPECT_EQ(out[0], (std::vector<float>{12, 13, 14, 0, 1, 2, 12, 13, 14}));
}

TEST(GetRows, BatchedIdsGiveA3dResult) {
  auto out = test::run_reference(
      [](Context& ctx) {
        Tensor* table = ctx.new_tensor(DType::F16, {2, 4}, "table");
        Tensor* ids = ctx.new_tensor(DType::I32, {2, 2}, "ids");
        Tensor* t = get_rows(ctx, table, ids);
        EXPECT_EQ(t->ne, make_shape({2, 2, 2}));
        EXPECT_EQ(t->type, DType::F32);
        return std::vector<Tensor*>{t};
      },
      {{"table", iota(8)}, {"ids", {3, 1, 0, 2}}});
  EXPECT_EQ(out[0], (std::vector<float>{6, 7, 2, 3, 0, 1, 4, 5}));
}

TEST(GetRows, Q8TableGivesDequantizedRows) {
  auto out = test::run_reference(
      [](Context& ctx) {
        Tensor* table = ctx.new_tensor(DType::Q8_0, {64, 6}, "table");
        Tensor* ids = ctx.new_tensor(DType::I32, {4}, "ids");
        return std::vector<Tensor*>{get_rows(ctx, table, ids), cast(ctx, table, DType::F32)};
      },
      {{"ids", {5, 2, 2, 0}}});
  const std::vector<float>& rows = out[0];
  const std::vector<float>& dequantized = out[1];
  const int64_t picked[] = {5, 2, 2, 0};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(row(rows, 64, i), row(dequantized, 64, picked[i])) << "row " << i;
  }
}

TEST(GetRows, StridedIdsMatchContiguousCopy) {
  auto out = test::run_reference(
      [](Context& ctx) {
        Tensor* table = ctx.new_tensor(DType::F32, {4, 6}, "table");
        Tensor* ids = ctx.new_tensor(DType::I32, {2, 3}, "ids");
        Tensor* idt = transpose(ctx, ids);  // [3, 2], strided
        return std::vector<Tensor*>{get_rows(ctx, table, idt),
                                    get_rows(ctx, table, cont(ctx, idt))};
      },
      {{"ids", {0, 5, 1, 4, 2, 3}}});
  EXPECT_EQ(out[0], out[1]);
}

TEST(GetRows, OutOfRangeIdIsAnErrorNamingIdAndTable) {
  for (float bad : {6.0f, -1.0f}) {
    test::GraphCase c;
    c.build = [](Context& ctx) {
      Tensor* table = ctx.new_tensor(DType::F32, {4, 6}, "token_embedding");
      Tensor* ids = ctx.new_tensor(DType::I32, {3}, "ids");
      return std::vector<Tensor*>{get_rows(ctx, table, ids)};
    };
    c.fill = [bad](const Tensor& t, int) {
      return t.name == "ids" ? std::vector<float>{1, bad, 2} : std::vector<float>{};
    };
    try {
      test::run_case(c, CpuKernels::Reference);
      ADD_FAILURE() << "id " << bad << " was accepted";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("id " + std::to_string(static_cast<int>(bad))), std::string::npos) << msg;
      EXPECT_NE(msg.find("token_embedding"), std::string::npos) << msg;
    }
  }
}

TEST(GetRows, RejectsBadInputs) {
  Context ctx;
  Tensor* table = ctx.new_tensor(DType::F32, {4, 6}, "table");
  Tensor* table3 = ctx.new_tensor(DType::F32, {4, 6, 2}, "table3");
  Tensor* ids = ctx.new_tensor(DType::I32, {3}, "ids");
  Tensor* fids = ctx.new_tensor(DType::F32, {3}, "fids");
  Tensor* ids3 = ctx.new_tensor(DType::I32, {3, 2, 2}, "ids3");
  Tensor* itable = ctx.new_tensor(DType::I32, {4, 6}, "itable");
  EXPECT_THROW(get_rows(ctx, table, fids), Error);
  EXPECT_THROW(get_rows(ctx, table3, ids), Error);
  EXPECT_THROW(get_rows(ctx, table, ids3), Error);
  EXPECT_THROW(get_rows(ctx, itable, ids), Error);
}

}  // namespace
}  // namespace sd
