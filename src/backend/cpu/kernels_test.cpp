#include "backend/cpu/kernels.h"

#include <gtest/gtest.h>

namespace sd {
namespace {

// The CPU fast kernels sit at their own ops: the elementwise family shares one kernel,
// the rest have their own.
TEST(CpuKernels, FastKernelsAreKeyedByOp) {
  EXPECT_EQ(cpu_fast_kernel(Op::None), nullptr);
  EXPECT_EQ(cpu_fast_kernel(Op::View), nullptr);
  EXPECT_NE(cpu_fast_kernel(Op::Add), nullptr);
  EXPECT_EQ(cpu_fast_kernel(Op::Add), cpu_fast_kernel(Op::Div));
  EXPECT_NE(cpu_fast_kernel(Op::MatMul), nullptr);
  EXPECT_NE(cpu_fast_kernel(Op::MatMul), cpu_fast_kernel(Op::Conv2d));
  EXPECT_NE(cpu_fast_kernel(Op::Attention), nullptr);
  EXPECT_EQ(cpu_fast_kernel(Op::TimestepEmbedding), nullptr);
}

}  // namespace
}  // namespace sd
