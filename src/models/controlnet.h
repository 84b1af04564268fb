// ControlNet (Zhang, Rao and Agrawala 2023, "Adding Conditional Control to Text-to-Image
// Diffusion Models"): a trainable copy of the UNet's encoder half (time embedding, input
// blocks, middle block) that also sees a control image (edges, depth, pose...). The image
// enters through input_hint_block, a small conv stack down to the latent's size, added
// after the first conv; each block's output leaves through a 1x1 "zero conv" as a residual
// the UNet adds to its matching skip connection (models/unet.h, UnetControl). Matches the
// original cldm.py ControlNet and its checkpoints (control_model.*).
//
// Tensors are read with the original names below the scope: time_embed.*, label_emb.*
// (SDXL), input_blocks.*, middle_block.*, input_hint_block.*, zero_convs.*,
// middle_block_out.*.
#pragma once

#include <cstdint>
#include <vector>

#include "models/unet.h"
#include "nn/weights.h"

namespace sd::models {

struct ControlNetConfig {
  // The encoder half, with the UNet's hyper-parameters (out_channels is unused).
  UnetConfig unet;
  int64_t hint_channels = 3;
  // Output widths of input_hint_block's eight 3x3 convs (SiLU between them); convs 2, 4 and
  // 6 have stride 2, so the hint shrinks 8x to the latent's size. The last is model_channels.
  std::vector<int64_t> hint_widths{16, 16, 32, 32, 96, 96, 256, 320};

  // Channels of each residual, in the order controlnet_forward returns them.
  std::vector<int64_t> residual_channels() const;
  // Throws an sd::Error naming the inconsistent field.
  void validate() const;

  // cldm_v15.yaml: the SD 1.x UNet's encoder.
  static ControlNetConfig sd1();
  // The SDXL base UNet's encoder (diffusers' controlnet-*-sdxl-1.0).
  static ControlNetConfig sdxl();
};

// The control image through input_hint_block: hint f32 [8 W, 8 H, hint_channels, N], values
// in [0, 1] -> f32 [W, H, model_channels, N]. It depends on nothing else, so a sampler's
// steps can share one (stable-diffusion.cpp caches it likewise).
Tensor* controlnet_hint(const nn::Scope& s, const ControlNetConfig& config, Tensor* hint);

// One ControlNet evaluation.
//   x            f32 [W, H, unet.in_channels, N]: the latent, as the UNet gets it
//   guided_hint  f32 [W, H, model_channels, N or 1]: controlnet_hint's output
//   timesteps    f32 [N]; context f32 [context_dim, L, N]; y f32 [adm_in_channels, N] or null
// Returns the residuals: one per UNet skip connection ([W_i, H_i, C_i, N], in the input
// blocks' order), then the middle block's.
std::vector<Tensor*> controlnet_forward(const nn::Scope& s, const ControlNetConfig& config,
                                        Tensor* x, Tensor* guided_hint, Tensor* timesteps,
                                        Tensor* context, Tensor* y = nullptr);

}  // namespace sd::models
