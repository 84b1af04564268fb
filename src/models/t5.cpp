#include "models/t5.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "nn/layers.h"
#include "tensor/error.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/get_rows.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/norm.h"
#include "tensor/ops/softmax.h"
#include "tensor/ops/unary.h"
#include "tensor/ops/view.h"

namespace sd::models {

std::vector<int32_t> t5_relative_position_buckets(int64_t n, int buckets, int max_distance) {
  // Half the buckets for keys after the query; within a half, exact buckets for distances
  // below max_exact, then logarithmically wider ones up to max_distance.
  const int half = buckets / 2;
  const int max_exact = half / 2;
  std::vector<int32_t> out(static_cast<size_t>(n * n));
  for (int64_t q = 0; q < n; ++q) {
    for (int64_t k = 0; k < n; ++k) {
      const int64_t rel = k - q;
      int bucket = rel > 0 ? half : 0;
      const int64_t dist = rel < 0 ? -rel : rel;
      if (dist < max_exact) {
        bucket += static_cast<int>(dist);
      } else {
        // sd.cpp computes the logarithms in float; the same rounding gives the same buckets.
        const float log_pos = std::log(static_cast<float>(dist) / max_exact);
        const float log_base = std::log(static_cast<float>(max_distance) / max_exact);
        const int large = max_exact + static_cast<int>((log_pos / log_base) * (half - max_exact));
        bucket += std::min(large, half - 1);
      }
      out[static_cast<size_t>(q * n + k)] = bucket;
    }
  }
  return out;
}

namespace {

Tensor* t5_norm(const nn::Scope& s, Tensor* x, int64_t dim, float eps) {
  return rms_norm(s.ctx(), x, eps, s.param("weight", {dim}));
}

// The relative position bias of every head, f32 [L keys, L queries, heads]: rows of the
// bias table selected by bucket.
Tensor* position_bias(const nn::Scope& attn, const T5Config& c, Tensor* buckets, int64_t len) {
  Context& ctx = attn.ctx();
  Tensor* table = attn["relative_attention_bias"].param("weight", {c.heads, c.relative_buckets});
  Tensor* bias = get_rows(ctx, table, buckets);        // [heads, L * L]
  bias = reshape(ctx, bias, {c.heads, len, len});      // [heads, Lk, Lq]
  return cont(ctx, permute(ctx, bias, {1, 2, 0, 3}));  // [Lk, Lq, heads]
}

// Attention without scaling, with the bias added to the scores of each head.
Tensor* self_attention(const nn::Scope& attn, const T5Config& c, Tensor* x, Tensor* bias) {
  Context& ctx = attn.ctx();
  const int64_t len = x->ne[1], n = x->ne[2];
  const int64_t d_kv = c.inner_dim / c.heads;
  auto heads_of = [&](const char* name) {  // [inner, L, N] -> [d_kv, L, heads, N]
    Tensor* t = nn::linear(attn[name], x, c.model_dim, c.inner_dim, false);
    return reshape(ctx, t, {d_kv, c.heads, len, n});
  };
  Tensor* q = cont(ctx, permute(ctx, heads_of("q"), {0, 2, 1, 3}));  // [d_kv, L, heads, N]
  Tensor* k = cont(ctx, permute(ctx, heads_of("k"), {0, 2, 1, 3}));
  Tensor* v = cont(ctx, permute(ctx, heads_of("v"), {2, 0, 1, 3}));  // [L, d_kv, heads, N]
  Tensor* scores = matmul(ctx, k, q);                                // [Lk, Lq, heads, N]
  Tensor* weights = softmax(ctx, scores, bias, 1.0f);
  Tensor* out = matmul(ctx, v, weights);             // [d_kv, Lq, heads, N]
  out = cont(ctx, permute(ctx, out, {0, 2, 1, 3}));  // [d_kv, heads, L, N]
  out = reshape(ctx, out, {c.inner_dim, len, n});
  return nn::linear(attn["o"], out, c.inner_dim, c.model_dim, false);
}

Tensor* feed_forward(const nn::Scope& ff, const T5Config& c, Tensor* x) {
  Context& ctx = ff.ctx();
  Tensor* gate = gelu(ctx, nn::linear(ff["wi_0"], x, c.model_dim, c.ff_dim, false));
  Tensor* h = mul(ctx, gate, nn::linear(ff["wi_1"], x, c.model_dim, c.ff_dim, false));
  return nn::linear(ff["wo"], h, c.ff_dim, c.model_dim, false);
}

}  // namespace

Tensor* t5_encoder_forward(const nn::Scope& t5, const T5Config& c, Tensor* token_ids,
                           Tensor* buckets, Tensor* key_mask) {
  Context& ctx = t5.ctx();
  SD_CHECK(token_ids->type == DType::I32, "[t5] token ids must be i32");
  SD_CHECK(c.heads > 0 && c.inner_dim % c.heads == 0, "[t5] %lld heads do not divide %lld",
           static_cast<long long>(c.heads), static_cast<long long>(c.inner_dim));
  const int64_t len = token_ids->ne[0];
  const nn::Scope blocks = t5["encoder"]["block"];

  // 1. Token embeddings (no position embedding: positions enter as attention bias).
  Tensor* x = get_rows(ctx, t5["shared"].param("weight", {c.model_dim, c.vocab_size}),
                       token_ids);  // [d, L, N]
  // The attention bias of layer i: its block's table (umT5) or block 0's (T5), with a padding
  // mask joined to it, the same for every query and head.
  auto bias_of = [&](int i) {
    Tensor* bias = position_bias(blocks[i]["layer"][0]["SelfAttention"], c, buckets, len);
    return key_mask ? add(ctx, bias, reshape(ctx, key_mask, {len, 1, 1})) : bias;
  };
  Tensor* shared_bias = c.bias_per_layer ? nullptr : bias_of(0);

  // 2. Pre-norm layers: x + attn(norm(x)), x + ff(norm(x)).
  for (int i = 0; i < c.layers; ++i) {
    const nn::Scope layer = blocks[i]["layer"];
    Tensor* bias = c.bias_per_layer ? bias_of(i) : shared_bias;
    Tensor* h = t5_norm(layer[0]["layer_norm"], x, c.model_dim, c.eps);
    h = self_attention(layer[0]["SelfAttention"], c, h, bias);
    x = set_name(add(ctx, x, h), blocks[i].prefix() + "attn_out");
    h = t5_norm(layer[1]["layer_norm"], x, c.model_dim, c.eps);
    h = feed_forward(layer[1]["DenseReluDense"], c, h);
    x = set_name(add(ctx, x, h), blocks[i].prefix() + "out");
  }

  // 3. Final norm.
  x = t5_norm(t5["encoder"]["final_layer_norm"], x, c.model_dim, c.eps);
  return set_name(x, t5.prefix() + "out");
}

}  // namespace sd::models
