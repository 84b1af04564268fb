#include "models/qwen_vl_vision.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "nn/dit_blocks.h"
#include "nn/layers.h"
#include "tensor/error.h"
#include "tensor/ops/attention.h"
#include "tensor/ops/concat.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/norm.h"
#include "tensor/ops/unary.h"
#include "tensor/ops/view.h"

namespace sd::models {

std::optional<QwenVisionConfig> qwen_vision_config_from_shapes(std::string_view scope,
                                                               const QwenVisionShapeOf& shape_of) {
  const std::string root(scope);
  if (!shape_of(root + "merger.mlp.2.weight")) return std::nullopt;
  auto need = [&](const std::string& name) {
    const std::optional<std::array<int64_t, 4>> ne = shape_of(root + name);
    SD_CHECK(ne.has_value(),
             "[qwen2.5-vl vision] the vision tower has no tensor '%s' (it takes Qwen2.5-VL's "
             "visual.* weights or llama.cpp's mmproj file)",
             (root + name).c_str());
    return *ne;
  };
  QwenVisionConfig c;
  if (shape_of(root + "patch_embed.proj.weight")) {
    // Hugging Face's Conv3d [hidden, 3, 2, p, p], read as [p, p, 2, 3 * hidden].
    const std::array<int64_t, 4> w = need("patch_embed.proj.weight");
    SD_CHECK(w[0] == w[1] && w[2] == 2 && w[3] % 3 == 0,
             "[qwen2.5-vl vision] the patch embedding is not a 2-frame RGB convolution");
    c.patch = w[0];
    c.hidden = w[3] / 3;
  } else {
    const std::array<int64_t, 4> w = need("patch_embed.proj.0.weight");  // [p, p, 3, hidden]
    need("patch_embed.proj.1.weight");
    SD_CHECK(w[0] == w[1] && w[2] == 3,
             "[qwen2.5-vl vision] the patch embedding is not an RGB convolution");
    c.patch = w[0];
    c.hidden = w[3];
    c.split_patch_embed = true;
  }
  c.intermediate = need("blocks.0.mlp.gate_proj.weight")[1];
  c.layers = 0;
  while (shape_of(root + "blocks." + std::to_string(c.layers) + ".norm1.weight")) ++c.layers;
  const std::array<int64_t, 4> merger_in = need("merger.mlp.0.weight");
  SD_CHECK(merger_in[0] == c.hidden * c.merge * c.merge,
           "[qwen2.5-vl vision] the merger reads %lld values, not %lld patches of %lld",
           static_cast<long long>(merger_in[0]), static_cast<long long>(c.merge * c.merge),
           static_cast<long long>(c.hidden));
  c.out_hidden = need("merger.mlp.2.weight")[1];
  SD_CHECK(c.layers > 0 && c.hidden % c.heads == 0 && c.head_dim() % 4 == 0,
           "[qwen2.5-vl vision] width %lld in %d blocks is not %lld heads with 2-D rotary "
           "positions",
           static_cast<long long>(c.hidden), c.layers, static_cast<long long>(c.heads));
  return c;
}

std::pair<int64_t, int64_t> qwen_vision_size(const QwenVisionConfig& c, int64_t width,
                                             int64_t height, int64_t min_pixels,
                                             int64_t max_pixels) {
  const double f = static_cast<double>(c.factor());
  const double w = static_cast<double>(width), h = static_cast<double>(height);
  auto whole = [&](double v) { return static_cast<int64_t>(v) * c.factor(); };
  int64_t w_bar = static_cast<int64_t>(std::round(w / f) * f);
  int64_t h_bar = static_cast<int64_t>(std::round(h / f) * f);
  const double area = static_cast<double>(w_bar) * static_cast<double>(h_bar);
  if (max_pixels > 0 && area > static_cast<double>(max_pixels)) {
    const double beta = std::sqrt(h * w / static_cast<double>(max_pixels));
    w_bar = std::max(c.factor(), whole(std::floor(w / beta / f)));
    h_bar = std::max(c.factor(), whole(std::floor(h / beta / f)));
  } else if (min_pixels > 0 && area < static_cast<double>(min_pixels)) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / (h * w));
    w_bar = whole(std::ceil(w * beta / f));
    h_bar = whole(std::ceil(h * beta / f));
  }
  return {w_bar, h_bar};
}

QwenVisionLayout qwen_vision_layout(const QwenVisionConfig& c, int64_t width, int64_t height) {
  SD_CHECK(width > 0 && height > 0 && width % c.factor() == 0 && height % c.factor() == 0,
           "[qwen2.5-vl vision] a %lldx%lld image: its sides must be multiples of %lld",
           static_cast<long long>(width), static_cast<long long>(height),
           static_cast<long long>(c.factor()));
  QwenVisionLayout l;
  l.grid_w = width / c.patch;
  l.grid_h = height / c.patch;
  const int64_t groups_w = l.grid_w / c.merge, groups_h = l.grid_h / c.merge;
  const int64_t win = std::max<int64_t>(1, c.window / c.patch / c.merge);  // groups per side
  for (int64_t wy = 0; wy < groups_h; wy += win)
    for (int64_t wx = 0; wx < groups_w; wx += win) {
      const int64_t h = std::min(win, groups_h - wy), w = std::min(win, groups_w - wx);
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x)
          l.order.push_back(static_cast<int32_t>((wy + y) * groups_w + wx + x));
      l.window_patches.push_back(h * w * c.merge * c.merge);
    }
  return l;
}

QwenVisionInputs qwen_vision_inputs(const QwenVisionConfig& c, const QwenVisionLayout& l,
                                    const std::vector<float>& pixels) {
  const int64_t p = c.patch, m = c.merge, width = l.grid_w * p, height = l.grid_h * p;
  SD_CHECK(pixels.size() == static_cast<size_t>(width * height * 3),
           "[qwen2.5-vl vision] %zu pixel values are not a %lldx%lld RGB image", pixels.size(),
           static_cast<long long>(width), static_cast<long long>(height));
  const int64_t n = l.patches(), half = c.head_dim() / 2, groups_w = l.grid_w / m;
  const std::vector<int> axes = {static_cast<int>(half), static_cast<int>(half)};
  QwenVisionInputs in;
  in.patches.resize(static_cast<size_t>(3 * p * p * n));
  in.cos.resize(static_cast<size_t>(half * n));
  in.sin.resize(in.cos.size());
  int64_t t = 0;
  for (const int32_t group : l.order)
    for (int64_t my = 0; my < m; ++my)
      for (int64_t mx = 0; mx < m; ++mx, ++t) {
        const int64_t row = group / groups_w * m + my, col = group % groups_w * m + mx;
        float* out = in.patches.data() + t * 3 * p * p;
        for (int64_t ch = 0; ch < 3; ++ch)
          for (int64_t y = 0; y < p; ++y)
            std::copy_n(pixels.begin() + (ch * height + row * p + y) * width + col * p, p,
                        out + (ch * p + y) * p);
        const float pos[2] = {static_cast<float>(row), static_cast<float>(col)};
        nn::rope_row(pos, axes, c.rope_theta, in.cos.data() + t * half, in.sin.data() + t * half);
      }
  in.window_mask.assign(static_cast<size_t>(n * n), -std::numeric_limits<float>::infinity());
  int64_t start = 0;
  for (const int64_t len : l.window_patches) {
    for (int64_t q = start; q < start + len; ++q)
      std::fill_n(in.window_mask.begin() + q * n + start, len, 0.0f);
    start += len;
  }
  return in;
}

namespace {

// The patch embedding of patches [3 p p, L]: [hidden, L]. Both of the 3-D kernel's frames
// see the same image.
Tensor* embed_patches(const nn::Scope& pe, const QwenVisionConfig& c, Tensor* patches) {
  Context& ctx = pe.ctx();
  const int64_t pp = c.patch * c.patch, n = patches->ne[1];
  if (c.split_patch_embed) {
    auto frame = [&](const char* k) {
      Tensor* w = pe[k].param("weight", {c.patch, c.patch, 3, c.hidden});
      return matmul(ctx, reshape(ctx, w, {3 * pp, c.hidden}), patches);
    };
    return add(ctx, frame("0"), frame("1"));
  }
  // The Conv3d kernel's inputs are (channel, frame, row, column): each channel's patch twice.
  Tensor* w = pe.param("weight", {c.patch, c.patch, 2, 3 * c.hidden});
  Tensor* once = reshape(ctx, patches, {pp, 1, 3, n});
  Tensor* twice = reshape(ctx, concat(ctx, once, once, 1), {pp * 2 * 3, n});
  return matmul(ctx, reshape(ctx, w, {pp * 2 * 3, c.hidden}), twice);
}

Tensor* vision_attention(const nn::Scope& attn, const QwenVisionConfig& c, Tensor* x, Tensor* cos_t,
                         Tensor* sin_t, Tensor* mask) {
  Context& ctx = attn.ctx();
  const int64_t len = x->ne[1], hd = c.head_dim();
  auto project = [&](const char* name) {  // [hd, heads, L]
    return reshape(ctx, nn::linear(attn[name], x, c.hidden, c.hidden), {hd, c.heads, len});
  };
  Tensor* q = nn::apply_rope_halves(ctx, project("q_proj"), cos_t, sin_t);
  Tensor* k = nn::apply_rope_halves(ctx, project("k_proj"), cos_t, sin_t);
  Tensor* v = project("v_proj");
  const std::array<int, kMaxDims> tokens_then_heads = {0, 2, 1, 3};
  Tensor* out =
      attention(ctx, permute(ctx, q, tokens_then_heads), permute(ctx, k, tokens_then_heads),
                permute(ctx, v, tokens_then_heads), mask, 1.0f / std::sqrt(static_cast<float>(hd)),
                attn.attention_precision(attn["q_proj"].param("weight", {c.hidden, c.hidden})));
  return nn::linear(attn["proj"], reshape(ctx, out, {c.hidden, len}), c.hidden, c.hidden);
}

Tensor* vision_mlp(const nn::Scope& m, const QwenVisionConfig& c, Tensor* x) {
  Context& ctx = m.ctx();
  Tensor* gate = silu(ctx, nn::linear(m["gate_proj"], x, c.hidden, c.intermediate));
  Tensor* h = mul(ctx, gate, nn::linear(m["up_proj"], x, c.hidden, c.intermediate));
  return nn::linear(m["down_proj"], h, c.intermediate, c.hidden);
}

}  // namespace

Tensor* qwen_vision_forward(const nn::Scope& visual, const QwenVisionConfig& c, Tensor* patches,
                            Tensor* rope_cos, Tensor* rope_sin, Tensor* window_mask) {
  Context& ctx = visual.ctx();
  const int64_t n = patches->ne[1], group = c.merge * c.merge;
  SD_CHECK(patches->ne[0] == 3 * c.patch * c.patch && n % group == 0,
           "[qwen2.5-vl vision] patches %s are not whole groups of %lldx%lld RGB patches",
           patches->shape_string().c_str(), static_cast<long long>(c.patch),
           static_cast<long long>(c.patch));
  Tensor* x = embed_patches(visual["patch_embed"]["proj"], c, patches);
  for (int i = 0; i < c.layers; ++i) {
    const nn::Scope b = visual["blocks"][i];
    const bool full = std::find(c.full_attention_blocks.begin(), c.full_attention_blocks.end(),
                                i) != c.full_attention_blocks.end();
    x = add(ctx, x,
            vision_attention(b["attn"], c, nn::rms_norm(b["norm1"], x, c.hidden, c.eps), rope_cos,
                             rope_sin, full ? nullptr : window_mask));
    x = set_name(add(ctx, x, vision_mlp(b["mlp"], c, nn::rms_norm(b["norm2"], x, c.hidden, c.eps))),
                 b.prefix() + "out");
  }
  // The merger: each patch normed, a group's patches side by side, an MLP to the LLM width.
  const nn::Scope merger = visual["merger"];
  x = reshape(ctx, nn::rms_norm(merger["ln_q"], x, c.hidden, c.eps), {c.hidden * group, n / group});
  x = gelu(ctx, nn::linear(merger["mlp"]["0"], x, c.hidden * group, c.hidden * group));
  x = nn::linear(merger["mlp"]["2"], x, c.hidden * group, c.out_hidden);
  return set_name(x, visual.prefix() + "out");
}

}  // namespace sd::models
