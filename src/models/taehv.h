// TAEHV, the Tiny AutoEncoder for Hunyuan Video (Ollin Boer Bohan, madebyollin/taehv), in
// the versions for Wan's latents (taew2_1: Wan 2.1's 16 channels; taew2_2: Wan 2.2's 48,
// with 2x2 pixel patches): TAESD's plain 3x3 convolutions and ReLUs, made causal in time by
// memory blocks that also read the frame before, and changing the frame rate by folding
// frames into channels (TPool) and back (TGrow). It decodes a clip many times faster than
// Wan's VAE, for previews or the final frames (--tae).
//
// Parameter names (a PyTorch Sequential per half, under the file's "decoder." and
// "encoder."; the pipeline reads them under "tae."):
//   decoder: 0 Clamp, 1 conv (latent -> w0), 2 ReLU, then per level L (3 of them) three
//     MemBlocks, an Upsample (x2 nearest), a TGrow (".conv": 1x1, w -> w * stride) and a
//     3x3 conv without bias (w_L -> w_L+1); then ReLU and the output conv (-> 3 patch^2).
//   encoder: 0 conv (3 patch^2 -> w), 1 ReLU, then per level a TPool (".conv": 1x1,
//     w * stride -> w), a stride-2 3x3 conv without bias and three MemBlocks; then the
//     output conv (-> latent channels).
//   MemBlock: "conv.{0,2,4}" 3x3 with bias (conv.0 reads the frame and the frame before,
//     2w channels), "skip" 1x1 without bias where the widths differ.
// Released widths: decoder 256, 128, 64, 64; encoder 64; time strides decoder 1, 2, 2,
// encoder 2, 2, 1 (so a latent frame is four video frames). Every width and stride is read
// from the file.
//
// Scaling, as the reference applies it for a TAE: none. The sampler's latent goes in as it
// is, the decoder gives frames nominally in [0, 1], the encoder takes frames in [0, 1] and
// gives the sampler's latent. A clip of T latent frames decodes to 4 T frames of which the
// first 3 are dropped (1 + 4 (T - 1), as Wan's VAE); encoding pads a clip with copies of its
// last frame to a multiple of four.
//
// Clips are run frame by frame here (the reference builds the whole clip as one graph): the
// memory blocks remember the last frame they read between graphs (WanClipCache, in f16).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "models/wan_vae.h"
#include "nn/weights.h"

namespace sd::models {

struct TaehvConfig {
  static constexpr int kLevels = 3;
  static constexpr int kBlocksPerLevel = 3;
  int64_t latent_channels = 16;
  // Pixels per side that each decoded (encoded) pixel is folded from: 2 for Wan 2.2.
  int64_t patch = 1;
  // Decoder widths: after the input conv and after each level.
  std::array<int64_t, kLevels + 1> decoder_widths = {256, 128, 64, 64};
  // Frames each decoder level's TGrow makes of one.
  std::array<int64_t, kLevels> time_upscale = {1, 2, 2};
  bool has_encoder = false;
  int64_t encoder_width = 64;
  // Frames each encoder level's TPool makes one of.
  std::array<int64_t, kLevels> time_downscale = {2, 2, 1};

  // Pixels per latent pixel along a side.
  int64_t downscale() const { return 8 * patch; }
  // Video frames per latent frame.
  int64_t time_factor() const { return time_upscale[0] * time_upscale[1] * time_upscale[2]; }
};

// The decoder in stages (each a level), run one graph per frame and stage: stage 0 reads
// latent frames [w, h, latent_channels, n]; stage s > 0 frames stage s - 1 gave; a stage
// gives time_upscale[s] frames for each it reads, in order, the last stage video frames
// [8 patch w, 8 patch h, 3, m] nominally in [0, 1]. Each layer must meet the clip's frames
// in order (depth first or breadth first alike); the clip's first time_factor() - 1 video
// frames are discarded by the caller.
Tensor* taehv_decode_stage(const nn::Scope& tae, const TaehvConfig& config, int stage, Tensor* x,
                           WanClipCache& clip);

// Chunks of four video frames [W, H, 3, 4 n] in [0, 1] (W, H multiples of downscale()) ->
// their latent frames [W / downscale(), H / downscale(), latent_channels, n], chunks fed in
// clip order.
Tensor* taehv_encode_chunk(const nn::Scope& tae, const TaehvConfig& config, Tensor* frames,
                           WanClipCache& clip);

// Builds one of each graph a clip's decoding (and, where config.has_encoder, encoding)
// builds, on small frames: every weight they read, for a recorder (nothing is computed).
void taehv_record_parameters(nn::Weights& weights, const std::string& prefix,
                             const TaehvConfig& config);

}  // namespace sd::models
