#include "models/flux.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "backend/registry.h"
#include "models/loop_reference_test_util.h"
#include "nn/graph_runner.h"
#include "tensor/error.h"
#include "tensor/ops/unary.h"
#include "test_support.h"

namespace sd::models {
namespace {

using loops::Values;

const char* const kFluxPrefix = "model.diffusion_model.";

using sd::test::cpu_backend;

// Every dimension unlike the released model's: 2 heads of 16 channels (axes 4 + 6 + 6),
// MLP ratio 1.5, one double and two single blocks.
FluxConfig tiny_flux_config(bool guidance = true) {
  FluxConfig c;
  c.in_channels = c.out_channels = 16;  // 4 latent channels in 2x2 patches
  c.hidden = 32;
  c.heads = 2;
  c.mlp_hidden = 48;
  c.context_dim = 8;
  c.vec_dim = 12;
  c.depth = 1;
  c.depth_single = 2;
  c.guidance_embed = guidance;
  c.axes_dim = {4, 6, 6};
  return c;
}

struct Inputs {
  int64_t w = 6, h = 4, text = 3;  // latent 6x4: 3x2 patches
  Values latent, txt, y;
  float t = 0.7f, guidance = 3.5f;
};

Inputs some_inputs(const FluxConfig& c) {
  Inputs in;
  const int64_t ch = c.in_channels / 4;
  for (int64_t i = 0; i < in.w * in.h * ch; ++i) in.latent.push_back(std::sin(0.37f * i));
  for (int64_t i = 0; i < in.text * c.context_dim; ++i) in.txt.push_back(std::cos(0.21f * i));
  for (int64_t i = 0; i < c.vec_dim; ++i) in.y.push_back(0.1f * (i % 5) - 0.2f);
  return in;
}

Values run_flux(nn::RandomWeights& w, const FluxConfig& c, const Inputs& in) {
  const Values tokens = flux_patchify(in.latent, in.w, in.h, c.in_channels / 4, 2);
  const int64_t li = (in.w / 2) * (in.h / 2);
  const FluxRope rope = flux_rope(c, in.text, in.h / 2, in.w / 2);
  nn::GraphRunner runner(cpu_backend());
  nn::GraphCall call;
  Tensor* img = call.input_f32("img", make_shape({c.in_channels, li, 1}), tokens.data());
  Tensor* txt = call.input_f32("txt", make_shape({c.context_dim, in.text, 1}), in.txt.data());
  Tensor* t = call.input_f32("t", make_shape({1}), &in.t);
  Tensor* g = c.guidance_embed ? call.input_f32("g", make_shape({1}), &in.guidance) : nullptr;
  Tensor* y = call.input_f32("y", make_shape({static_cast<int64_t>(in.y.size()), 1}), in.y.data());
  const int64_t half = c.head_dim() / 2;
  Tensor* rc = call.input_f32("cos", make_shape({1, half, in.text + li}), rope.cos.data());
  Tensor* rs = call.input_f32("sin", make_shape({1, half, in.text + li}), rope.sin.data());
  return runner.run(
      call, flux_forward(nn::Scope(call.ctx(), w, kFluxPrefix), c, img, txt, t, g, y, rc, rs));
}

// The transformer with loops, from the paper's description, over the same weights.
struct ReferenceFlux {
  const nn::RandomWeights& w;
  const FluxConfig& c;

  Values lin(const std::string& name, const Values& x, int64_t in, int64_t out) const {
    return loops::linear(w, kFluxPrefix + name, x, in, out);
  }
  static Values silu(Values x) {
    for (float& v : x) v = v / (1.0f + std::exp(-v));
    return x;
  }
  static Values gelu(Values x) {
    for (float& v : x) v = unary_reference_value(UnaryOp::Gelu, v, 0.0f);
    return x;
  }
  Values mlp_embedder(const std::string& name, const Values& x, int64_t in) const {
    return lin(name + ".out_layer", silu(lin(name + ".in_layer", x, in, c.hidden)), c.hidden,
               c.hidden);
  }
  static Values sinusoids(float t) {  // 256 values, cos half first, of t * 1000
    Values e(256);
    for (int j = 0; j < 128; ++j) {
      const double arg = t * 1000.0 * std::exp(-std::log(10000.0) * j / 128.0);
      e[j] = static_cast<float>(std::cos(arg));
      e[128 + j] = static_cast<float>(std::sin(arg));
    }
    return e;
  }
  // LayerNorm, then (1 + scale) x + shift with chunks `shift_at`, `shift_at + 1` of mod.
  Values modulate(const Values& x, const Values& mod, int shift_at) const {
    Values y = loops::layer_norm(x, c.hidden, 1e-6f);
    const int64_t h = c.hidden;
    for (size_t t = 0; t < y.size() / h; ++t)
      for (int64_t i = 0; i < h; ++i)
        y[t * h + i] = y[t * h + i] * (1 + mod[(shift_at + 1) * h + i]) + mod[shift_at * h + i];
    return y;
  }
  // Token positions (index, row, column) of the joint sequence.
  std::array<float, 3> position(int64_t token, int64_t text, int64_t pw) const {
    if (token < text) return {0, 0, 0};
    const int64_t p = token - text;
    return {0, static_cast<float>(p / pw), static_cast<float>(p % pw)};
  }
  Values rope(Values x, int64_t len, int64_t text, int64_t pw) const {
    const int64_t hd = c.head_dim();
    for (int64_t t = 0; t < len; ++t) {
      const std::array<float, 3> pos = position(t, text, pw);
      for (int64_t head = 0; head < c.heads; ++head) {
        int64_t pair = 0;
        for (size_t axis = 0; axis < 3; ++axis)
          for (int j = 0; j < c.axes_dim[axis] / 2; ++j, ++pair) {
            const double angle = pos[axis] * std::pow(c.theta, -2.0 * j / c.axes_dim[axis]);
            float* v = &x[t * c.hidden + head * hd + 2 * pair];
            const double x0 = v[0], x1 = v[1];
            v[0] = static_cast<float>(x0 * std::cos(angle) - x1 * std::sin(angle));
            v[1] = static_cast<float>(x0 * std::sin(angle) + x1 * std::cos(angle));
          }
      }
    }
    return x;
  }
  // q, k or v number `part` of rows of `stride` values: [L][hidden].
  Values part(const Values& fused, int64_t stride, int part) const {
    const int64_t len = static_cast<int64_t>(fused.size()) / stride;
    Values out(static_cast<size_t>(len * c.hidden));
    for (int64_t t = 0; t < len; ++t)
      for (int64_t i = 0; i < c.hidden; ++i)
        out[t * c.hidden + i] = fused[t * stride + part * c.hidden + i];
    return out;
  }
  Values qk_norm(const Values& x, const std::string& scale) const {
    return loops::rms_norm(x, c.head_dim(), w.values(kFluxPrefix + scale), 1e-6f);
  }
  static Values cat_tokens(const Values& a, const Values& b) {
    Values out = a;
    out.insert(out.end(), b.begin(), b.end());
    return out;
  }
  static void add_gated(Values& x, const Values& y, const Values& mod, int gate_at, int64_t h) {
    for (size_t t = 0; t < x.size() / h; ++t)
      for (int64_t i = 0; i < h; ++i) x[t * h + i] += mod[gate_at * h + i] * y[t * h + i];
  }

  Values forward(const Inputs& in) const {
    const int64_t h = c.hidden, text = in.text, pw = in.w / 2;
    Values img =
        lin("img_in", flux_patchify(in.latent, in.w, in.h, c.in_channels / 4, 2), c.in_channels, h);
    Values vec = mlp_embedder("time_in", sinusoids(in.t), 256);
    if (c.guidance_embed) {
      const Values g = mlp_embedder("guidance_in", sinusoids(in.guidance), 256);
      for (int64_t i = 0; i < h; ++i) vec[i] += g[i];
    }
    const Values yv = mlp_embedder("vector_in", in.y, c.vec_dim);
    for (int64_t i = 0; i < h; ++i) vec[i] += yv[i];
    Values txt = lin("txt_in", in.txt, c.context_dim, h);
    const double scale = 1.0 / std::sqrt(double(c.head_dim()));

    for (int b = 0; b < c.depth; ++b) {
      const std::string s = "double_blocks." + std::to_string(b) + ".";
      const Values im = lin(s + "img_mod.lin", silu(vec), h, 6 * h);
      const Values tm = lin(s + "txt_mod.lin", silu(vec), h, 6 * h);
      const Values iqkv = lin(s + "img_attn.qkv", modulate(img, im, 0), h, 3 * h);
      const Values tqkv = lin(s + "txt_attn.qkv", modulate(txt, tm, 0), h, 3 * h);
      const int64_t len = text + static_cast<int64_t>(img.size()) / h;
      const Values q =
          rope(cat_tokens(qk_norm(part(tqkv, 3 * h, 0), s + "txt_attn.norm.query_norm.scale"),
                          qk_norm(part(iqkv, 3 * h, 0), s + "img_attn.norm.query_norm.scale")),
               len, text, pw);
      const Values k =
          rope(cat_tokens(qk_norm(part(tqkv, 3 * h, 1), s + "txt_attn.norm.key_norm.scale"),
                          qk_norm(part(iqkv, 3 * h, 1), s + "img_attn.norm.key_norm.scale")),
               len, text, pw);
      const Values v = cat_tokens(part(tqkv, 3 * h, 2), part(iqkv, 3 * h, 2));
      const Values a = loops::attention(q, k, v, len, c.heads, c.head_dim(), scale);
      const Values ta(a.begin(), a.begin() + text * h), ia(a.begin() + text * h, a.end());
      for (auto [x, att, mod, side] :
           {std::tuple<Values*, const Values*, const Values*, std::string>{&img, &ia, &im, "img"},
            {&txt, &ta, &tm, "txt"}}) {
        add_gated(*x, lin(s + side + "_attn.proj", *att, h, h), *mod, 2, h);
        const Values m = lin(s + side + "_mlp.2",
                             gelu(lin(s + side + "_mlp.0", modulate(*x, *mod, 3), h, c.mlp_hidden)),
                             c.mlp_hidden, h);
        add_gated(*x, m, *mod, 5, h);
      }
    }

    Values x = cat_tokens(txt, img);
    const int64_t len = static_cast<int64_t>(x.size()) / h, fw = 3 * h + c.mlp_hidden;
    for (int b = 0; b < c.depth_single; ++b) {
      const std::string s = "single_blocks." + std::to_string(b) + ".";
      const Values mod = lin(s + "modulation.lin", silu(vec), h, 3 * h);
      const Values fused = lin(s + "linear1", modulate(x, mod, 0), h, fw);
      const Values q =
          rope(qk_norm(part(fused, fw, 0), s + "norm.query_norm.scale"), len, text, pw);
      const Values k = rope(qk_norm(part(fused, fw, 1), s + "norm.key_norm.scale"), len, text, pw);
      const Values a =
          loops::attention(q, k, part(fused, fw, 2), len, c.heads, c.head_dim(), scale);
      Values both(static_cast<size_t>(len * (h + c.mlp_hidden)));
      for (int64_t t = 0; t < len; ++t) {
        for (int64_t i = 0; i < h; ++i) both[t * (h + c.mlp_hidden) + i] = a[t * h + i];
        for (int64_t i = 0; i < c.mlp_hidden; ++i)
          both[t * (h + c.mlp_hidden) + h + i] =
              unary_reference_value(UnaryOp::Gelu, fused[t * fw + 3 * h + i], 0.0f);
      }
      add_gated(x, lin(s + "linear2", both, h + c.mlp_hidden, h), mod, 2, h);
    }

    img.assign(x.begin() + text * h, x.end());
    const Values mod = lin("final_layer.adaLN_modulation.1", silu(vec), h, 2 * h);
    return lin("final_layer.linear", modulate(img, mod, 0), h, c.out_channels);
  }
};

TEST(Flux, TransformerMatchesALoopImplementation) {
  for (bool guidance : {true, false}) {
    const FluxConfig c = tiny_flux_config(guidance);
    nn::RandomWeights w(DType::F32, 3);
    const Inputs in = some_inputs(c);
    const Values out = run_flux(w, c, in);
    ASSERT_EQ(out.size(), static_cast<size_t>(c.out_channels * 6));
    EXPECT_LE(test::max_scaled_error(out, ReferenceFlux{w, c}.forward(in), 1e-4, 1e-3), 1.0)
        << "guidance embedding " << guidance;
    bool reads_guidance = false;
    for (const std::string& name : w.names())
      reads_guidance = reads_guidance || name.find("guidance_in") != std::string::npos;
    EXPECT_EQ(reads_guidance, guidance);
  }
}

TEST(Flux, PatchesHoldChannelThenRowThenColumn) {
  // 2 channels of a 4x2 latent: value = channel * 100 + y * 10 + x.
  Values latent;
  for (int ch = 0; ch < 2; ++ch)
    for (int y = 0; y < 2; ++y)
      for (int x = 0; x < 4; ++x) latent.push_back(ch * 100.0f + y * 10.0f + x);
  const Values tokens = flux_patchify(latent, 4, 2, 2, 2);
  ASSERT_EQ(tokens.size(), 16u);
  // Token 1 is the patch at column 1: x 2..3.
  EXPECT_EQ(Values(tokens.begin() + 8, tokens.end()), (Values{2, 3, 12, 13, 102, 103, 112, 113}));
  EXPECT_EQ(flux_unpatchify(tokens, 4, 2, 2, 2), latent);
}

TEST(Flux, RopeTablesRotateImageTokensByRowAndColumn) {
  FluxConfig c = tiny_flux_config();
  const FluxRope r = flux_rope(c, 2, 2, 3);  // 2 text tokens, 2x3 patches
  const int64_t half = c.head_dim() / 2;
  ASSERT_EQ(r.cos.size(), static_cast<size_t>(half * 8));
  for (int64_t j = 0; j < half * 2; ++j) {  // text: no rotation
    EXPECT_EQ(r.cos[j], 1.0f);
    EXPECT_EQ(r.sin[j], 0.0f);
  }
  // Image token 5 is row 1, column 2; pair 2 is the row axis' first (frequency 1), pair 5
  // the column axis' first.
  const int64_t t = 2 + 5;
  EXPECT_FLOAT_EQ(r.cos[t * half + 0], 1.0f);  // index axis: position 0
  EXPECT_FLOAT_EQ(r.sin[t * half + 2], std::sin(1.0f));
  EXPECT_FLOAT_EQ(r.sin[t * half + 5], std::sin(2.0f));
  EXPECT_FLOAT_EQ(r.sin[t * half + 6], std::sin(2.0f * std::pow(10000.0f, -2.0f / 6.0f)));
}

// FLUX.2: text tokens numbered along the fourth axis, the image at index 0 on it, theta
// 2000 on every axis.
TEST(Flux, Flux2RopeNumbersTheTextOnItsOwnAxis) {
  const FluxConfig c = FluxConfig::flux2_klein();
  const FluxRope r = flux_rope(c, 3, 2, 2);  // 3 text tokens, 2x2 patches
  const int64_t half = c.head_dim() / 2;     // 64: 16 pairs per axis
  ASSERT_EQ(r.cos.size(), static_cast<size_t>(half * 7));
  // Text token 2: axis 3's first pair turns by 2, its second by 2 * 2000^(-2/32); the
  // other axes not at all.
  EXPECT_FLOAT_EQ(r.sin[2 * half + 48], std::sin(2.0f));
  EXPECT_FLOAT_EQ(r.sin[2 * half + 49], std::sin(2.0f * std::pow(2000.0f, -2.0f / 32.0f)));
  EXPECT_EQ(r.sin[2 * half + 16], 0.0f);
  // Image token 3 (row 1, column 1): axes 1 and 2 turn, axis 3 does not.
  EXPECT_FLOAT_EQ(r.sin[6 * half + 16], std::sin(1.0f));
  EXPECT_FLOAT_EQ(r.sin[6 * half + 32], std::sin(1.0f));
  EXPECT_EQ(r.sin[6 * half + 48], 0.0f);
}

// FLUX.2's transformer reads the three shared modulations, no per-block ones, no biases, a
// SwiGLU MLP of twice the hidden width and no vector input.
TEST(Flux, Flux2ReadsSharedModulationsAndNoBiases) {
  FluxConfig c = FluxConfig::flux2_klein();
  c.hidden = 128;
  c.heads = 1;
  c.mlp_hidden = 24;
  c.context_dim = 16;
  c.depth = 2;
  c.depth_single = 1;
  nn::RandomWeights w;
  Context ctx;
  Tensor* img = ctx.new_tensor(DType::F32, {128, 4, 1});
  Tensor* txt = ctx.new_tensor(DType::F32, {16, 3, 1});
  Tensor* t = ctx.new_tensor(DType::F32, {1});
  Tensor* rope = ctx.new_tensor(DType::F32, {1, 64, 7});
  Tensor* out = flux_forward(nn::Scope(ctx, w, ""), c, img, txt, t, nullptr, nullptr, rope, rope);
  EXPECT_EQ(out->ne, make_shape({128, 4, 1}));
  const std::vector<std::string> names = w.names();
  auto has = [&](const std::string& n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  EXPECT_TRUE(has("double_stream_modulation_img.lin.weight"));
  EXPECT_TRUE(has("double_stream_modulation_txt.lin.weight"));
  EXPECT_TRUE(has("single_stream_modulation.lin.weight"));
  for (const std::string& n : names) {
    EXPECT_EQ(n.find(".bias"), std::string::npos) << n;
    EXPECT_EQ(n.find("_mod."), std::string::npos) << n;
    EXPECT_EQ(n.find("vector_in"), std::string::npos) << n;
  }
  Tensor* mlp0 = w.get(ctx, "double_blocks.0.img_mlp.0.weight", make_shape({128, 48}));
  EXPECT_EQ(mlp0->ne[1], 48);  // gate and value halves
}

TEST(Flux, MismatchedInputsFailWithTheirSizes) {
  const FluxConfig c = tiny_flux_config();
  nn::RandomWeights w;
  Inputs in = some_inputs(c);
  in.y.resize(5);
  try {
    run_flux(w, c, in);
    FAIL() << "a 5-value vector was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(vector)"), std::string::npos) << e.what();
  }
}

// Chroma: the approximator gives every modulation; a masked text token is invisible to the
// image, an unmasked one is not.
TEST(Flux, ChromaMaskHidesMaskedTextTokensFromTheImage) {
  FluxConfig c = tiny_flux_config(false);
  c.vec_dim = 0;
  c.approximator.in = 16;
  c.approximator.hidden = 20;
  c.approximator.depth = 2;
  ASSERT_EQ(c.modulation_count(), 3 * 2 + 12 * 1 + 2);
  nn::RandomWeights w(DType::F32, 5);
  Inputs in = some_inputs(c);
  const int64_t li = (in.w / 2) * (in.h / 2);
  const float inf = INFINITY;
  auto run = [&](const Values& txt, const Values& mask) {
    const Values tokens = flux_patchify(in.latent, in.w, in.h, c.in_channels / 4, 2);
    const FluxRope rope = flux_rope(c, in.text, in.h / 2, in.w / 2);
    nn::GraphRunner runner(cpu_backend());
    nn::GraphCall call;
    Tensor* img = call.input_f32("img", make_shape({c.in_channels, li, 1}), tokens.data());
    Tensor* t = call.input_f32("txt", make_shape({c.context_dim, in.text, 1}), txt.data());
    Tensor* ts = call.input_f32("t", make_shape({1}), &in.t);
    const float zero = 0.0f;
    Tensor* g = call.input_f32("g", make_shape({1}), &zero);
    const int64_t half = c.head_dim() / 2;
    Tensor* rc = call.input_f32("cos", make_shape({1, half, in.text + li}), rope.cos.data());
    Tensor* rs = call.input_f32("sin", make_shape({1, half, in.text + li}), rope.sin.data());
    Tensor* m =
        mask.empty() ? nullptr : call.input_f32("mask", make_shape({in.text + li}), mask.data());
    return runner.run(call, flux_forward(nn::Scope(call.ctx(), w, kFluxPrefix), c, img, t, ts, g,
                                         nullptr, rc, rs, m));
  };
  Values other = in.txt;
  for (int64_t i = 2 * c.context_dim; i < 3 * c.context_dim; ++i) other[i] += 1.0f;  // token 2
  Values mask(static_cast<size_t>(in.text + li), 0.0f);
  mask[2] = -inf;
  const Values masked = run(in.txt, mask);
  EXPECT_EQ(run(other, mask), masked);
  EXPECT_NE(run(other, {}), run(in.txt, {}));
  EXPECT_NE(run(in.txt, {}), masked);
  for (const std::string& name : w.names()) {
    EXPECT_EQ(name.find("_mod."), std::string::npos) << name;
    EXPECT_EQ(name.find("time_in"), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace sd::models
