// The T5 v1.1 encoder (Raffel et al. 2020, "Exploring the Limits of Transfer Learning with a
// Unified Text-to-Text Transformer"; v1.1: gated-GELU feed-forward, no parameter sharing
// between embedding and classifier), the text encoder of FLUX.1 and SD3 (T5-XXL: d_model
// 4096, 24 layers, 64 heads of 64, d_ff 10240, google/t5-v1_1-xxl config.json).
//
// Pre-norm layers with RMS norms (T5LayerNorm: no mean, no bias, eps 1e-6); self-attention
// without the 1/sqrt(d) scaling and with a learned relative position bias, bucketed
// (bidirectional, 32 buckets, max distance 128), stored in the first layer and added in
// every layer; feed-forward wo(gelu_tanh(wi_0 x) * wi_1 x); a final RMS norm.
//
// umT5 (Chung et al. 2023, "UniMax"; Wan's text encoder, umt5-xxl: 256384 tokens) is the
// same network with one difference: every layer has its own relative position bias table
// (bias_per_layer), where T5 v1.1 shares block 0's.
//
// Parameters, Hugging Face names below the caller's scope: shared.weight,
// encoder.block.N.layer.0.{layer_norm, SelfAttention.{q,k,v,o}}, block 0's
// SelfAttention.relative_attention_bias (every block's, for umT5),
// encoder.block.N.layer.1.{layer_norm, DenseReluDense.{wi_0,wi_1,wo}}, encoder.final_layer_norm.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/weights.h"

namespace sd::models {

struct T5Config {
  int64_t vocab_size = 32128;
  int64_t model_dim = 4096;
  int64_t inner_dim = 4096;  // heads * d_kv
  int64_t ff_dim = 10240;
  int64_t heads = 64;
  int layers = 24;
  int relative_buckets = 32;
  int relative_max_distance = 128;
  float eps = 1e-6f;
  bool bias_per_layer = false;  // umT5: block N's own relative_attention_bias in layer N

  // google/t5-v1_1-xxl.
  static T5Config xxl() { return T5Config{}; }
};

// The bucket of each (query, key) pair for `n` tokens, i32 [n keys, n queries] (key
// fastest): T5's bidirectional relative position buckets of key - query.
std::vector<int32_t> t5_relative_position_buckets(int64_t n, int buckets, int max_distance);

// Builds the encoder graph.
//   token_ids: i32 [L, N];
//   buckets: i32 [L * L] holding t5_relative_position_buckets(L, ...);
//   key_mask: null or f32 [L], added to every score of that key (0, or -inf for padding).
// Returns f32 [model_dim, L, N], after the final norm.
Tensor* t5_encoder_forward(const nn::Scope& t5, const T5Config& config, Tensor* token_ids,
                           Tensor* buckets, Tensor* key_mask = nullptr);

}  // namespace sd::models
