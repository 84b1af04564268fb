// The blocks of the latent-diffusion UNet (Rombach et al. 2022, "High-Resolution Image
// Synthesis with Latent Diffusion Models"), named as in the LDM code and its checkpoints:
// openaimodel.py's ResBlock, Downsample, Upsample and time_embed, and attention.py's
// SpatialTransformer with its BasicTransformerBlock, CrossAttention and GEGLU FeedForward.
//
// Layouts: images are [W, H, C, N] (PyTorch's NCHW in ne order); token sequences are
// [C, L, N] (PyTorch's [N, L, C]); embeddings are [C, N].
#pragma once

#include <cstdint>

#include "nn/weights.h"

namespace sd::models {

// GroupNorm32 of the LDM code. sd.cpp compatibility: it normalizes every UNet GroupNorm
// with eps 1e-6 (LDM's ResBlock and output norms use PyTorch's default 1e-5; the
// SpatialTransformer's uses 1e-6). The difference is below f16 weight precision.
constexpr int kNormGroups = 32;
constexpr float kGroupNormEps = 1e-6f;

// time_embed: Linear(model_channels, time_embed_dim), SiLU, Linear(time_embed_dim,
// time_embed_dim) applied to the sinusoidal embedding of the timesteps.
struct TimestepEmbedding {
  int64_t model_channels;
  int64_t time_embed_dim;

  // timesteps f32 [N] -> [time_embed_dim, N]
  Tensor* forward(const nn::Scope& s, Tensor* timesteps) const;
};

// ResBlock: two GroupNorm-SiLU-conv3x3 stages with the timestep embedding added per
// channel in between; a 1x1 conv (skip_connection) matches the residual's channels.
struct ResBlock {
  int64_t in_channels;
  int64_t out_channels;
  int64_t emb_channels;

  // x [W, H, in_channels, N], emb [emb_channels, N] -> [W, H, out_channels, N]
  Tensor* forward(const nn::Scope& s, Tensor* x, Tensor* emb) const;
};

// Downsample: a 3x3 conv with stride 2 ("op").
struct Downsample {
  int64_t channels;

  // [W, H, C, N] -> [W / 2, H / 2, C, N] (rounded up)
  Tensor* forward(const nn::Scope& s, Tensor* x) const;
};

// Upsample: nearest-neighbour 2x, then a 3x3 conv ("conv").
struct Upsample {
  int64_t channels;

  // [W, H, C, N] -> [2 W, 2 H, C, N]
  Tensor* forward(const nn::Scope& s, Tensor* x) const;
};

// Multi-head attention of queries from x over keys and values from `context` (x itself
// for self-attention): to_q/to_k/to_v without bias, softmax(q k^T / sqrt(head_dim)) v,
// then to_out.0 with bias.
struct CrossAttention {
  int64_t query_dim;
  int64_t context_dim;
  int64_t heads;
  int64_t head_dim;

  // x [query_dim, L, N], context [context_dim, Lc, N] -> [query_dim, L, N]
  Tensor* forward(const nn::Scope& s, Tensor* x, Tensor* context) const;
};

// FeedForward with a GEGLU input layer (Shazeer 2020): net.0.proj maps to twice the inner
// width, the first half is gated by GELU (tanh form) of the second, net.2 maps back.
struct FeedForward {
  int64_t dim;
  int64_t mult = 4;

  // [dim, L, N] -> [dim, L, N]
  Tensor* forward(const nn::Scope& s, Tensor* x) const;
};

// BasicTransformerBlock: pre-LayerNorm self-attention, cross-attention to the text
// context and feed-forward, each added to its input.
struct BasicTransformerBlock {
  int64_t dim;
  int64_t heads;
  int64_t head_dim;
  int64_t context_dim;

  // x [dim, L, N], context [context_dim, Lc, N] -> [dim, L, N]
  Tensor* forward(const nn::Scope& s, Tensor* x, Tensor* context) const;
};

// SpatialTransformer: GroupNorm, proj_in to tokens, `depth` BasicTransformerBlocks,
// proj_out back to an image, plus the input. SD1.x projects with 1x1 convs, SD2.x
// (use_linear_in_transformer) with Linear layers; both are the same map over channels.
struct SpatialTransformer {
  int64_t channels;
  int64_t heads;
  int64_t head_dim;
  int depth = 1;
  int64_t context_dim;
  bool linear_proj = false;

  // x [W, H, channels, N], context [context_dim, Lc, N] -> [W, H, channels, N]
  Tensor* forward(const nn::Scope& s, Tensor* x, Tensor* context) const;
};

}  // namespace sd::models
