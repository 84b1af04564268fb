// Z-Image's diffusion transformer (Tongyi-MAI 2025, "Z-Image: An Efficient Image Generation
// Foundation Model with Single-Stream Diffusion Transformer"; the Lumina-Image 2.0 lineage
// of Qin et al. 2025). A single stream: caption tokens (an LLM's hidden states) and image
// patches are refined on their own by a few blocks, then concatenated and run through
// the same joint blocks. Released Turbo and Base: hidden 3840, 30 heads of 128, 30 joint
// blocks, 2 refiner blocks per stream, SwiGLU feed-forward 10240, caption width 2560
// (Qwen3-4B), 3-axis RoPE 32+48+48 with theta 256.
//
// A block: x + tanh(g1) * rms2(attn(rms1(x) * (1 + s1))), then the same with the
// feed-forward and (s2, g2); scale and gate come from one linear of the timestep embedding
// (no SiLU before it, no shift). The caption refiner's blocks have no modulation. Each
// stream is padded to a multiple of 32 tokens with its learned pad token.
//
// Tokens: the latent in 2x2 patches, a patch's values in (dy, dx, channel) order, channel
// fastest. Positions (caption index, row, column): the i-th padded caption token is at
// (i + 1, 0, 0), image patches at (padded caption + 1, row, column), image padding at 0.
//
// Parameters, the released names below the caller's scope: x_embedder, t_embedder.mlp.{0,2},
// cap_embedder.{0 (RMS norm), 1}, {noise_refiner, context_refiner, layers}.N.{attention.{qkv,
// out, q_norm, k_norm}, feed_forward.w{1,2,3}, attention_norm{1,2}, ffn_norm{1,2},
// adaLN_modulation.0}, final_layer.{linear, adaLN_modulation.1}, x_pad_token, cap_pad_token.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nn/patches.h"
#include "nn/weights.h"

namespace sd::models {

struct ZImageConfig {
  int patch_size = 2;
  int64_t in_channels = 16;  // latent channels
  int64_t out_channels = 16;
  int64_t hidden = 3840;
  int64_t heads = 30;
  int64_t head_dim = 128;
  int64_t ffn_hidden = 10240;
  int64_t caption_dim = 2560;
  int layers = 30;
  int refiner_layers = 2;
  float eps = 1e-5f;
  float theta = 256.0f;
  std::vector<int> axes_dim = {32, 48, 48};
  int token_multiple = 32;  // each stream is padded to a multiple of this

  // The timestep embedder's inner width and the modulation input (fixed by the design).
  int64_t t_hidden() const { return hidden < 1024 ? hidden : 1024; }
  int64_t adaln_dim() const { return hidden < 256 ? hidden : 256; }

  // Tongyi-MAI/Z-Image-Turbo and Z-Image (Base): the same transformer.
  static ZImageConfig released() { return ZImageConfig{}; }
};

using ZImageShapeOf = std::function<std::optional<std::array<int64_t, 4>>(const std::string& name)>;

// The transformer under `scope` from its tensors: latent channels, hidden, caption width,
// head width (the q/k norms), feed-forward width, joint and refiner block counts. The RoPE
// axes and theta and the patch size stay the preset's. Throws sd::Error naming a tensor
// the file lacks.
ZImageConfig z_image_config_from_shapes(ZImageConfig preset, std::string_view scope,
                                        const ZImageShapeOf& shape_of);

// The padded token counts of the two streams.
int64_t z_image_padded(const ZImageConfig& config, int64_t tokens);

// The rotary tables of the joint sequence (padded caption, then padded image), each f32
// [head_dim / 2, tokens]: neighbouring channels pair, the axes' frequencies one after another.
struct ZImageRope {
  std::vector<float> cos, sin;
};
ZImageRope z_image_rope(const ZImageConfig& config, int64_t caption_tokens, int64_t patches_h,
                        int64_t patches_w);

// Latent [W, H, C] planes <-> tokens [p * p * C, patches] in Z-Image's (dy, dx, c) order.
inline std::vector<float> z_image_patchify(const std::vector<float>& latent, int64_t w, int64_t h,
                                           int64_t c, int p) {
  return nn::patchify(latent, w, h, c, p, nn::PatchOrder::ChannelMinor);
}
inline std::vector<float> z_image_unpatchify(const std::vector<float>& tokens, int64_t w, int64_t h,
                                             int64_t c, int p) {
  return nn::unpatchify(tokens, w, h, c, p, nn::PatchOrder::ChannelMinor);
}

// Builds the transformer graph for one sample.
//   img: f32 [p * p * in_channels, image tokens]; caption: f32 [caption_dim, caption tokens];
//   timestep: f32 [1], 1000 * (1 - sigma) (Z-Image counts time from noise to image);
//   rope_cos, rope_sin: z_image_rope's tables.
// Returns f32 [p * p * out_channels, image tokens]: the flow (velocity) prediction, noise
// minus image, as the other flow models give it.
Tensor* z_image_forward(const nn::Scope& dit, const ZImageConfig& config, Tensor* img,
                        Tensor* caption, Tensor* timestep, Tensor* rope_cos, Tensor* rope_sin);

}  // namespace sd::models
