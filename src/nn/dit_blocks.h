// Building blocks of diffusion transformers (FLUX.1, SD3's MMDiT, and the DiTs after them):
// adaLN modulation, MLP embedders and attention with rotary positions. Token-major
// tensors: [C, L, N].
#pragma once

#include <vector>

#include "nn/weights.h"
#include "tensor/ops/attention.h"

namespace sd::nn {

// adaLN-Zero's modulation vectors: lin(silu(vec)) for vec [hidden_in, N], cut into `count`
// chunks of `hidden`, each [hidden, 1, N] to broadcast over tokens.
std::vector<Tensor*> modulation_chunks(const Scope& lin, Tensor* vec, int64_t hidden, int count,
                                       bool bias = true);

// x * (1 + scale) + shift, for x already normalized.
Tensor* modulate(Context& ctx, Tensor* x, Tensor* shift, Tensor* scale);

// LayerNorm without affine parameters (eps 1e-6), then modulate: adaLN's normalization.
Tensor* norm_and_modulate(Context& ctx, Tensor* x, Tensor* shift, Tensor* scale);

// An MLP embedder: second(silu(first(x))), x [in, N] -> [hidden, N]. The two linears are
// named by the checkpoint (FLUX.1: in_layer / out_layer; SD3: mlp.0 / mlp.2).
Tensor* mlp_embedder(const Scope& first, const Scope& second, Tensor* x, int64_t in, int64_t hidden,
                     bool bias = true);

// One token's rotary table over positions on several axes (FLUX.1's embed_nd): axis i's
// axes_dim[i] / 2 frequencies 1 / theta^(2j / axes_dim[i]) turned by pos[i], the axes one
// after another, in float arithmetic as the reference computes its tables. Writes
// sum(axes_dim) / 2 values to each of cos and sin.
void rope_row(const float* pos, const std::vector<int>& axes_dim, float theta, float* cos,
              float* sin);

// Rotary embedding of q or k [D, H, L, N]: each channel pair (2j, 2j + 1) of token t rotated
// by its angle, whose cos and sin are f32 [D / 2, L * N].
Tensor* apply_rope(Context& ctx, Tensor* x, Tensor* cos_t, Tensor* sin_t);

// Rotary embedding of x [D, H, L] with the two halves of each head rotated against each
// other (channel j with j + D / 2, Hugging Face's rotate_half), tables f32 [D / 2, L].
Tensor* apply_rope_halves(Context& ctx, Tensor* x, Tensor* cos_t, Tensor* sin_t);

// Scaled dot-product attention over [D, H, L, N] q, k, v with rotary positions applied to q
// and k: [D * H, L, N]. key_mask: null or f32 [L] added to every query's scores.
Tensor* rope_attention(Context& ctx, Tensor* q, Tensor* k, Tensor* v, Tensor* cos_t, Tensor* sin_t,
                       Tensor* key_mask, AttentionPrecision precision);

}  // namespace sd::nn
