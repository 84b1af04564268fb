// The Multimodal Diffusion Transformer of Stable Diffusion 3 (Esser et al. 2024, "Scaling
// Rectified Flow Transformers for High-Resolution Image Synthesis"; Stability-AI sd3-ref
// mmditx.py). Text and image tokens keep their own weights ("context_block" and "x_block"
// of each joint block) and attend jointly, text first; both are modulated (adaLN) by the
// sum of the timestep embedding and the pooled text vector.
//
// Released: SD3 Medium 24 joint blocks of hidden 1536; SD3.5 Large 38 of 2432 with RMS
// q/k norms; SD3.5 Medium (MMDiT-X) 24 of 1536 with RMS q/k norms and a second,
// image-only self-attention (x_block.attn2) in the first 13 blocks. Heads of 64 (as many
// heads as blocks), MLP ratio 4, 2x2 patches of the 16-channel latent, a learned position
// table of pos_embed_max_size^2 patches cropped around its centre, the last block's
// context stream "pre only" (no output projection, no MLP).
//
// Parameters below the caller's scope, sd3-ref names: pos_embed, x_embedder.proj,
// t_embedder.mlp.{0,2}, y_embedder.mlp.{0,2}, context_embedder, joint_blocks.N.
// {context_block,x_block}.{adaLN_modulation.1, attn.qkv, attn.proj, attn.ln_{q,k},
// attn2.*, mlp.fc{1,2}}, final_layer.{linear, adaLN_modulation.1}.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/patches.h"
#include "nn/weights.h"

namespace sd::models {

enum class QkNorm { None, Rms, LayerNorm };

struct MmditConfig {
  int64_t in_channels = 16;
  int64_t out_channels = 16;
  int64_t hidden = 1536;
  int depth = 24;               // joint blocks; also the head count (heads of 64)
  int64_t context_dim = 4096;   // CLIP-L + CLIP-G zero-padded, and T5-XXL
  int64_t adm_dim = 2048;       // pooled CLIP-L (768) + CLIP-G (1280)
  int64_t pos_embed_max = 192;  // the position table covers this many patches a side
  int patch_size = 2;
  int64_t mlp_ratio = 4;
  QkNorm qk_norm = QkNorm::None;
  int x_self_attn_blocks = 0;  // MMDiT-X: blocks 0 .. n-1 have x_block.attn2

  int64_t heads() const { return depth; }
  int64_t head_dim() const { return hidden / heads(); }
  int64_t patch_width() const { return patch_size * patch_size * out_channels; }

  // stabilityai/stable-diffusion-3-medium, stable-diffusion-3.5-medium and -large.
  static MmditConfig sd3_medium();
  static MmditConfig sd3_5_medium();
  static MmditConfig sd3_5_large();
};

// Image tokens [patch_width, patches] (token (row, col) holding (dy * p + dx) * C + c, the
// reference's patch-first order) -> latent planes [w, h, C].
inline std::vector<float> mmdit_unpatchify(const std::vector<float>& tokens, int64_t w, int64_t h,
                                           int64_t c, int p) {
  return nn::unpatchify(tokens, w, h, c, p, nn::PatchOrder::ChannelMinor);
}

// Builds the MMDiT graph for one call.
//   x: f32 [w, h, in_channels, N], w and h multiples of patch_size;
//   timesteps: f32 [N] in [0, 1000] (sigma * 1000);
//   y: f32 [adm_dim, N]; context: f32 [context_dim, L, N];
//   skip_layers: joint blocks left out (skip-layer guidance); empty for a normal pass.
// Returns f32 [patch_width, patches, N]: the flow (velocity) prediction in patches.
Tensor* mmdit_forward(const nn::Scope& dit, const MmditConfig& config, Tensor* x, Tensor* timesteps,
                      Tensor* y, Tensor* context, const std::vector<int>& skip_layers = {});

}  // namespace sd::models
