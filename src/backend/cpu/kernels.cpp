#include "backend/cpu/kernels.h"

#include "backend/cpu/linalg_kernels.h"
#include "backend/cpu/simd_kernels.h"
#include "tensor/op_table.h"

namespace sd {

namespace {

// Keyed by op. An op without an entry runs its reference kernel (Sum, Mean, Arange and
// TimestepEmbedding are small and off the hot path).
constexpr auto kFast = make_op_table<CpuKernel>({
    {Op::Add, cpu_binary},
    {Op::Sub, cpu_binary},
    {Op::Mul, cpu_binary},
    {Op::Div, cpu_binary},
    {Op::Scale, cpu_scale},
    {Op::Clamp, cpu_clamp},
    {Op::Unary, cpu_unary},
    {Op::Cast, cpu_cast},
    {Op::Cont, cpu_cont},
    {Op::Concat, cpu_concat},
    {Op::Pad, cpu_pad},
    {Op::GetRows, cpu_get_rows},
    {Op::Upscale, cpu_upscale},
    {Op::Softmax, cpu_softmax},
    {Op::GroupNorm, cpu_group_norm},
    {Op::LayerNorm, cpu_layer_norm},
    {Op::RmsNorm, cpu_rms_norm},
    {Op::MatMul, cpu_matmul},
    {Op::Conv2d, cpu_conv2d},
    {Op::Attention, cpu_attention},
});

}  // namespace

CpuKernel cpu_fast_kernel(Op op) {
  return kFast[static_cast<size_t>(op)];
}

}  // namespace sd
