// Qwen2.5-VL's vision tower (Bai et al. 2025, "Qwen2.5-VL Technical Report"), which lets
// Qwen-Image-Edit's text encoder see the images to edit. The image, its sides multiples of
// 28 pixels, is cut into 14x14 patches (a 2-frame 3-D patch embedding fed the same image
// twice); each 2x2 square of patches stays together as one "merged" group. Pre-norm blocks
// (RMSNorm, attention with 2-D rotary positions on the patch row and column, a SwiGLU MLP
// with biases) attend within windows of 112x112 pixels, except the full-attention blocks
// 7, 15, 23 and 31, which see the whole image. The merger RMS-norms each patch, joins a
// group's four into one vector and projects it through a GELU MLP to the LLM's width: one
// image token per 28x28 pixels. Released: width 1280, 32 blocks, 16 heads, MLP 3420,
// output 3584 (Qwen2.5-VL-7B's text width).
//
// Tokens are computed window by window (the groups of a window contiguous, each group's
// four patches in row order), as the reference orders them; qwen_vision_layout gives that
// order and the windows' lengths, and the output tokens are put back in row order after.
//
// Parameters below the caller's scope (text_encoders.llm.visual.), llama.cpp's spelling of
// the attention: patch_embed.proj.weight (Hugging Face's Conv3d [hidden, 3, 2, p, p]) or
// patch_embed.proj.{0,1}.weight (llama.cpp's mmproj: one 2-D kernel per frame),
// blocks.N.{norm1, norm2}.weight, blocks.N.attn.{q_proj, k_proj, v_proj, proj}.{weight,
// bias} (Hugging Face's fused attn.qkv is split when the file is read),
// blocks.N.mlp.{gate_proj, up_proj, down_proj}.{weight, bias}, merger.ln_q.weight,
// merger.mlp.{0, 2}.{weight, bias}.
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

struct QwenVisionConfig {
  int64_t hidden = 1280;
  int64_t intermediate = 3420;
  int layers = 32;
  int64_t heads = 16;  // every released tower; the file does not state it
  int64_t out_hidden = 3584;
  int64_t patch = 14;
  int64_t merge = 2;               // patches per merged group side
  int64_t window = 112;            // pixels per attention window side
  bool split_patch_embed = false;  // llama.cpp's two 2-D kernels
  std::vector<int> full_attention_blocks = {7, 15, 23, 31};
  float eps = 1e-6f;
  float rope_theta = 10000.0f;

  int64_t head_dim() const { return hidden / heads; }
  // Image sides are multiples of this many pixels: one output token each.
  int64_t factor() const { return patch * merge; }
};

using QwenVisionShapeOf =
    std::function<std::optional<std::array<int64_t, 4>>(const std::string& name)>;

// The tower under `scope` from its tensors; nullopt when the files hold none (no
// merger.mlp.2.weight). Throws sd::Error naming a tensor a partial tower lacks.
std::optional<QwenVisionConfig> qwen_vision_config_from_shapes(std::string_view scope,
                                                               const QwenVisionShapeOf& shape_of);

// The size an image of width x height is resized to for the tower, as the reference sizes
// Qwen-Image-Edit's references: each side rounded to a multiple of factor(), then the
// whole scaled (keeping the multiples) to at most max_pixels (floor) or at least
// min_pixels (ceil) when the area is outside them.
std::pair<int64_t, int64_t> qwen_vision_size(const QwenVisionConfig& c, int64_t width,
                                             int64_t height, int64_t min_pixels,
                                             int64_t max_pixels);

// The computation order of a width x height image's tokens.
struct QwenVisionLayout {
  int64_t grid_w = 0, grid_h = 0;  // patches
  // The merged group (row-major index among grid_w / merge x grid_h / merge) computed at
  // each position, window after window.
  std::vector<int32_t> order;
  std::vector<int64_t> window_patches;  // patches per window, in order
  int64_t groups() const { return static_cast<int64_t>(order.size()); }
  int64_t patches() const { return grid_w * grid_h; }
};
QwenVisionLayout qwen_vision_layout(const QwenVisionConfig& c, int64_t width, int64_t height);

// The tower's inputs for one image, all in the layout's order:
//   patches f32 [3 * patch * patch, patches]: an image's normalized pixels [width, height, 3]
//     (planes) cut into patches, each channel's rows in turn;
//   rope cos and sin f32 [head_dim / 2, patches]: the patch's row on the first half of the
//     frequencies, its column on the second;
//   window_mask f32 [patches, patches]: 0 within a window, -inf across.
struct QwenVisionInputs {
  std::vector<float> patches, cos, sin, window_mask;
};
QwenVisionInputs qwen_vision_inputs(const QwenVisionConfig& c, const QwenVisionLayout& layout,
                                    const std::vector<float>& pixels);

// Builds the tower: patches, cos, sin and window_mask as qwen_vision_inputs lays them out.
// Returns f32 [out_hidden, groups] in the layout's order.
Tensor* qwen_vision_forward(const nn::Scope& visual, const QwenVisionConfig& config,
                            Tensor* patches, Tensor* rope_cos, Tensor* rope_sin,
                            Tensor* window_mask);

}  // namespace sd::models
