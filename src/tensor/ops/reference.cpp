#include "tensor/ops/reference.h"

#include <array>

#include "tensor/ops/cast.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/unary.h"
#include "tensor/ops/view.h"

namespace sd {

namespace {

// Indexed by Op; the size check makes a new op without an entry fail the build.
constexpr std::array<Kernel, kOpCount> kReference = {
    nullptr,            // None
    nullptr,            // View
    nullptr,            // Reshape
    nullptr,            // Permute
    reference_binary,   // Add
    reference_binary,   // Sub
    reference_binary,   // Mul
    reference_binary,   // Div
    reference_scale,    // Scale
    reference_clamp,    // Clamp
    reference_unary,    // Unary
    reference_cast,     // Cast
    reference_cont,     // Cont
    nullptr,            // Concat
    nullptr,            // Pad
    nullptr,            // GetRows
    nullptr,            // Upscale
    nullptr,            // Sum
    nullptr,            // Mean
    nullptr,            // Softmax
    nullptr,            // GroupNorm
    nullptr,            // LayerNorm
    nullptr,            // RmsNorm
    nullptr,            // MatMul
    nullptr,            // Conv2d
    nullptr,            // Attention
    nullptr,            // Arange
    nullptr,            // TimestepEmbedding
};
static_assert(kReference.size() == kOpCount);

}  // namespace

Kernel reference_kernel(Op op) { return kReference[static_cast<size_t>(op)]; }

}  // namespace sd
