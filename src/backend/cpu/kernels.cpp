#include "backend/cpu/kernels.h"

#include <array>

namespace sd {

namespace {

// Indexed by Op; the size check makes a new op without an entry fail the build.
constexpr std::array<CpuKernel, kOpCount> kFast = {
    nullptr,  // None
    nullptr,  // View
    nullptr,  // Reshape
    nullptr,  // Permute
    nullptr,  // Add
    nullptr,  // Sub
    nullptr,  // Mul
    nullptr,  // Div
    nullptr,  // Scale
    nullptr,  // Clamp
    nullptr,  // Unary
    nullptr,  // Cast
    nullptr,  // Cont
    nullptr,  // Concat
    nullptr,  // Pad
    nullptr,  // GetRows
    nullptr,  // Upscale
    nullptr,  // Sum
    nullptr,  // Mean
    nullptr,  // Softmax
    nullptr,  // GroupNorm
    nullptr,  // LayerNorm
    nullptr,  // RmsNorm
    nullptr,  // MatMul
    nullptr,  // Conv2d
    nullptr,  // Attention
    nullptr,  // Arange
    nullptr,  // TimestepEmbedding
};
static_assert(kFast.size() == kOpCount);

}  // namespace

CpuKernel cpu_fast_kernel(Op op) { return kFast[static_cast<size_t>(op)]; }

}  // namespace sd
