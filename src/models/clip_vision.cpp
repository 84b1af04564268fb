#include "models/clip_vision.h"

#include <algorithm>

#include "nn/layers.h"
#include "tensor/error.h"
#include "tensor/ops/cast.h"
#include "tensor/ops/concat.h"
#include "tensor/ops/conv2d.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/view.h"

namespace sd::models {

ClipVisionConfig clip_vision_config_from_shapes(std::string_view scope,
                                                const ClipVisionShapeOf& shape_of) {
  const std::string root = std::string(scope) + "vision_model.";
  auto need = [&](const std::string& name) {
    const std::optional<std::array<int64_t, 4>> ne = shape_of(root + name);
    SD_CHECK(ne.has_value(),
             "[clip vision] the --clip_vision file has no tensor '%s' (it takes a CLIP vision "
             "tower in Hugging Face names, as clip_vision_h.safetensors)",
             (root + name).c_str());
    return *ne;
  };
  ClipVisionConfig c;
  // The patch convolution [hidden, 3, p, p] is read as [p, p, 3, hidden].
  const std::array<int64_t, 4> patch = need("embeddings.patch_embedding.weight");
  c.patch = patch[0];
  c.hidden = patch[3];
  SD_CHECK(patch[1] == c.patch && patch[2] == 3 && c.patch > 0,
           "[clip vision] the patch embedding is not a square RGB convolution");
  const int64_t positions = need("embeddings.position_embedding.weight")[1];
  int64_t grid = 1;
  while ((grid + 1) * (grid + 1) + 1 <= positions) ++grid;
  SD_CHECK(grid * grid + 1 == positions,
           "[clip vision] %lld positions are not a square grid of patches and a class token",
           static_cast<long long>(positions));
  c.image_size = grid * c.patch;
  c.intermediate = need("encoder.layers.0.mlp.fc1.weight")[1];
  c.layers = 0;
  while (shape_of(root + "encoder.layers." + std::to_string(c.layers) + ".self_attn.q_proj.weight"))
    ++c.layers;
  SD_CHECK(c.hidden % c.heads == 0, "[clip vision] width %lld is not %lld whole heads",
           static_cast<long long>(c.hidden), static_cast<long long>(c.heads));
  // sd.cpp's choice: GELU for the 1024- and 1280-wide towers, QuickGELU for the others.
  c.activation =
      c.hidden == 1024 || c.hidden == 1280 ? ClipActivation::Gelu : ClipActivation::QuickGelu;
  return c;
}

std::vector<float> clip_normalized_pixels(const std::vector<float>& image, int64_t width,
                                          int64_t height, int64_t out_w, int64_t out_h) {
  SD_CHECK(width > 0 && height > 0 && image.size() == static_cast<size_t>(width * height * 3),
           "[clip vision] an RGB image of %zu values is not %lldx%lld", image.size(),
           static_cast<long long>(width), static_cast<long long>(height));
  SD_CHECK(out_w > 0 && out_h > 0, "[clip vision] no pixels asked for");
  // Scaled so that both sides cover the output (nearest), then the centre.
  const float scale = std::max(static_cast<float>(out_w) / static_cast<float>(width),
                               static_cast<float>(out_h) / static_cast<float>(height));
  const int64_t sw = static_cast<int64_t>(scale * static_cast<float>(width));
  const int64_t sh = static_cast<int64_t>(scale * static_cast<float>(height));
  const int64_t x0 = std::max<int64_t>((sw - out_w) / 2, 0);
  const int64_t y0 = std::max<int64_t>((sh - out_h) / 2, 0);
  static constexpr float kMean[3] = {0.48145466f, 0.4578275f, 0.40821073f};
  static constexpr float kStd[3] = {0.26862954f, 0.26130258f, 0.27577711f};
  std::vector<float> out(static_cast<size_t>(out_w * out_h * 3));
  for (int64_t ch = 0; ch < 3; ++ch)
    for (int64_t y = 0; y < out_h; ++y)
      for (int64_t x = 0; x < out_w; ++x) {
        // Nearest in the scaled image, as sd.cpp's interpolate indexes it.
        const int64_t sx = std::min((x + x0) * width / sw, width - 1);
        const int64_t sy = std::min((y + y0) * height / sh, height - 1);
        const float v =
            std::clamp(image[static_cast<size_t>((ch * height + sy) * width + sx)], 0.0f, 1.0f);
        out[static_cast<size_t>((ch * out_h + y) * out_w + x)] = (v - kMean[ch]) / kStd[ch];
      }
  return out;
}

std::vector<float> clip_vision_pixels(const std::vector<float>& image, int64_t width,
                                      int64_t height, const ClipVisionConfig& c) {
  return clip_normalized_pixels(image, width, height, c.image_size, c.image_size);
}

Tensor* clip_vision_hidden(const nn::Scope& scope, const ClipVisionConfig& c, Tensor* pixels,
                           int layers) {
  Context& ctx = scope.ctx();
  SD_CHECK(pixels->ne[0] == c.image_size && pixels->ne[1] == c.image_size && pixels->ne[2] == 3,
           "[clip vision] pixels must be [%lld, %lld, 3, N], got %s",
           static_cast<long long>(c.image_size), static_cast<long long>(c.image_size),
           pixels->shape_string().c_str());
  SD_CHECK(layers >= 0 && layers <= c.layers, "[clip vision] %d layers asked of a tower of %d",
           layers, c.layers);
  const nn::Scope v = scope["vision_model"];
  const nn::Scope e = v["embeddings"];
  const int64_t n = pixels->ne[3], grid = c.grid(), d = c.hidden;

  // 1. Patches (a stride-p convolution, f16 weights as the reference runs it) as tokens
  //    [d, grid^2, N], the class token in front, positions added.
  Tensor* w = e["patch_embedding"].param("weight", {c.patch, c.patch, 3, d});
  if (w->type != DType::F16) w = cast(ctx, w, DType::F16);
  Tensor* patches = conv2d(ctx, pixels, w, nullptr, static_cast<int>(c.patch),
                           static_cast<int>(c.patch), 0, 0, 1, 1);  // [grid, grid, d, N]
  patches = cont(ctx, permute(ctx, reshape(ctx, patches, {grid * grid, d, n}), {1, 0, 2, 3}));
  Tensor* cls = e.param("class_embedding", {d});
  if (cls->type != DType::F32) cls = cast(ctx, cls, DType::F32);
  Tensor* one = reshape(ctx, cls, {d, 1, 1});
  cls = one;
  for (int64_t i = 1; i < n; ++i) cls = concat(ctx, cls, one, 2);  // one per image
  Tensor* x = concat(ctx, cls, patches, 1);                        // [d, tokens, N]
  Tensor* pos = e["position_embedding"].param("weight", {d, c.tokens()});
  if (pos->type != DType::F32) pos = cast(ctx, pos, DType::F32);
  x = add(ctx, x, pos);
  x = nn::layer_norm(v["pre_layrnorm"], x, d, c.layer_norm_eps);

  // 2. The encoder layers asked for.
  ClipTextConfig layer;
  layer.hidden = d;
  layer.intermediate = c.intermediate;
  layer.heads = c.heads;
  layer.activation = c.activation;
  layer.layer_norm_eps = c.layer_norm_eps;
  const nn::Scope encoder_layers = v["encoder"]["layers"];
  for (int i = 0; i < layers; ++i) x = clip_encoder_layer(encoder_layers[i], layer, x, nullptr);
  return set_name(x, v.prefix() + "hidden");
}

}  // namespace sd::models
