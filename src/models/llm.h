// A decoder-only language model used as a text encoder: the image models after FLUX.1 are
// conditioned on an LLM's hidden states instead of CLIP/T5 outputs. One transformer covers
// the three decoders they use, which differ only in small switches:
//   Qwen3 (Qwen team 2025, "Qwen3 Technical Report"): grouped-query attention with an RMS
//     norm over each head's queries and keys before the rotation, no biases;
//   Qwen2.5-VL's text model (Bai et al. 2025): biases on the q, k, v projections; its
//     multimodal RoPE gives text tokens the same position on all three axes, which is plain
//     RoPE;
//   Mistral (Jiang et al. 2023): neither.
// Pre-norm blocks x + attn(rms(x)), x + down(silu(gate(rms(x))) * up(rms(x))), causal
// attention, rotary positions on the whole head.
//
// Parameters, Hugging Face names below the caller's scope: model.embed_tokens.weight,
// model.layers.N.{input_layernorm, post_attention_layernorm}.weight,
// model.layers.N.self_attn.{q,k,v,o}_proj.{weight,bias}, model.layers.N.self_attn.{q,k}_norm
// .weight, model.layers.N.mlp.{gate,up,down}_proj.weight, model.norm.weight (llama.cpp's
// GGUF names are renamed onto these when the file is read, io/llm_gguf_names.h).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nn/weights.h"

namespace sd::models {

enum class LlmArch { Qwen3, Qwen2_5_VL, Mistral };
const char* llm_arch_name(LlmArch arch);

// How a head's channels pair up under RoPE. Hugging Face checkpoints rotate the two halves
// of a head against each other (channel j with j + head_dim / 2); llama.cpp's GGUF files of
// Llama-style models (Mistral) store q and k permuted so that neighbouring channels pair.
enum class RopeLayout { Halves, Pairs };

struct LlmConfig {
  LlmArch arch = LlmArch::Qwen3;
  int64_t vocab_size = 151936;
  int64_t hidden = 2560;
  int64_t intermediate = 9728;
  int layers = 36;
  int64_t heads = 32;
  int64_t kv_heads = 8;
  int64_t head_dim = 128;
  bool qkv_bias = false;
  bool qk_norm = true;
  float eps = 1e-6f;
  float rope_theta = 1000000.0f;
  RopeLayout rope_layout = RopeLayout::Halves;

  // Qwen/Qwen3-4B (Z-Image's text encoder).
  static LlmConfig qwen3_4b();
  // The text model of Qwen/Qwen2.5-VL-7B-Instruct (Qwen-Image's).
  static LlmConfig qwen2_5_vl_7b();
  // mistralai/Mistral-Small-3.2-24B-Instruct-2506's language model (FLUX.2 dev's).
  static LlmConfig mistral_small_3_2();
};

// The engine-order shape of a tensor named below the model's scope, or nullopt.
using LlmShapeOf = std::function<std::optional<std::array<int64_t, 4>>(const std::string& name)>;

// The decoder under `scope` from its tensors: vocabulary and width (embeddings), MLP width,
// layer count, head width (the q/k norm, else the preset's), query and key/value heads (the
// projections' widths), biases and q/k norms present or not. Norm eps, RoPE theta and layout
// stay the preset's. Throws sd::Error naming the tensor when the file is not such a decoder.
LlmConfig llm_config_from_shapes(LlmConfig preset, std::string_view scope,
                                 const LlmShapeOf& shape_of);

// The rotary tables of positions 0 .. len - 1: cos and sin of p * theta^(-2j / head_dim),
// each f32 [head_dim / 2, len].
struct LlmRope {
  std::vector<float> cos, sin;
};
LlmRope llm_rope(const LlmConfig& config, int64_t len);

// The additive attention mask of one sequence, f32 [len keys, len queries]: 0 where the
// query may look (keys at or before it, among the first `valid` tokens), -inf elsewhere.
// Queries past `valid` (padding) still see the valid keys, so no row is empty.
std::vector<float> llm_causal_mask(int64_t len, int64_t valid);

// Embeddings that take the place of some of the sequence's token embeddings: an image's
// tokens from a vision tower, f32 [hidden, n], at positions at .. at + n - 1.
struct LlmInsertedRows {
  int64_t at = 0;
  Tensor* rows = nullptr;
};

// Builds the decoder graph up to the deepest layer asked for.
//   token_ids: i32 [L] (one sequence); rope_cos, rope_sin: llm_rope's tables as f32
//   [head_dim / 2, L]; mask: f32 [L, L] as llm_causal_mask gives.
//   hidden_layers: the hidden states to return, each the output of that many blocks
//   (Hugging Face's hidden_states[i]: 0 the embeddings, `layers` the final-normed output
//   of the last block). Blocks past the largest are not built.
//   inserted: rows replacing token embeddings, in increasing positions, not overlapping.
// Returns one f32 [hidden, L] per asked index, in the order asked.
std::vector<Tensor*> llm_forward(const nn::Scope& llm, const LlmConfig& config, Tensor* token_ids,
                                 Tensor* rope_cos, Tensor* rope_sin, Tensor* mask,
                                 const std::vector<int>& hidden_layers,
                                 const std::vector<LlmInsertedRows>& inserted = {});

}  // namespace sd::models
