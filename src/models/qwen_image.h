// Qwen-Image's diffusion transformer (Qwen team 2025, "Qwen-Image Technical Report"): an
// MMDiT whose text is Qwen2.5-VL's last hidden states. Every block keeps two streams, text
// and image, each with its own modulation (shift, scale, gate twice, from the timestep),
// q/k/v projections with RMS-normed q and k, output projection and GELU feed-forward; both
// attend jointly over [text, image] with 3-axis rotary positions (MSRoPE: the image centred
// on the origin, the text on the diagonal after it). Released: hidden 3072, 24 heads of
// 128, 60 blocks, text width 3584, the 16-channel latent in 2x2 patches (64 per token).
//
// Parameters, the released (diffusers) names below the caller's scope: img_in, txt_norm,
// txt_in, time_text_embed.timestep_embedder.linear_{1,2}, transformer_blocks.N.{img_mod.1,
// txt_mod.1, attn.{to_q, to_k, to_v, add_q_proj, add_k_proj, add_v_proj, norm_q, norm_k,
// norm_added_q, norm_added_k, to_out.0, to_add_out}, img_mlp.net.{0.proj, 2},
// txt_mlp.net.{0.proj, 2}}, norm_out.linear, proj_out. The last block's text outputs
// (to_add_out, txt_mlp) are never used.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/flux.h"
#include "nn/weights.h"

namespace sd::models {

struct QwenImageConfig {
  int patch_size = 2;
  int64_t in_channels = 64;  // latent channels x patch area
  int64_t out_channels = 64;
  int64_t hidden = 3072;
  int64_t heads = 24;
  int64_t head_dim = 128;
  int64_t text_dim = 3584;  // Qwen2.5-VL-7B
  int64_t mlp_hidden = 12288;
  int layers = 60;
  std::vector<int> axes_dim = {16, 56, 56};
  float theta = 10000.0f;
  // Qwen-Image-Edit-2511: reference tokens are modulated by the embedding of timestep 0,
  // the generated image's by the step's (the file's __index_timestep_zero__ marker, or
  // --model-args qwen_image_zero_cond_t=true).
  bool zero_cond_t = false;
};

using QwenImageShapeOf =
    std::function<std::optional<std::array<int64_t, 4>>(const std::string& name)>;

// The transformer under `scope` from its tensors (widths, heads from the q norm, blocks).
// Throws sd::Error naming a tensor the file lacks.
QwenImageConfig qwen_image_config_from_shapes(QwenImageConfig preset, std::string_view scope,
                                              const QwenImageShapeOf& shape_of);

// The rotary tables of [text, image] (f32 [head_dim / 2, tokens], neighbouring channels
// paired): image patch (r, c) at (0, r - ph / 2, c - pw / 2), text token i at (s + i) on every
// axis from s = max(ph, pw) / 2 (integer halves, as the reference).
struct QwenImageRope {
  std::vector<float> cos, sin;
};
// `refs`: the positions of reference tokens after the image's (flux_ref_positions).
QwenImageRope qwen_image_rope(const QwenImageConfig& config, int64_t text_tokens, int64_t patches_h,
                              int64_t patches_w, const std::vector<FluxPosition>& refs = {});

// Builds the transformer graph for one sample.
//   img: f32 [in_channels, image tokens] (flux_patchify's order), the generated image's
//   first `generated` tokens, then any reference images' (Qwen-Image-Edit); txt: f32
//   [text_dim, text tokens]; timestep: f32 [1], 1000 sigma; rope_cos, rope_sin:
//   qwen_image_rope's tables.
// Returns f32 [out_channels, generated]: the flow (velocity) prediction.
Tensor* qwen_image_forward(const nn::Scope& dit, const QwenImageConfig& config, Tensor* img,
                           int64_t generated, Tensor* txt, Tensor* timestep, Tensor* rope_cos,
                           Tensor* rope_sin);

}  // namespace sd::models
