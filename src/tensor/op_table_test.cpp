#include "tensor/op_table.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "tensor/ops/reference.h"

namespace sd {
namespace {

TEST(OpTable, EveryOpHasAUniqueName) {
  std::set<std::string> names;
  for (int i = 0; i < kOpCount; ++i) {
    const Op op = static_cast<Op>(i);
    const std::string name(op_name(op));
    EXPECT_FALSE(name.empty()) << "op " << i;
    EXPECT_NE(name, "invalid") << "op " << i;
    EXPECT_TRUE(names.insert(name).second) << "two ops are named " << name;
  }
  EXPECT_EQ(op_name(Op::Count), "invalid");
}

// Names are keyed by op, not by position: spot checks across the enum.
TEST(OpTable, NamesMatchTheirOps) {
  EXPECT_EQ(op_name(Op::None), "none");
  EXPECT_EQ(op_name(Op::Add), "add");
  EXPECT_EQ(op_name(Op::GetRows), "get_rows");
  EXPECT_EQ(op_name(Op::RmsNorm), "rms_norm");
  EXPECT_EQ(op_name(Op::TimestepEmbedding), "timestep_embedding");
  EXPECT_EQ(unary_name(UnaryOp::Gelu), "gelu");
  EXPECT_EQ(unary_name(UnaryOp::Neg), "neg");
  for (int i = 0; i < static_cast<int>(UnaryOp::Count); ++i)
    EXPECT_FALSE(unary_name(static_cast<UnaryOp>(i)).empty()) << "unary op " << i;
}

TEST(OpTable, EveryComputingOpHasAReferenceKernel) {
  for (int i = 0; i < kOpCount; ++i) {
    const Op op = static_cast<Op>(i);
    if (computes(op))
      EXPECT_NE(reference_kernel(op), nullptr) << op_name(op) << " has no reference kernel";
    else
      EXPECT_EQ(reference_kernel(op), nullptr) << op_name(op) << " computes nothing";
  }
}

TEST(OpTable, CoverageCheckFindsAMissingEntry) {
  constexpr auto partial = make_op_table<int>({{Op::Add, 1}, {Op::Sub, 2}});
  static_assert(partial[op_index(Op::Sub)] == 2);
  static_assert(!op_table_covers(partial, computes));
  static_assert(op_table_covers(partial, [](Op op) { return op == Op::Add || op == Op::Sub; }));
}

}  // namespace
}  // namespace sd
