#include "tensor/ops/reference.h"

#include <array>

#include "tensor/ops/attention.h"
#include "tensor/ops/cast.h"
#include "tensor/ops/concat.h"
#include "tensor/ops/conv2d.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/generate.h"
#include "tensor/ops/get_rows.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/norm.h"
#include "tensor/ops/pad.h"
#include "tensor/ops/reduce.h"
#include "tensor/ops/softmax.h"
#include "tensor/ops/unary.h"
#include "tensor/ops/upscale.h"
#include "tensor/ops/view.h"

namespace sd {

namespace {

// Indexed by Op; the size check makes a new op without an entry fail the build.
constexpr std::array<Kernel, kOpCount> kReference = {
    nullptr,                       // None
    nullptr,                       // View
    nullptr,                       // Reshape
    nullptr,                       // Permute
    reference_binary,              // Add
    reference_binary,              // Sub
    reference_binary,              // Mul
    reference_binary,              // Div
    reference_scale,               // Scale
    reference_clamp,               // Clamp
    reference_unary,               // Unary
    reference_cast,                // Cast
    reference_cont,                // Cont
    reference_concat,              // Concat
    reference_pad,                 // Pad
    reference_get_rows,            // GetRows
    reference_upscale,             // Upscale
    reference_reduce,              // Sum
    reference_reduce,              // Mean
    reference_softmax,             // Softmax
    reference_group_norm,          // GroupNorm
    reference_layer_norm,          // LayerNorm
    reference_rms_norm,            // RmsNorm
    reference_matmul,              // MatMul
    reference_conv2d,              // Conv2d
    reference_attention,           // Attention
    reference_arange,              // Arange
    reference_timestep_embedding,  // TimestepEmbedding
};
static_assert(kReference.size() == kOpCount);

}  // namespace

Kernel reference_kernel(Op op) {
  return kReference[static_cast<size_t>(op)];
}

}  // namespace sd
