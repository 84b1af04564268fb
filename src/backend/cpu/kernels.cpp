#include "backend/cpu/kernels.h"

#include <array>

#include "backend/cpu/linalg_kernels.h"
#include "backend/cpu/simd_kernels.h"

namespace sd {

namespace {

// Indexed by Op; the size check makes a new op without an entry fail the build.
constexpr std::array<CpuKernel, kOpCount> kFast = {
    nullptr,         // None
    nullptr,         // View
    nullptr,         // Reshape
    nullptr,         // Permute
    cpu_binary,      // Add
    cpu_binary,      // Sub
    cpu_binary,      // Mul
    cpu_binary,      // Div
    cpu_scale,       // Scale
    cpu_clamp,       // Clamp
    cpu_unary,       // Unary
    cpu_cast,        // Cast
    cpu_cont,        // Cont
    cpu_concat,      // Concat
    cpu_pad,         // Pad
    cpu_get_rows,    // GetRows
    cpu_upscale,     // Upscale
    nullptr,         // Sum
    nullptr,         // Mean
    cpu_softmax,     // Softmax
    cpu_group_norm,  // GroupNorm
    cpu_layer_norm,  // LayerNorm
    cpu_rms_norm,    // RmsNorm
    cpu_matmul,      // MatMul
    cpu_conv2d,      // Conv2d
    cpu_attention,   // Attention
    nullptr,         // Arange
    nullptr,         // TimestepEmbedding
};
static_assert(kFast.size() == kOpCount);

}  // namespace

CpuKernel cpu_fast_kernel(Op op) {
  return kFast[static_cast<size_t>(op)];
}

}  // namespace sd
