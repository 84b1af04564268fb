// FLUX.1's diffusion transformer (Black Forest Labs 2024, "FLUX.1"; the rectified-flow
// MMDiT of Esser et al. 2024, "Scaling Rectified Flow Transformers for High-Resolution
// Image Synthesis", with parallel single-stream blocks). Released dev and schnell: hidden
// 3072, 24 heads of 128, MLP ratio 4, 19 double and 38 single blocks, T5-XXL context 4096,
// CLIP-L pooled vector 768, RoPE axes 16+56+56 with theta 10000; dev adds a guidance
// embedding (black-forest-labs/flux src/flux/model.py).
//
// Tokens: the latent in 2x2 patches (16 channels -> 64 per token), text tokens before image
// tokens in the joint sequence, 3-axis positions (0, row, column) for the image and zeros
// for the text.
//
// Parameters, BFL names below the caller's scope: img_in, time_in.{in,out}_layer,
// vector_in.*, guidance_in.*, txt_in, double_blocks.N.{img,txt}_{mod.lin, attn.qkv,
// attn.norm.{query,key}_norm.scale, attn.proj, mlp.0, mlp.2}, single_blocks.N.{linear1,
// linear2, norm.{query,key}_norm.scale, modulation.lin}, final_layer.{linear,
// adaLN_modulation.1}.
//
// Chroma (lodestones 2025, a FLUX.1-schnell derivative) prunes every modulation linear and
// the time, vector and guidance embedders: one "distilled guidance layer" (the approximator:
// distilled_guidance_layer.{in_proj, norms.N.scale, layers.N.{in,out}_layer, out_proj})
// maps sinusoids of (timestep, guidance, modulation index) to all shift/scale/gate vectors
// at once, and the text is T5's alone, with a key mask over its padding.
//
// FLUX.2 (Black Forest Labs 2025, "FLUX.2"; klein 4B/9B and dev, black-forest-labs/flux2
// src/flux2/model.py) keeps the two kinds of blocks and changes: the 32-channel latent
// comes already in 2x2 patches from its autoencoder (128 channels, patch 1 here); no linear
// has a bias; every block shares one modulation per stream kind
// (double_stream_modulation_{img,txt}.lin, single_stream_modulation.lin) instead of its
// own; the MLPs are SwiGLU (mlp ratio 3, gate half first); there is no pooled vector (and
// klein no guidance); RoPE has four axes of 32 with theta 2000, the text numbered along
// the last axis (token i at (0, 0, 0, i)), the image at (0, row, column, 0). Released klein
// 4B: hidden 3072, 24 heads, 5 double and 20 single blocks, text 7680 (Qwen3-4B's layers
// 9, 18 and 27 side by side).
#pragma once

#include <cstdint>
#include <vector>

#include "nn/patches.h"
#include "nn/weights.h"

namespace sd::models {

struct FluxConfig {
  int64_t in_channels = 64;  // packed 2x2 patches of the 16-channel latent
  int64_t out_channels = 64;
  int64_t hidden = 3072;
  int64_t heads = 24;
  int64_t mlp_hidden = 12288;
  int64_t context_dim = 4096;  // T5-XXL
  int64_t vec_dim = 768;       // CLIP-L pooled
  int depth = 19;              // double-stream blocks
  int depth_single = 38;       // single-stream blocks
  bool guidance_embed = true;  // dev: distilled guidance input
  std::vector<int> axes_dim = {16, 56, 56};
  float theta = 10000.0f;
  int patch_size = 2;
  // Chroma's approximator; depth 0: FLUX.1's per-block modulation linears instead.
  struct Approximator {
    int64_t in = 64;        // sinusoids: timestep in/4, guidance in/4, modulation index in/2
    int64_t hidden = 5120;  // inner width
    int depth = 0;          // residual RMSNorm + MLP layers
  } approximator;
  // FLUX.2's differences (see above).
  bool linear_bias = true;
  bool shared_modulation = false;
  bool gated_mlp = false;  // SwiGLU: the MLP's first linear gives 2 x mlp_hidden
  int text_axis = -1;      // the rotary axis numbering the text tokens; -1: all at 0
  int ref_index_step = 1;  // references' image indices step by this (FLUX.2: 10, 20, ...)

  int64_t head_dim() const { return hidden / heads; }
  // Width of the MLP's first linear.
  int64_t mlp_in() const { return gated_mlp ? 2 * mlp_hidden : mlp_hidden; }
  bool is_chroma() const { return approximator.depth > 0; }
  // Chroma's modulation vectors, in order: 3 per single block, 6 per double block's image
  // stream, 6 per double block's text stream, 2 for the final layer (344 when released).
  int64_t modulation_count() const { return 3 * depth_single + 12 * depth + 2; }

  // black-forest-labs/FLUX.1-dev and FLUX.1-schnell (no guidance embedding).
  static FluxConfig dev();
  static FluxConfig schnell();
  // lodestones/Chroma: schnell's transformer without modulation linears and vector input,
  // an approximator 64 -> 5120 (5 layers) -> 3072.
  static FluxConfig chroma();
  // black-forest-labs/FLUX.2-klein-4B (the 9B reads its widths from the file).
  static FluxConfig flux2_klein();
};

// The rotary tables of the joint sequence (text tokens, then the image's patches in
// row-major order), each f32 [1, head_dim / 2, text + image tokens]: cos and sin of
// position * theta^(-2j / axis_dim), the axes' frequencies one after another (axes past
// the third are 0 for image tokens).
struct FluxRope {
  std::vector<float> cos, sin;
};
FluxRope flux_rope(const FluxConfig& config, int64_t text_tokens, int64_t patches_h,
                   int64_t patches_w);
// A token's position on the three rotary axes: image index, row, column.
struct FluxPosition {
  float index = 0, row = 0, col = 0;
};
// As above, with `more` tokens after the image's at the positions given (FLUX.1 Kontext's
// reference images, models/flux_kontext.h).
FluxRope flux_rope(const FluxConfig& config, int64_t text_tokens, int64_t patches_h,
                   int64_t patches_w, const std::vector<FluxPosition>& more);

// Latent [W, H, C] planes <-> tokens [C * p * p, patches]: token (row, col) holds channel c's
// p x p patch at c * p * p + dy * p + dx (the reference's "c ph pw" order).
inline std::vector<float> flux_patchify(const std::vector<float>& latent, int64_t w, int64_t h,
                                        int64_t c, int p) {
  return nn::patchify(latent, w, h, c, p, nn::PatchOrder::ChannelMajor);
}
inline std::vector<float> flux_unpatchify(const std::vector<float>& tokens, int64_t w, int64_t h,
                                          int64_t c, int p) {
  return nn::unpatchify(tokens, w, h, c, p, nn::PatchOrder::ChannelMajor);
}

// Builds the DiT graph for one call.
//   img: f32 [in_channels, image tokens, N]; txt: f32 [context_dim, text tokens, N];
//   timesteps: f32 [N] in [0, 1] (sigma); guidance: f32 [N] or null (schnell);
//   y: f32 [vec_dim, N] (null for Chroma); rope_cos, rope_sin: f32 [1, head_dim / 2,
//   tokens * N], flux_rope's tables repeated once per batch entry;
//   key_mask (Chroma, N = 1): null or f32 [text + image tokens], added to every attention
//   score of that key (0 or -inf).
// Returns f32 [out_channels, image tokens, N]: the flow (velocity) prediction.
Tensor* flux_forward(const nn::Scope& dit, const FluxConfig& config, Tensor* img, Tensor* txt,
                     Tensor* timesteps, Tensor* guidance, Tensor* y, Tensor* rope_cos,
                     Tensor* rope_sin, Tensor* key_mask = nullptr);

}  // namespace sd::models
