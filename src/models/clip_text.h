// CLIP's text transformer (Radford et al. 2021), the text encoder of Stable Diffusion:
// token + position embeddings, pre-norm transformer layers with causal self-attention,
// a final LayerNorm. SD1.x uses OpenAI's ViT-L/14 text tower, SD2.x OpenCLIP's ViT-H/14,
// SDXL both ViT-L/14 and OpenCLIP's ViT-bigG/14 (weights renamed to Hugging Face CLIP names
// by the loader). The conditioning is the hidden state of layer (layers - clip_skip), after
// the final LayerNorm for SD1.x/SD2.x and without it for SDXL, as sd.cpp takes it. SDXL also
// reads a pooled vector: the last layer's EOS token after the final LayerNorm, projected by
// text_projection.
//
// Parameters live under the scope "cond_stage_model.transformer.text_model." with Hugging
// Face names: embeddings.{token,position}_embedding.weight,
// encoder.layers.N.{layer_norm1,self_attn.{q,k,v,out}_proj,layer_norm2,mlp.fc1,mlp.fc2},
// final_layer_norm. Layers after the one read are never requested.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/weights.h"

namespace sd::models {

enum class ClipActivation { QuickGelu, Gelu };

struct ClipTextConfig {
  int64_t vocab_size = 49408;
  int64_t max_positions = 77;
  int64_t hidden = 768;
  int64_t intermediate = 3072;
  int64_t heads = 12;
  int layers = 12;
  ClipActivation activation = ClipActivation::QuickGelu;
  float layer_norm_eps = 1e-5f;
  // clip_skip when the user gives none (<= 0): sd.cpp takes the last layer for SD1.x and
  // the penultimate one for SD2.x (as the SD2 training did).
  int default_clip_skip = 1;
  // Token after EOS in a short prompt's window: EOS for OpenAI CLIP, 0 ("!") for OpenCLIP,
  // whose tokenizer pads with zeros.
  int pad_token = 49407;
  // The final LayerNorm is applied to the clip-skipped hidden state (SD1.x, SD2.x; SDXL's
  // encoders leave it out there and use it for the pooled vector only).
  bool final_layer_norm = true;
  // Width of text_projection (OpenCLIP ViT-bigG: 1280); 0: the encoder has none.
  int64_t projection_dim = 0;

  // openai/clip-vit-large-patch14 text config (SD1.x).
  static ClipTextConfig vit_l14();
  // laion/CLIP-ViT-H-14-laion2B-s32B-b79K text config (SD2.x).
  static ClipTextConfig vit_h14();
  // SDXL's encoders (sd_xl_base.yaml): ViT-L/14 without the final LayerNorm on its hidden
  // states, and laion/CLIP-ViT-bigG-14-laion2B-39B-b160k's text tower with its projection.
  static ClipTextConfig sdxl_vit_l14();
  static ClipTextConfig vit_bigg14();
};

// The encoder layer count to run for `clip_skip` (<= 0: the config's default): layers -
// clip_skip + 1. Throws sd::Error when clip_skip exceeds the layer count.
int clip_layers_to_run(const ClipTextConfig& config, int clip_skip);

// One pre-norm transformer layer, x + attn(ln1(x)) then x + mlp(ln2(x)), on x [hidden, L, N]
// (the vision tower's too: models/clip_vision.h); mask: null or added to the scores.
Tensor* clip_encoder_layer(const nn::Scope& layer, const ClipTextConfig& config, Tensor* x,
                           Tensor* mask);

// Values of the causal mask input: f32 [n, n] (key fastest), -inf where key > query.
std::vector<float> clip_causal_mask(int64_t n);

// Builds the encoder graph.
//   token_ids: i32 [77, N]; ids >= vocab_size select rows of `custom_embeddings`.
//   causal_mask: f32 [77, 77] holding clip_causal_mask(77).
//   custom_embeddings: null, or f32 [hidden, M]: textual-inversion vectors appended to the
//     token table (ids vocab_size .. vocab_size + M - 1).
// Returns f32 [hidden, 77, N].
Tensor* clip_text_forward(const nn::Scope& text_model, const ClipTextConfig& config,
                          Tensor* token_ids, Tensor* causal_mask, int clip_skip,
                          Tensor* custom_embeddings = nullptr);

// Both outputs of an encoder with a projection, from one pass over the layers.
struct ClipTextOutputs {
  Tensor* hidden = nullptr;  // f32 [hidden, 77, N], as clip_text_forward
  Tensor* pooled = nullptr;  // f32 [projection_dim (or hidden without one), 1, N]
};
// As clip_text_forward, plus the pooled vector: the last layer's state at token
// `pooled_token` (the first EOS) after the final LayerNorm, times text_projection when the
// encoder has one (FLUX.1 takes CLIP-L's without a projection).
ClipTextOutputs clip_text_forward_pooled(const nn::Scope& text_model, const ClipTextConfig& config,
                                         Tensor* token_ids, Tensor* causal_mask, int clip_skip,
                                         int64_t pooled_token, Tensor* custom_embeddings = nullptr);

}  // namespace sd::models
