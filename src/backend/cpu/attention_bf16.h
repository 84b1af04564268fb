// Fused attention at the bf16 rate, for nodes whose precision is AttentionPrecision::BF16
// (a model run in bf16): q, k, v and the softmax weights are rounded to bf16 and
// multiplied with AVX512_BF16's pairwise dot products into f32 accumulators, twice the
// multiply-adds per instruction of the f32 kernel (attention.cpp). The algorithm is the
// same: blocks of queries in vector lanes, keys in blocks, an online softmax in f32.
#pragma once

#include "backend/cpu/cpu_context.h"
#include "tensor/tensor.h"

namespace sd {

// Runs the node (q, k, v, mask f32; dst contiguous) and returns true, or returns false
// without touching it when this CPU has no AVX512_BF16.
bool cpu_attention_bf16(CpuContext& ctx, Tensor* dst);

}  // namespace sd
