#include "tensor/ops/reference.h"

#include "tensor/op_table.h"

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

// Keyed by op; leaves and views compute nothing and have no entry. The check makes a new
// op without a reference kernel fail the build.
constexpr auto kReference = make_op_table<Kernel>({
    {Op::Add, reference_binary},
    {Op::Sub, reference_binary},
    {Op::Mul, reference_binary},
    {Op::Div, reference_binary},
    {Op::Scale, reference_scale},
    {Op::Clamp, reference_clamp},
    {Op::Unary, reference_unary},
    {Op::Cast, reference_cast},
    {Op::Cont, reference_cont},
    {Op::Concat, reference_concat},
    {Op::Pad, reference_pad},
    {Op::GetRows, reference_get_rows},
    {Op::Upscale, reference_upscale},
    {Op::Sum, reference_reduce},
    {Op::Mean, reference_reduce},
    {Op::Softmax, reference_softmax},
    {Op::GroupNorm, reference_group_norm},
    {Op::LayerNorm, reference_layer_norm},
    {Op::RmsNorm, reference_rms_norm},
    {Op::MatMul, reference_matmul},
    {Op::Conv2d, reference_conv2d},
    {Op::Attention, reference_attention},
    {Op::Arange, reference_arange},
    {Op::TimestepEmbedding, reference_timestep_embedding},
});
static_assert(op_table_covers(kReference, computes), "an op has no reference kernel");

}  // namespace

Kernel reference_kernel(Op op) {
  return kReference[static_cast<size_t>(op)];
}

}  // namespace sd
