// The graph of one full-resolution stage of the SD1.5 UNet (a ResBlock followed by a
// SpatialTransformer, as in the LDM checkpoint's input_blocks.1), built from engine ops
// with weights as unallocated parameters. Used to measure the graph allocator on the
// shapes that matter, before the real models exist.
#pragma once

#include <cmath>

#include "tensor/context.h"
#include "tensor/ops/attention.h"
#include "tensor/ops/conv2d.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/norm.h"
#include "tensor/ops/unary.h"
#include "tensor/ops/view.h"

namespace sd::test {

struct Sd15BlockShape {
  int64_t width = 64, height = 64, channels = 320, batch = 2;
  int64_t context_tokens = 77, context_dim = 768, temb_dim = 1280, heads = 8;
};

class Sd15BlockBuilder {
 public:
  Sd15BlockBuilder(Context& ctx, const Sd15BlockShape& s) : ctx_(ctx), s_(s) {}

  Tensor* weight(std::initializer_list<int64_t> ne, DType type = DType::F16) {
    Tensor* w = ctx_.new_tensor(type, ne, "w" + std::to_string(count_++));
    w->flags |= kFlagParam;
    return w;
  }

  Tensor* linear(Tensor* x, int64_t in, int64_t out) {
    return add(ctx_, matmul(ctx_, weight({in, out}), x), weight({out}, DType::F32));
  }

  Tensor* res_block(Tensor* x, Tensor* temb) {
    const int64_t c = s_.channels;
    Tensor* h = silu(
        ctx_, group_norm(ctx_, x, 32, 1e-5f, weight({c}, DType::F32), weight({c}, DType::F32)));
    h = conv2d(ctx_, h, weight({3, 3, c, c}), weight({c}, DType::F32), 1, 1, 1, 1, 1, 1);
    Tensor* t = linear(silu(ctx_, temb), s_.temb_dim, c);  // [C, N]
    h = add(ctx_, h, reshape(ctx_, t, {1, 1, c, s_.batch}));
    h = silu(ctx_,
             group_norm(ctx_, h, 32, 1e-5f, weight({c}, DType::F32), weight({c}, DType::F32)));
    h = conv2d(ctx_, h, weight({3, 3, c, c}), weight({c}, DType::F32), 1, 1, 1, 1, 1, 1);
    return add(ctx_, x, h);
  }

  Tensor* attention_block(Tensor* x, Tensor* context) {  // x [C, L, N]
    const int64_t c = s_.channels, d = c / s_.heads, l = x->ne[1];
    Tensor* q = reshape(ctx_, matmul(ctx_, weight({c, c}), x), {d, s_.heads, l, s_.batch});
    Tensor* kv_src = context ? context : x;
    const int64_t kv_dim = kv_src->ne[0], lk = kv_src->ne[1];
    Tensor* k =
        reshape(ctx_, matmul(ctx_, weight({kv_dim, c}), kv_src), {d, s_.heads, lk, s_.batch});
    Tensor* v =
        reshape(ctx_, matmul(ctx_, weight({kv_dim, c}), kv_src), {d, s_.heads, lk, s_.batch});
    auto heads_first = [&](Tensor* t) { return permute(ctx_, t, {0, 2, 1, 3}); };  // [D, L, H, N]
    Tensor* o = attention(ctx_, heads_first(q), heads_first(k), heads_first(v), nullptr,
                          1.0f / std::sqrt(static_cast<float>(d)));
    return linear(reshape(ctx_, o, {c, l, s_.batch}), c, c);
  }

  Tensor* transformer(Tensor* x, Tensor* context) {
    const int64_t c = s_.channels, l = s_.width * s_.height;
    Tensor* h = group_norm(ctx_, x, 32, 1e-6f, weight({c}, DType::F32), weight({c}, DType::F32));
    h = conv2d(ctx_, h, weight({1, 1, c, c}), weight({c}, DType::F32), 1, 1, 0, 0, 1, 1);
    h = cont(ctx_, permute(ctx_, reshape(ctx_, h, {l, c, s_.batch}), {1, 0, 2, 3}));  // [C, L, N]
    auto ln = [&](Tensor* t) {
      return layer_norm(ctx_, t, 1e-5f, weight({c}, DType::F32), weight({c}, DType::F32));
    };
    h = add(ctx_, h, attention_block(ln(h), nullptr));
    h = add(ctx_, h, attention_block(ln(h), context));
    // GEGLU feed-forward: project to 2 x 4C, gate one half with GELU of the other.
    Tensor* ff = linear(ln(h), c, 8 * c);
    Tensor* value = slice(ctx_, ff, 0, 0, 4 * c);
    Tensor* gate = slice(ctx_, ff, 0, 4 * c, 8 * c);
    h = add(ctx_, h, linear(mul(ctx_, value, gelu(ctx_, gate)), 4 * c, c));
    h = cont(ctx_, permute(ctx_, h, {1, 0, 2, 3}));  // [L, C, N]
    h = reshape(ctx_, h, {s_.width, s_.height, c, s_.batch});
    h = conv2d(ctx_, h, weight({1, 1, c, c}), weight({c}, DType::F32), 1, 1, 0, 0, 1, 1);
    return add(ctx_, x, h);
  }

  Tensor* build() {
    Tensor* x = ctx_.new_tensor(DType::F32, {s_.width, s_.height, s_.channels, s_.batch}, "x");
    Tensor* temb = ctx_.new_tensor(DType::F32, {s_.temb_dim, s_.batch}, "temb");
    Tensor* context =
        ctx_.new_tensor(DType::F32, {s_.context_dim, s_.context_tokens, s_.batch}, "context");
    for (Tensor* in : {x, temb, context}) in->flags |= kFlagInput;
    return transformer(res_block(x, temb), context);
  }

 private:
  Context& ctx_;
  Sd15BlockShape s_;
  int count_ = 0;
};

}  // namespace sd::test
