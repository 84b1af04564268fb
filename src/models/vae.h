// AutoencoderKL: the first stage of Latent Diffusion (Rombach et al. 2022, "High-Resolution
// Image Synthesis with Latent Diffusion Models"), ldm.models.autoencoder.AutoencoderKL with
// ldm.modules.diffusionmodules.model.Encoder/Decoder. The image is compressed 2^(levels-1)
// times per side (8 for SD) into a latent of z_channels; the middle of each half has one
// single-head self-attention block.
//
// Parameter names are the LDM checkpoint's under the scope given (the pipeline passes the
// scope at "first_stage_model."): encoder.conv_in, encoder.down.N.block.M.{norm1,conv1,
// norm2,conv2,nin_shortcut}, encoder.down.N.downsample.conv, encoder.mid.{block_1,attn_1,
// block_2}, encoder.norm_out, encoder.conv_out, quant_conv, post_quant_conv, decoder.conv_in,
// decoder.mid.*, decoder.up.N.block.M.*, decoder.up.N.upsample.conv, decoder.norm_out,
// decoder.conv_out. The mid attention (attn_1: norm, q, k, v, proj_out) has its q, k, v and
// proj_out as 1x1 convs [1, 1, C, C], as LDM files store them.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/weights.h"

namespace sd::models {

struct VaeConfig {
  int64_t ch = 128;
  std::vector<int> ch_mult{1, 2, 4, 4};
  int num_res_blocks = 2;
  int64_t z_channels = 4, embed_dim = 4;
  // The latent the sampler sees is (vae_latent - shift_factor) * scale_factor.
  float scale_factor = 0.18215f, shift_factor = 0.0f;
  // quant_conv / post_quant_conv around the latent (SD's VAE; FLUX.1's and SD3's have none).
  bool use_quant_conv = true;
  // FLUX.2: the sampler's latent is the VAE's cut into latent_patch x latent_patch patches
  // (channel c * p * p + dy * p + dx), normalized per channel by the file's batch-norm
  // statistics (bn.running_mean, bn.running_var, eps 1e-4) instead of the scale and shift
  // factors; encoding keeps the mean, no sample is drawn.
  int latent_patch = 1;
  bool batch_norm_latent = false;
  // The autoencoder's design: LDM's (SD, FLUX.1, FLUX.2) or Wan's causal 3-d one
  // (models/wan_vae.h): Wan 2.1's (Wan 2.1, Wan 2.2 A14B, Qwen-Image) or Wan 2.2's (TI2V-5B:
  // residual down/up blocks, pixels in 2x2 patches). Wan's latent is normalized per channel
  // by statistics its file does not hold: (z - latent_mean) / latent_std, applied by the
  // caller.
  enum class Arch { Ldm, Wan21, Wan22 } arch = Arch::Ldm;
  std::vector<float> latent_mean, latent_std;
  // Wan 2.2: the decoder's base width (the encoder's is ch; 0: the same) and the image's
  // pixels folded into channels image_patch x image_patch before the encoder (and unfolded
  // after the decoder).
  int64_t decoder_ch = 0;
  int image_patch = 1;

  // SD 1.x / 2.x: ddconfig of v1-inference.yaml and v2-inference.yaml, scale factor
  // 0.18215 (sd.cpp uses the same for both).
  static VaeConfig sd();
  // FLUX.1's autoencoder (black-forest-labs/flux AutoEncoderParams): 16 latent channels,
  // no quant convs, scale factor 0.3611 and shift factor 0.1159.
  static VaeConfig flux();
  // FLUX.2's autoencoder (black-forest-labs/flux2 AutoEncoder): 32 channels with quant convs,
  // the sampler's latent in 2x2 patches (128 channels at 1/16) under batch-norm statistics.
  static VaeConfig flux2();
  // Wan 2.1's autoencoder (Qwen-Image's too): width 96, 16 channels under its published
  // latent statistics.
  static VaeConfig wan21();
  // Wan 2.2's (TI2V-5B): widths 160 (encoder) and 256 (decoder), 48 channels at 1/16 per
  // side under its published latent statistics.
  static VaeConfig wan22();
  bool causal_3d() const { return arch != Arch::Ldm; }
  int64_t decoder_width() const { return decoder_ch > 0 ? decoder_ch : ch; }
  // Image pixels per sampler-latent pixel along each side:
  // 2^(levels - 1) x latent_patch x image_patch.
  int64_t downscale() const {
    return (int64_t{1} << (ch_mult.size() - 1)) * latent_patch * image_patch;
  }
  // The sampler latent's channels.
  int64_t latent_channels() const { return embed_dim * latent_patch * latent_patch; }
};

// z: the sampler's latent [w, h, latent_channels(), N]. Divides by scale_factor and adds
// shift_factor itself (sd.cpp's diffusion_to_vae_latents), or undoes the batch norm and the
// patches, then post_quant_conv (when the config has one) and the decoder. -> image f32 [w *
// downscale, h * downscale, 3, N], nominally in
// [-1, 1] and not clamped: sd.cpp then maps it with clamp((x + 1) / 2, 0, 1).
Tensor* vae_decode(const nn::Scope& vae, const VaeConfig& cfg, Tensor* z);

// image [W, H, 3, N] in [-1, 1] (sd.cpp maps [0, 1] pixels with 2 x - 1), W and H multiples
// of downscale() -> the moments [W / downscale, H / downscale, 2 * embed_dim, N] after
// quant_conv: mean in channels [0, embed_dim), log-variance in the rest. The caller samples
// and scales (vae_moments_to_latent). With batch_norm_latent: the sampler's latent
// [W / downscale, H / downscale, latent_channels(), N] itself (the mean, patched, normalized).
Tensor* vae_encode(const nn::Scope& vae, const VaeConfig& cfg, Tensor* image);

// Host side of encoding, as sd.cpp's gaussian_latent_sample then vae_to_diffusion_latents:
// latent = (mean + exp(0.5 clamp(logvar, -30, 20)) * noise - shift_factor) * scale_factor.
// moments: [w, h, 2 C, N] as vae_encode returns them; noise: [w, h, C, N] standard normal
// values (sd.cpp draws them from the generation RNG right after encoding, randn of the
// mean's shape). -> the sampler's latent [w, h, C, N].
std::vector<float> vae_moments_to_latent(const std::vector<float>& moments,
                                         const std::vector<float>& noise, int64_t w, int64_t h,
                                         int64_t channels, int64_t batch, const VaeConfig& cfg);

}  // namespace sd::models
