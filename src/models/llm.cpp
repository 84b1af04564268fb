#include "models/llm.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "nn/dit_blocks.h"
#include "nn/layers.h"
#include "tensor/error.h"
#include "tensor/ops/attention.h"
#include "tensor/ops/concat.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/get_rows.h"
#include "tensor/ops/norm.h"
#include "tensor/ops/unary.h"
#include "tensor/ops/view.h"

namespace sd::models {

const char* llm_arch_name(LlmArch arch) {
  switch (arch) {
    case LlmArch::Qwen3:
      return "Qwen3";
    case LlmArch::Qwen2_5_VL:
      return "Qwen2.5-VL";
    case LlmArch::Mistral:
      return "Mistral";
  }
  return "?";
}

LlmConfig LlmConfig::qwen3_4b() {
  return LlmConfig{};
}

LlmConfig LlmConfig::qwen2_5_vl_7b() {
  LlmConfig c;
  c.arch = LlmArch::Qwen2_5_VL;
  c.vocab_size = 152064;
  c.hidden = 3584;
  c.intermediate = 18944;
  c.layers = 28;
  c.heads = 28;
  c.kv_heads = 4;
  c.qkv_bias = true;
  c.qk_norm = false;
  return c;
}

LlmConfig LlmConfig::mistral_small_3_2() {
  LlmConfig c;
  c.arch = LlmArch::Mistral;
  c.vocab_size = 131072;
  c.hidden = 5120;
  c.intermediate = 32768;
  c.layers = 40;
  c.heads = 32;
  c.kv_heads = 8;
  c.qk_norm = false;
  c.eps = 1e-5f;
  c.rope_theta = 1e9f;
  return c;
}

LlmConfig llm_config_from_shapes(LlmConfig c, std::string_view scope, const LlmShapeOf& shape_of) {
  const std::string root(scope);
  const std::string tag = std::string("[") + llm_arch_name(c.arch) + "]";
  auto need = [&](const std::string& name) {
    const std::optional<std::array<int64_t, 4>> ne = shape_of(root + name);
    SD_CHECK(ne.has_value(), "%s the text encoder has no tensor '%s%s' (not a %s model?)",
             tag.c_str(), root.c_str(), name.c_str(), llm_arch_name(c.arch));
    return *ne;
  };
  const std::array<int64_t, 4> embed = need("model.embed_tokens.weight");  // [hidden, vocab]
  c.hidden = embed[0];
  c.vocab_size = embed[1];
  const std::string attn = "model.layers.0.self_attn.";
  c.qk_norm = shape_of(root + attn + "q_norm.weight").has_value();
  if (c.qk_norm) c.head_dim = need(attn + "q_norm.weight")[0];
  const int64_t q_width = need(attn + "q_proj.weight")[1];
  const int64_t kv_width = need(attn + "k_proj.weight")[1];
  SD_CHECK(c.head_dim > 0 && q_width % c.head_dim == 0 && kv_width % c.head_dim == 0,
           "%s q/k projections of %lld and %lld channels are not whole heads of %lld", tag.c_str(),
           static_cast<long long>(q_width), static_cast<long long>(kv_width),
           static_cast<long long>(c.head_dim));
  c.heads = q_width / c.head_dim;
  c.kv_heads = kv_width / c.head_dim;
  SD_CHECK(c.heads % c.kv_heads == 0, "%s %lld query heads do not share %lld key/value heads",
           tag.c_str(), static_cast<long long>(c.heads), static_cast<long long>(c.kv_heads));
  c.qkv_bias = shape_of(root + attn + "q_proj.bias").has_value();
  c.intermediate = need("model.layers.0.mlp.gate_proj.weight")[1];
  c.layers = 0;
  while (shape_of(root + "model.layers." + std::to_string(c.layers) + ".input_layernorm.weight"))
    ++c.layers;
  return c;
}

LlmRope llm_rope(const LlmConfig& c, int64_t len) {
  const int64_t half = c.head_dim / 2;
  LlmRope r;
  r.cos.resize(static_cast<size_t>(half * len));
  r.sin.resize(r.cos.size());
  for (int64_t p = 0; p < len; ++p)
    for (int64_t j = 0; j < half; ++j) {
      const double freq = std::pow(double(c.rope_theta), -2.0 * double(j) / double(c.head_dim));
      const double angle = double(p) * freq;
      r.cos[p * half + j] = static_cast<float>(std::cos(angle));
      r.sin[p * half + j] = static_cast<float>(std::sin(angle));
    }
  return r;
}

std::vector<float> llm_causal_mask(int64_t len, int64_t valid) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> mask(static_cast<size_t>(len * len), -inf);
  for (int64_t q = 0; q < len; ++q)
    for (int64_t k = 0; k <= std::min(q, valid - 1); ++k) mask[q * len + k] = 0.0f;
  return mask;
}

namespace {

// RoPE on x [D, H, L] with neighbouring channels (2j, 2j + 1) paired.
Tensor* rope_pairs(Context& ctx, Tensor* x, Tensor* cos_t, Tensor* sin_t) {
  const int64_t d = x->ne[0], heads = x->ne[1], len = x->ne[2];
  Tensor* xr = reshape(ctx, x, {2, d / 2, heads, len});
  Tensor* x0 = slice(ctx, xr, 0, 0, 1);
  Tensor* x1 = slice(ctx, xr, 0, 1, 2);
  Tensor* c = reshape(ctx, cos_t, {1, d / 2, 1, len});
  Tensor* s = reshape(ctx, sin_t, {1, d / 2, 1, len});
  Tensor* o0 = sub(ctx, mul(ctx, x0, c), mul(ctx, x1, s));
  Tensor* o1 = add(ctx, mul(ctx, x0, s), mul(ctx, x1, c));
  return reshape(ctx, concat(ctx, o0, o1, 0), {d, heads, len});
}

// Grouped-query self-attention of x [hidden, L]: [hidden, L].
Tensor* self_attention(const nn::Scope& attn, const LlmConfig& c, Tensor* x, Tensor* cos_t,
                       Tensor* sin_t, Tensor* mask) {
  Context& ctx = attn.ctx();
  const int64_t len = x->ne[1], hd = c.head_dim;
  auto project = [&](const char* name, int64_t heads) {  // -> [hd, heads, L]
    Tensor* t = nn::linear(attn[name], x, c.hidden, heads * hd, c.qkv_bias);
    return reshape(ctx, t, {hd, heads, len});
  };
  Tensor* q = project("q_proj", c.heads);
  Tensor* k = project("k_proj", c.kv_heads);
  Tensor* v = project("v_proj", c.kv_heads);
  if (c.qk_norm) {  // over each head's channels, before the rotation
    q = nn::rms_norm(attn["q_norm"], q, hd, c.eps);
    k = nn::rms_norm(attn["k_norm"], k, hd, c.eps);
  }
  const bool halves = c.rope_layout == RopeLayout::Halves;
  q = halves ? nn::apply_rope_halves(ctx, q, cos_t, sin_t) : rope_pairs(ctx, q, cos_t, sin_t);
  k = halves ? nn::apply_rope_halves(ctx, k, cos_t, sin_t) : rope_pairs(ctx, k, cos_t, sin_t);

  // Query head h reads key/value head h / group: repeat each kv head `group` times in place.
  const int64_t group = c.heads / c.kv_heads;
  auto tokens_then_heads = [&](Tensor* t) {     // [hd, kv, L] -> [hd, L, heads]
    Tensor* p = permute(ctx, t, {0, 2, 1, 3});  // [hd, L, kv]
    if (group == 1) return p;
    Tensor* r = view(ctx, p, {hd, len, group, c.kv_heads}, {p->nb[0], p->nb[1], 0, p->nb[2]}, 0);
    return reshape(ctx, cont(ctx, r), {hd, len, c.heads});
  };
  Tensor* out =
      attention(ctx, permute(ctx, q, {0, 2, 1, 3}), tokens_then_heads(k), tokens_then_heads(v),
                mask, 1.0f / std::sqrt(static_cast<float>(hd)),
                attn.attention_precision(attn["q_proj"].param("weight", {c.hidden, c.heads * hd})));
  out = reshape(ctx, out, {hd * c.heads, len});  // [hd, heads, L] -> [heads * hd, L]
  return nn::linear(attn["o_proj"], out, c.heads * hd, c.hidden, false);
}

Tensor* mlp(const nn::Scope& m, const LlmConfig& c, Tensor* x) {
  Context& ctx = m.ctx();
  Tensor* gate = silu(ctx, nn::linear(m["gate_proj"], x, c.hidden, c.intermediate, false));
  Tensor* h = mul(ctx, gate, nn::linear(m["up_proj"], x, c.hidden, c.intermediate, false));
  return nn::linear(m["down_proj"], h, c.intermediate, c.hidden, false);
}

}  // namespace

std::vector<Tensor*> llm_forward(const nn::Scope& llm, const LlmConfig& c, Tensor* token_ids,
                                 Tensor* rope_cos, Tensor* rope_sin, Tensor* mask,
                                 const std::vector<int>& hidden_layers,
                                 const std::vector<LlmInsertedRows>& inserted) {
  Context& ctx = llm.ctx();
  SD_CHECK(token_ids->type == DType::I32, "[llm] token ids must be i32");
  SD_CHECK(!hidden_layers.empty(), "[llm] no hidden layer asked for");
  for (int i : hidden_layers)
    SD_CHECK(i >= 0 && i <= c.layers, "[llm] hidden layer %d of a %d-layer %s", i, c.layers,
             llm_arch_name(c.arch));
  const int deepest = *std::max_element(hidden_layers.begin(), hidden_layers.end());
  const nn::Scope model = llm["model"];

  std::vector<Tensor*> states(static_cast<size_t>(deepest) + 1);
  Tensor* x = get_rows(ctx, model["embed_tokens"].param("weight", {c.hidden, c.vocab_size}),
                       token_ids);  // [hidden, L]
  if (!inserted.empty()) {
    // The sequence rebuilt from the embeddings between the inserted runs and the runs.
    const int64_t len = x->ne[1];
    Tensor* joined = nullptr;
    auto append = [&](Tensor* part) { joined = joined ? concat(ctx, joined, part, 1) : part; };
    int64_t next = 0;
    for (const LlmInsertedRows& run : inserted) {
      const int64_t n = run.rows->ne[1];
      SD_CHECK(run.rows->ne[0] == c.hidden && run.at >= next && run.at + n <= len,
               "[llm] %s rows inserted at %lld do not fit a %lld-token sequence of width %lld",
               run.rows->shape_string().c_str(), static_cast<long long>(run.at),
               static_cast<long long>(len), static_cast<long long>(c.hidden));
      if (run.at > next) append(slice(ctx, x, 1, next, run.at));
      append(run.rows);
      next = run.at + n;
    }
    if (next < len) append(slice(ctx, x, 1, next, len));
    x = cont(ctx, joined);
  }
  states[0] = x;
  for (int i = 0; i < deepest; ++i) {
    const nn::Scope layer = model["layers"][i];
    Tensor* h = nn::rms_norm(layer["input_layernorm"], x, c.hidden, c.eps);
    h = self_attention(layer["self_attn"], c, h, rope_cos, rope_sin, mask);
    x = add(ctx, x, h);
    h = nn::rms_norm(layer["post_attention_layernorm"], x, c.hidden, c.eps);
    x = set_name(add(ctx, x, mlp(layer["mlp"], c, h)), layer.prefix() + "out");
    states[static_cast<size_t>(i) + 1] = x;
  }
  // The last block's state is returned after the final norm, as transformers does.
  if (deepest == c.layers) states.back() = nn::rms_norm(model["norm"], x, c.hidden, c.eps);

  std::vector<Tensor*> out;
  for (int i : hidden_layers) out.push_back(states[static_cast<size_t>(i)]);
  return out;
}

}  // namespace sd::models
