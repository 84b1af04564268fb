// The CPU backend's fast kernels, one table indexed by Op. A kernel returns false to
// decline a node (dtype or layout it does not handle); the reference kernel runs then.
#pragma once

#include "backend/cpu/cpu_context.h"
#include "tensor/tensor.h"

namespace sd {

using CpuKernel = bool (*)(CpuContext& ctx, Tensor* dst);

CpuKernel cpu_fast_kernel(Op op);

}  // namespace sd
