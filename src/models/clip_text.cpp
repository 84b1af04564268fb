#include "models/clip_text.h"

#include <cmath>
#include <string>

#include "nn/layers.h"
#include "tensor/error.h"
#include "tensor/ops/cast.h"
#include "tensor/ops/concat.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/get_rows.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/unary.h"
#include "tensor/ops/view.h"

namespace sd::models {

ClipTextConfig ClipTextConfig::vit_l14() {
  return ClipTextConfig{};
}

ClipTextConfig ClipTextConfig::vit_h14() {
  ClipTextConfig c;
  c.hidden = 1024;
  c.intermediate = 4096;
  c.heads = 16;
  c.layers = 24;
  c.activation = ClipActivation::Gelu;
  c.default_clip_skip = 2;
  c.pad_token = 0;
  return c;
}

ClipTextConfig ClipTextConfig::sdxl_vit_l14() {
  ClipTextConfig c;
  c.default_clip_skip = 2;
  c.final_layer_norm = false;
  return c;
}

ClipTextConfig ClipTextConfig::vit_bigg14() {
  ClipTextConfig c;
  c.hidden = 1280;
  c.intermediate = 5120;
  c.heads = 20;
  c.layers = 32;
  c.activation = ClipActivation::Gelu;
  c.default_clip_skip = 2;
  c.final_layer_norm = false;
  c.projection_dim = 1280;
  return c;
}

int clip_layers_to_run(const ClipTextConfig& config, int clip_skip) {
  if (clip_skip <= 0) clip_skip = config.default_clip_skip;
  SD_CHECK(clip_skip <= config.layers,
           "[clip] clip_skip %d is more than the text encoder's %d layers (use 1..%d)", clip_skip,
           config.layers, config.layers);
  return config.layers - clip_skip + 1;
}

std::vector<float> clip_causal_mask(int64_t n) {
  std::vector<float> mask(static_cast<size_t>(n * n), 0.0f);
  for (int64_t q = 0; q < n; ++q)
    for (int64_t k = q + 1; k < n; ++k) mask[static_cast<size_t>(q * n + k)] = -INFINITY;
  return mask;
}

namespace {

// The token table, with the textual-inversion rows appended when there are any. sd.cpp
// does the same (an f32 table then, so file rows and custom rows read alike).
Tensor* token_table(const nn::Scope& embeddings, const ClipTextConfig& c, Tensor* custom) {
  Tensor* table = embeddings["token_embedding"].param("weight", {c.hidden, c.vocab_size});
  if (!custom) return table;
  SD_CHECK(custom->ne[0] == c.hidden,
           "[clip] textual-inversion vectors have %lld values, the text encoder %lld",
           static_cast<long long>(custom->ne[0]), static_cast<long long>(c.hidden));
  Context& ctx = embeddings.ctx();
  if (table->type != DType::F32) table = cast(ctx, table, DType::F32);
  return concat(ctx, table, custom, 1);
}

}  // namespace

Tensor* clip_encoder_layer(const nn::Scope& layer, const ClipTextConfig& c, Tensor* x,
                           Tensor* mask) {
  Context& ctx = layer.ctx();
  const int64_t d = c.hidden;

  Tensor* h = nn::layer_norm(layer["layer_norm1"], x, d, c.layer_norm_eps);
  const nn::Scope attn = layer["self_attn"];
  Tensor* q = nn::linear(attn["q_proj"], h, d, d);
  Tensor* k = nn::linear(attn["k_proj"], h, d, d);
  Tensor* v = nn::linear(attn["v_proj"], h, d, d);
  h = nn::multi_head_attention(ctx, q, k, v, c.heads, mask);  // [d, L, N]
  h = nn::linear(attn["out_proj"], h, d, d);
  x = set_name(add(ctx, x, h), layer.prefix() + "attn_out");

  h = nn::layer_norm(layer["layer_norm2"], x, d, c.layer_norm_eps);
  h = nn::linear(layer["mlp"]["fc1"], h, d, c.intermediate);
  h = c.activation == ClipActivation::Gelu ? gelu(ctx, h) : gelu_quick(ctx, h);
  h = nn::linear(layer["mlp"]["fc2"], h, c.intermediate, d);
  return set_name(add(ctx, x, h), layer.prefix() + "out");
}

namespace {

Tensor* embed(const nn::Scope& text_model, const ClipTextConfig& c, Tensor* token_ids,
              Tensor* custom_embeddings) {
  Context& ctx = text_model.ctx();
  SD_CHECK(token_ids->type == DType::I32 && token_ids->ne[0] == c.max_positions,
           "[clip] token ids must be i32 [%lld, N], got %lld tokens",
           static_cast<long long>(c.max_positions), static_cast<long long>(token_ids->ne[0]));
  const nn::Scope embeddings = text_model["embeddings"];
  Tensor* x = get_rows(ctx, token_table(embeddings, c, custom_embeddings), token_ids);
  x = add(ctx, x, embeddings["position_embedding"].param("weight", {c.hidden, c.max_positions}));
  return set_name(x, text_model.prefix() + "embeddings.out");
}

Tensor* final_norm(const nn::Scope& text_model, const ClipTextConfig& c, Tensor* x) {
  return nn::layer_norm(text_model["final_layer_norm"], x, c.hidden, c.layer_norm_eps);
}

}  // namespace

Tensor* clip_text_forward(const nn::Scope& text_model, const ClipTextConfig& c, Tensor* token_ids,
                          Tensor* causal_mask, int clip_skip, Tensor* custom_embeddings) {
  const int layers_to_run = clip_layers_to_run(c, clip_skip);

  // 1. Embeddings: token rows plus learned absolute positions.  // [hidden, 77, N]
  Tensor* x = embed(text_model, c, token_ids, custom_embeddings);

  // 2. Causal transformer layers, stopping at the one clip_skip selects.
  const nn::Scope encoder_layers = text_model["encoder"]["layers"];
  for (int i = 0; i < layers_to_run; ++i)
    x = clip_encoder_layer(encoder_layers[i], c, x, causal_mask);

  // 3. Final LayerNorm, applied to whichever layer was taken (not for SDXL's encoders).
  if (c.final_layer_norm) x = final_norm(text_model, c, x);
  return set_name(x, text_model.prefix() + "out");
}

ClipTextOutputs clip_text_forward_pooled(const nn::Scope& text_model, const ClipTextConfig& c,
                                         Tensor* token_ids, Tensor* causal_mask, int clip_skip,
                                         int64_t pooled_token, Tensor* custom_embeddings) {
  Context& ctx = text_model.ctx();
  SD_CHECK(pooled_token >= 0 && pooled_token < c.max_positions,
           "[clip] pooled token %lld is outside the %lld-token window",
           static_cast<long long>(pooled_token), static_cast<long long>(c.max_positions));
  const int layers_to_run = clip_layers_to_run(c, clip_skip);

  ClipTextOutputs out;
  Tensor* x = embed(text_model, c, token_ids, custom_embeddings);  // [hidden, 77, N]
  const nn::Scope encoder_layers = text_model["encoder"]["layers"];
  for (int i = 0; i < c.layers; ++i) {
    x = clip_encoder_layer(encoder_layers[i], c, x, causal_mask);
    if (i + 1 == layers_to_run) {
      out.hidden = c.final_layer_norm ? final_norm(text_model, c, x) : x;
      out.hidden = set_name(out.hidden, text_model.prefix() + "out");
    }
  }
  // The pooled vector: the EOS token of the last layer, normalized, projected.
  Tensor* eos = cont(ctx, slice(ctx, final_norm(text_model, c, x), 1, pooled_token,
                                pooled_token + 1));  // [hidden, 1, N]
  if (c.projection_dim > 0) {
    Tensor* projection = text_model.param("text_projection", {c.hidden, c.projection_dim});
    eos = matmul(ctx, projection, eos);  // [proj, 1, N]
  }
  out.pooled = set_name(eos, text_model.prefix() + "pooled");
  return out;
}

}  // namespace sd::models
