// CLIP's vision tower (Radford et al. 2021, "Learning Transferable Visual Models From Natural
// Language Supervision"), as Wan's image-to-video reads it: the image cut into 14x14 patches,
// a class token in front, learned positions, a LayerNorm, then pre-norm transformer layers
// (models/clip_text.h's). Wan 2.1 I2V / FLF2V take OpenCLIP ViT-H/14 (width 1280, 32 layers,
// 16 heads, 224 pixels: 257 tokens) and read the hidden states of the layers below, without
// the final LayerNorm or the projection. Every size is read from the file; the head count
// is 16 in every released tower (ViT-L, ViT-H, ViT-bigG), the one thing the file does not
// state.
//
// Parameters, Hugging Face names below the caller's scope (the --clip_vision file's as
// clip_vision_h.safetensors stores them): vision_model.embeddings.{patch_embedding.weight,
// class_embedding, position_embedding.weight}, vision_model.pre_layrnorm,
// vision_model.encoder.layers.N.{layer_norm1, self_attn.{q,k,v,out}_proj, layer_norm2,
// mlp.fc1, mlp.fc2}.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/clip_text.h"
#include "nn/weights.h"

namespace sd::models {

struct ClipVisionConfig {
  int64_t hidden = 1280;
  int64_t intermediate = 5120;
  int64_t heads = 16;
  int layers = 32;
  int64_t patch = 14;
  int64_t image_size = 224;
  ClipActivation activation = ClipActivation::Gelu;
  float layer_norm_eps = 1e-5f;

  int64_t grid() const { return image_size / patch; }
  int64_t tokens() const { return grid() * grid() + 1; }  // patches and the class token
};

using ClipVisionShapeOf =
    std::function<std::optional<std::array<int64_t, 4>>(const std::string& name)>;

// The tower under `scope` from its tensors. Throws sd::Error naming a tensor the file lacks.
ClipVisionConfig clip_vision_config_from_shapes(std::string_view scope,
                                                const ClipVisionShapeOf& shape_of);

// An RGB image [width, height, 3] in [0, 1] as a vision tower's input [out_w, out_h, 3]:
// scaled (nearest) until it covers out_w x out_h, the centre cut out, clamped to [0, 1] and
// normalized by CLIP's mean and deviation (sd.cpp's clip_preprocess).
std::vector<float> clip_normalized_pixels(const std::vector<float>& image, int64_t width,
                                          int64_t height, int64_t out_w, int64_t out_h);

// clip_normalized_pixels at the tower's input size [size, size, 3].
std::vector<float> clip_vision_pixels(const std::vector<float>& image, int64_t width,
                                      int64_t height, const ClipVisionConfig& config);

// pixels: f32 [size, size, 3, N] (clip_vision_pixels). Returns the hidden states after
// `layers` encoder layers (0: the embeddings after the first LayerNorm; at most
// config.layers), f32 [hidden, tokens, N]; the layers after are never requested.
Tensor* clip_vision_hidden(const nn::Scope& scope, const ClipVisionConfig& config, Tensor* pixels,
                           int layers);

}  // namespace sd::models
