// The UNet of Stable Diffusion 1.x, 2.x and SDXL: the denoiser of latent diffusion (Rombach
// et al. 2022), the LDM code's openaimodel.UNetModel. It predicts the noise (or v) of a
// latent at a timestep, conditioned on text-encoder tokens through cross-attention and, for
// SDXL (Podell et al. 2023), on a vector (pooled text embedding and size embeddings) added
// to the timestep embedding through label_emb.
//
// Tensors are read below "model.diffusion_model." with the names of the original LDM
// checkpoints (input_blocks.*, middle_block.*, output_blocks.*, time_embed.*, out.*).
#pragma once

#include <cstdint>
#include <vector>

#include "nn/weights.h"

namespace sd::models {

struct UnetConfig {
  int64_t in_channels = 4;
  int64_t out_channels = 4;
  int64_t model_channels = 320;
  // Channels of each resolution level, in units of model_channels; every level but the
  // last halves the resolution.
  std::vector<int> channel_mult{1, 2, 4, 4};
  int num_res_blocks = 2;
  // Levels (indices into channel_mult) whose blocks end in a SpatialTransformer. The LDM
  // configs give their downsampling factors instead: attention_resolutions [4, 2, 1] are
  // levels 2, 1, 0. The middle block always has one.
  std::vector<int> attention_levels{0, 1, 2};
  // Attention heads: num_heads per block when head_dim is -1, else channels / head_dim
  // heads of head_dim (LDM's num_head_channels).
  int num_heads = 8;
  int head_dim = -1;
  int transformer_depth = 1;
  // Transformer blocks per level where they differ (SDXL: 0, 2, 10); empty: every level
  // with attention has transformer_depth. middle_depth < 0: the deepest level's depth.
  std::vector<int> level_depth;
  // middle_depth 0: the middle block is one res block (Segmind's SSD-1B and Vega).
  int middle_depth = -1;
  // Transformer blocks after each res block where they differ within a level (SSD-1B,
  // Vega): one entry per input res block, and per output res block, in block order; empty:
  // depth_at(level).
  std::vector<int> input_block_depth, output_block_depth;
  int64_t context_dim = 768;
  // Width of the vector the label_emb MLP adds to the timestep embedding (SDXL: 2816);
  // 0: no vector conditioning.
  int64_t adm_in_channels = 0;
  // SpatialTransformer projections are Linear layers (use_linear_in_transformer) rather
  // than 1x1 convs.
  bool linear_proj = false;

  int64_t time_embed_dim() const { return 4 * model_channels; }
  // Transformer blocks at `level` (0 where the level has no attention) and in the middle.
  int depth_at(int level) const;
  int depth_middle() const;
  // Transformer blocks after res block `j` of `level` in the input / output blocks.
  int input_depth(int level, int j) const;
  int output_depth(int level, int j) const;
  // Heads for a transformer over `channels`.
  int64_t heads_for(int64_t channels) const;
  // Throws an sd::Error naming the inconsistent field.
  void validate() const;

  // v1-inference.yaml (SD 1.x): 8 heads, 768-dim CLIP ViT-L/14 context, 1x1 conv projections.
  static UnetConfig sd1();
  // v1-inpainting-inference.yaml: the same with 9 input channels (latent, mask, masked-image
  // latent).
  static UnetConfig sd1_inpaint();
  // v2-inference.yaml / v2-inference-v.yaml (SD 2.x): 64-channel heads, 1024-dim OpenCLIP
  // ViT-H/14 context, Linear projections.
  static UnetConfig sd2();
  // sd_xl_base.yaml (SDXL base): 3 levels with no attention at the first, transformer depth
  // 2 and 10 (10 in the middle), 64-channel heads, 2048-dim context (CLIP ViT-L/14 and
  // OpenCLIP ViT-bigG/14 concatenated), Linear projections, a 2816-dim vector.
  static UnetConfig sdxl();
};

struct SpatialTransformer;
// The transformer of `depth` blocks over `channels` that this UNet (and a ControlNet of it)
// runs.
SpatialTransformer unet_transformer(const UnetConfig& c, int64_t channels, int depth);

// One denoiser evaluation.
//   x          f32 [W, H, in_channels, N]: the latent, already scaled by c_in (and, for
//              inpainting, concatenated with mask and masked-image latent)
//   timesteps  f32 [N]
//   context    f32 [context_dim, L, N] (or [.., .., 1], shared by the whole batch)
//   y          f32 [adm_in_channels, N] when the config has a vector, else null
//   control    a ControlNet's residuals (models/controlnet.h), or null
// Returns f32 [W, H, out_channels, N]. W and H must be multiples of 2^(levels - 1) (8 for
// SD: images in multiples of 64 pixels).
struct UnetControl;
Tensor* unet_forward(const nn::Scope& unet, const UnetConfig& config, Tensor* x, Tensor* timesteps,
                     Tensor* context, Tensor* y = nullptr, const UnetControl* control = nullptr);

// ControlNet guidance (Zhang et al. 2023): one residual per skip connection, in the order
// the input blocks make them, then one for the middle block's output; each is scaled by
// `strength` and added where it belongs.
struct UnetControl {
  std::vector<Tensor*> residuals;
  float strength = 1.0f;
};

}  // namespace sd::models
