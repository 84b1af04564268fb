// The layers every model is made of, reading their parameters from a Scope that names
// the layer (e.g. unet["out.2"]). Names and shapes follow PyTorch's modules:
//   Linear    weight [in, out] (engine order of PyTorch's [out, in]), bias [out]
//   Conv2d    weight [k, k, in, out], bias [out]
//   GroupNorm / LayerNorm  weight [C], bias [C]
#pragma once

#include "nn/weights.h"
#include "tensor/ops/attention.h"

namespace sd::nn {

// x [in, ...] -> [out, ...]
Tensor* linear(const Scope& s, Tensor* x, int64_t in, int64_t out, bool bias = true);

// x [W, H, in, N] -> [W', H', out, N]
Tensor* conv2d(const Scope& s, Tensor* x, int64_t in, int64_t out, int kernel, int stride = 1,
               int padding = 0, bool bias = true);

// x [W, H, C, N]: normalizes each of `groups` channel groups per sample.
Tensor* group_norm(const Scope& s, Tensor* x, int64_t channels, int groups = 32, float eps = 1e-5f);
// silu(group_norm(x)), in one pass.
Tensor* group_norm_silu(const Scope& s, Tensor* x, int64_t channels, int groups = 32,
                        float eps = 1e-5f);

// x [C, ...]: normalizes over C.
Tensor* layer_norm(const Scope& s, Tensor* x, int64_t channels, float eps = 1e-5f);

// x [C, ...]: RMSNorm over C with a weight (no bias).
Tensor* rms_norm(const Scope& s, Tensor* x, int64_t channels, float eps);

// Multi-head scaled dot-product attention on token-major tensors:
//   q [C, Lq, N], k [C, Lk, N], v [Cv, Lk, N] with `heads` heads -> [Cv, Lq, N].
// mask: null or f32 [Lk, Lq] added to the scores (attention op's contract).
Tensor* multi_head_attention(Context& ctx, Tensor* q, Tensor* k, Tensor* v, int64_t heads,
                             Tensor* mask = nullptr,
                             AttentionPrecision precision = AttentionPrecision::F32);

}  // namespace sd::nn
