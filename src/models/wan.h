// Wan's diffusion transformer (Wan team 2025, "Wan: Open and Advanced Large-Scale Video
// Generative Models", wan/modules/model.py): a video latent cut into 1x2x2 patches, one
// stream of blocks that each attend to themselves (RoPE over frame, row and column) and
// then to the umT5 text, modulated by the timestep. Released Wan 2.1 T2V: 1.3B (width 1536,
// 12 heads, feed-forward 8960, 30 blocks) and 14B (5120, 40 heads, 13824, 40 blocks);
// heads are 128 wide in every release.
//
// A block, with (shift, scale, gate) x 2 from the time projection plus the block's own
// learned modulation:
//   x += gate1 * self_attn(LN(x) * (1 + scale1) + shift1)
//   x += cross_attn(LN_affine(x), text)
//   x += gate2 * ffn(LN(x) * (1 + scale2) + shift2)          (ffn: GELU, tanh form)
// Attention projections have biases; q and k are RMS-normalized over the whole width.
//
// Tokens: frame-major, then row, then column. A patch's input values are (channel, dy, dx),
// dx fastest (the 3-d patch embedding's weight as a matrix); the head gives (dy, dx,
// channel), channel fastest.
//
// Image to video (Wan 2.1 I2V and FLF2V): the latent arrives with 20 more channels (a
// 4-channel mask of the given frames and the VAE latent of the conditioning clip), and the
// text's cross-attention gains a second one to CLIP ViT-H's image tokens, projected by
// img_emb (LayerNorm, Linear, GELU, Linear, LayerNorm); the two attentions' outputs are
// summed before the output projection. FLF2V adds a learned position table (emb_pos) to the
// first and last frames' 2 x 257 tokens. Wan 2.2 I2V has the extra channels but no image
// attention.
//
// Parameters, ComfyUI's names below the caller's scope: patch_embedding, text_embedding.{0,2},
// time_embedding.{0,2}, time_projection.1, blocks.N.{modulation, self_attn.{q,k,v,o,norm_q,
// norm_k}, norm3, cross_attn.{q,k,v,o,norm_q,norm_k}, ffn.{0,2}}, head.{modulation, head};
// image to video: img_emb.{proj.{0,1,3,4}, emb_pos}, blocks.N.cross_attn.{k_img,v_img,
// norm_k_img}.
//
// VACE (Jiang et al. 2025, "VACE: All-in-One Video Creation and Editing"; Wan 2.1 VACE): a
// second stream of blocks reads a context of the control video's latents and a mask
// (vace_patch_embedding, a 1x2x2 patch embedding of its 96 channels). Its first block adds
// the embedded patches of the video (before_proj(c) + x); each of its blocks is a Wan block
// whose output, projected by after_proj and scaled by the strength, is added to the main
// stream after every (layers / vace layers)-th block (blocks 0, step, 2 step, ...).
// Parameters: vace_patch_embedding, vace_blocks.N.{the block's, after_proj}, plus
// vace_blocks.0.before_proj.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nn/weights.h"

namespace sd::models {

struct WanConfig {
  int64_t in_channels = 16;  // latent channels (plus any image-condition channels)
  int64_t out_channels = 16;
  int64_t dim = 1536;
  int64_t head_dim = 128;  // fixed by the design: heads = dim / 128
  int64_t ffn_dim = 8960;
  int64_t text_dim = 4096;  // umT5-XXL's width
  int64_t freq_dim = 256;
  int layers = 30;
  float eps = 1e-6f;
  float theta = 10000.0f;
  std::vector<int> axes_dim = {44, 42, 42};  // frame, row, column
  int text_len = 512;                        // umT5 tokens the transformer reads
  // Image to video: the CLIP vision width img_emb reads (0: no image attention), and the
  // image tokens FLF2V's position table covers (0: none).
  int64_t image_dim = 0;
  int64_t image_pos_tokens = 0;
  // VACE: its blocks (0: none) and the channels of its context (the control video's latents
  // twice and the 8 x 8 pixel mask of a latent pixel: 96 in the release).
  int vace_layers = 0;
  int64_t vace_in_channels = 0;

  int64_t heads() const { return dim / head_dim; }
  // Latent values per patch on the way in and out (1 x 2 x 2 patches).
  int64_t patch_in() const { return 4 * in_channels; }
  int64_t patch_out() const { return 4 * out_channels; }
  int64_t vace_patch_in() const { return 4 * vace_in_channels; }
  // The VACE block whose hint follows main block `block`, or -1.
  int vace_block_after(int block) const;
};

using WanShapeOf = std::function<std::optional<std::array<int64_t, 4>>(const std::string& name)>;

// The transformer under `scope` from its tensors: width, latent channels in and out, text
// width, feed-forward width, block count. Throws sd::Error naming a tensor the file lacks.
WanConfig wan_config_from_shapes(std::string_view scope, const WanShapeOf& shape_of);

// The rotary tables of `frames` x `rows` x `cols` patch tokens, each f32 [head_dim / 2,
// tokens]: neighbouring channels pair, the three axes' frequencies one after another.
struct WanRope {
  std::vector<float> cos, sin;
};
WanRope wan_rope(const WanConfig& config, int64_t frames, int64_t rows, int64_t cols);

// A video latent [w, h, frames, C] (sd.cpp's layout: channel planes of frame planes) <->
// patch tokens [4 C, frames * h/2 * w/2] in the orders above.
std::vector<float> wan_patchify(const std::vector<float>& latent, int64_t w, int64_t h,
                                int64_t frames, int64_t channels);
std::vector<float> wan_unpatchify(const std::vector<float>& tokens, int64_t w, int64_t h,
                                  int64_t frames, int64_t channels);

// Builds the transformer graph for one sample.
//   patches: f32 [patch_in, tokens]; text: f32 [text_dim, text tokens]; timestep: f32 [1]
//   (the flow schedule's 1000 sigma) or f32 [frames], one per frame (Wan 2.2 TI2V: a frame
//   the request fixes is at timestep 0; each frame's tokens take its modulation); rope_cos,
//   rope_sin: wan_rope's tables; image: CLIP vision tokens f32 [image_dim, n] for a model with
//   image attention (else null); vace: the VACE context's patches f32 [vace_patch_in, tokens]
//   for a model with VACE blocks (else null), their hints scaled by `vace_strength`.
// Returns f32 [patch_out, tokens]: the flow (velocity) prediction, noise minus video.
Tensor* wan_forward(const nn::Scope& dit, const WanConfig& config, Tensor* patches, Tensor* text,
                    Tensor* timestep, Tensor* rope_cos, Tensor* rope_sin, Tensor* image = nullptr,
                    Tensor* vace = nullptr, float vace_strength = 1.0f);

}  // namespace sd::models
