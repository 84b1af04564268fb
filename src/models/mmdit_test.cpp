#include "models/mmdit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "backend/registry.h"
#include "models/flux.h"
#include "models/loop_reference_test_util.h"
#include "nn/graph_runner.h"
#include "nn/param_recorder.h"
#include "tensor/error.h"
#include "tensor/ops/unary.h"
#include "test_support.h"

namespace sd::models {
namespace {

using loops::Values;

const char* const kMmditPrefix = "model.diffusion_model.";

using sd::test::cpu_backend;

// Every dimension unlike the released models': 3 joint blocks (3 heads of 8), 4 latent
// channels in, 3 out, MLP ratio 2, a 5x5 position table, narrow text and vector inputs.
// `mmdit_x`: SD3.5 Medium's q/k RMS norms and attn2 in the first two blocks.
MmditConfig tiny_config(bool mmdit_x, QkNorm norm = QkNorm::Rms) {
  MmditConfig c;
  c.in_channels = 4;
  c.out_channels = 3;
  c.hidden = 24;
  c.depth = 3;
  c.context_dim = 10;
  c.adm_dim = 6;
  c.pos_embed_max = 5;
  c.mlp_ratio = 2;
  c.qk_norm = mmdit_x ? norm : QkNorm::None;
  c.x_self_attn_blocks = mmdit_x ? 2 : 0;
  return c;
}

struct MmditInputs {
  int64_t w = 6, h = 4, text = 3;  // latent 6x4: 3x2 patches
  Values latent, context, y;
  float t = 700.0f;
};

MmditInputs some_inputs(const MmditConfig& c) {
  MmditInputs in;
  for (int64_t i = 0; i < in.w * in.h * c.in_channels; ++i)
    in.latent.push_back(std::sin(0.37f * i));
  for (int64_t i = 0; i < in.text * c.context_dim; ++i) in.context.push_back(std::cos(0.21f * i));
  for (int64_t i = 0; i < c.adm_dim; ++i) in.y.push_back(0.1f * (i % 5) - 0.2f);
  return in;
}

Values run_mmdit(nn::Weights& w, const MmditConfig& c, const MmditInputs& in,
                 const std::vector<int>& skip = {}) {
  nn::GraphRunner runner(cpu_backend());
  nn::GraphCall call;
  Tensor* x = call.input_f32("x", make_shape({in.w, in.h, c.in_channels, 1}), in.latent.data());
  Tensor* ctx =
      call.input_f32("context", make_shape({c.context_dim, in.text, 1}), in.context.data());
  Tensor* t = call.input_f32("t", make_shape({1}), &in.t);
  Tensor* y = call.input_f32("y", make_shape({static_cast<int64_t>(in.y.size()), 1}), in.y.data());
  return runner.run(call,
                    mmdit_forward(nn::Scope(call.ctx(), w, kMmditPrefix), c, x, t, y, ctx, skip));
}

// The MMDiT with loops, from the paper's description and sd3-ref's module layout, over the
// same weights: tokens [L][hidden].
struct ReferenceMmdit {
  const nn::RandomWeights& w;
  const MmditConfig& c;

  Values lin(const std::string& name, const Values& x, int64_t in, int64_t out) const {
    return loops::linear(w, kMmditPrefix + name, x, in, out);
  }
  static Values silu(Values x) {
    for (float& v : x) v = v / (1.0f + std::exp(-v));
    return x;
  }
  static Values gelu(Values x) {
    for (float& v : x) v = unary_reference_value(UnaryOp::Gelu, v, 0.0f);
    return x;
  }
  Values embedder(const std::string& name, const Values& x, int64_t in) const {
    return lin(name + ".mlp.2", silu(lin(name + ".mlp.0", x, in, c.hidden)), c.hidden, c.hidden);
  }
  static Values sinusoids(float t) {  // 256 values, cos half first
    Values e(256);
    for (int j = 0; j < 128; ++j) {
      const double arg = t * std::exp(-std::log(10000.0) * j / 128.0);
      e[j] = static_cast<float>(std::cos(arg));
      e[128 + j] = static_cast<float>(std::sin(arg));
    }
    return e;
  }
  // (1 + scale) LN(x) + shift, chunks `shift_at` and `shift_at + 1` of mod.
  Values modulate(const Values& x, const Values& mod, int shift_at) const {
    Values y = loops::layer_norm(x, c.hidden, 1e-6f);
    const int64_t h = c.hidden;
    for (size_t t = 0; t < y.size() / h; ++t)
      for (int64_t i = 0; i < h; ++i)
        y[t * h + i] = y[t * h + i] * (1 + mod[(shift_at + 1) * h + i]) + mod[shift_at * h + i];
    return y;
  }
  Values part(const Values& qkv, int p) const {
    const int64_t h = c.hidden, len = static_cast<int64_t>(qkv.size()) / (3 * h);
    Values out(static_cast<size_t>(len * h));
    for (int64_t t = 0; t < len; ++t)
      for (int64_t i = 0; i < h; ++i) out[t * h + i] = qkv[t * 3 * h + p * h + i];
    return out;
  }
  Values head_norm(Values x, const std::string& name) const {
    const int64_t d = c.head_dim();
    const Values g = w.values(kMmditPrefix + name + ".weight");
    if (c.qk_norm == QkNorm::Rms) return loops::rms_norm(x, d, g, 1e-6f);
    const Values b = w.values(kMmditPrefix + name + ".bias");
    x = loops::layer_norm(x, d, 1e-6f);
    for (size_t i = 0; i < x.size(); ++i) x[i] = x[i] * g[i % d] + b[i % d];
    return x;
  }
  struct Qkv {
    Values q, k, v;
  };
  Qkv qkv(const std::string& attn, const Values& x) const {
    const Values f = lin(attn + ".qkv", x, c.hidden, 3 * c.hidden);
    Qkv r{part(f, 0), part(f, 1), part(f, 2)};
    if (c.qk_norm != QkNorm::None) {
      r.q = head_norm(r.q, attn + ".ln_q");
      r.k = head_norm(r.k, attn + ".ln_k");
    }
    return r;
  }
  Values attend(const Qkv& a) const {
    const int64_t len = static_cast<int64_t>(a.q.size()) / c.hidden;
    return loops::attention(a.q, a.k, a.v, len, c.heads(), c.head_dim(),
                            1.0 / std::sqrt(double(c.head_dim())));
  }
  static Values cat(Values a, const Values& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }
  static void add_gated(Values& x, const Values& y, const Values& mod, int gate_at, int64_t h) {
    for (size_t t = 0; t < x.size() / h; ++t)
      for (int64_t i = 0; i < h; ++i) x[t * h + i] += mod[gate_at * h + i] * y[t * h + i];
  }
  void post(const std::string& s, Values& x, const Values& att, const Values& mod) const {
    const int64_t h = c.hidden;
    add_gated(x, lin(s + ".attn.proj", att, h, h), mod, 2, h);
  }
  void mlp(const std::string& s, Values& x, const Values& mod) const {
    const int64_t h = c.hidden, m = c.mlp_ratio * h;
    add_gated(x, lin(s + ".mlp.fc2", gelu(lin(s + ".mlp.fc1", modulate(x, mod, 3), h, m)), m, h),
              mod, 5, h);
  }

  Values forward(const MmditInputs& in, const std::vector<int>& skip = {}) const {
    const int64_t h = c.hidden, pw = in.w / 2, ph = in.h / 2;
    Values x = lin("x_embedder.proj", flux_patchify(in.latent, in.w, in.h, c.in_channels, 2),
                   4 * c.in_channels, h);
    const Values table = w.values(std::string(kMmditPrefix) + "pos_embed");
    const int64_t m = c.pos_embed_max, top = (m - ph) / 2, left = (m - pw) / 2;
    for (int64_t r = 0; r < ph; ++r)
      for (int64_t col = 0; col < pw; ++col)
        for (int64_t i = 0; i < h; ++i)
          x[(r * pw + col) * h + i] += table[((top + r) * m + left + col) * h + i];
    Values vec = embedder("t_embedder", sinusoids(in.t), 256);
    const Values yv = embedder("y_embedder", in.y, c.adm_dim);
    for (int64_t i = 0; i < h; ++i) vec[i] += yv[i];
    Values ctx = lin("context_embedder", in.context, c.context_dim, h);

    for (int b = 0; b < c.depth; ++b) {
      if (std::find(skip.begin(), skip.end(), b) != skip.end()) continue;
      const std::string s = "joint_blocks." + std::to_string(b) + ".";
      const bool last = b == c.depth - 1, x2 = b < c.x_self_attn_blocks;
      const Values cm =
          lin(s + "context_block.adaLN_modulation.1", silu(vec), h, (last ? 2 : 6) * h);
      const Values xm = lin(s + "x_block.adaLN_modulation.1", silu(vec), h, (x2 ? 9 : 6) * h);
      const Qkv cq = qkv(s + "context_block.attn", modulate(ctx, cm, 0));
      const Qkv xq = qkv(s + "x_block.attn", modulate(x, xm, 0));
      // MMDiT-X: a second attention over the image tokens alone, from the block's input.
      const Values a2 = x2 ? attend(qkv(s + "x_block.attn2", modulate(x, xm, 6))) : Values();
      const Values a = attend({cat(cq.q, xq.q), cat(cq.k, xq.k), cat(cq.v, xq.v)});
      const int64_t lc = static_cast<int64_t>(ctx.size()) / h;
      const Values ca(a.begin(), a.begin() + lc * h), xa(a.begin() + lc * h, a.end());
      if (!last) {
        post(s + "context_block", ctx, ca, cm);
        mlp(s + "context_block", ctx, cm);
      }
      post(s + "x_block", x, xa, xm);
      if (x2) add_gated(x, lin(s + "x_block.attn2.proj", a2, h, h), xm, 8, h);
      mlp(s + "x_block", x, xm);
    }
    const Values mod = lin("final_layer.adaLN_modulation.1", silu(vec), h, 2 * h);
    return lin("final_layer.linear", modulate(x, mod, 0), h, c.patch_width());
  }
};

TEST(Mmdit, MatchesALoopImplementation) {
  for (bool mmdit_x : {false, true}) {
    const MmditConfig c = tiny_config(mmdit_x);
    nn::RandomWeights w(DType::F32, 3);
    const MmditInputs in = some_inputs(c);
    const Values out = run_mmdit(w, c, in);
    ASSERT_EQ(out.size(), static_cast<size_t>(c.patch_width() * 6));
    EXPECT_LE(test::max_scaled_error(out, ReferenceMmdit{w, c}.forward(in), 1e-4, 1e-3), 1.0)
        << "MMDiT-X " << mmdit_x;
    bool reads_attn2 = false, reads_ln_q = false;
    for (const std::string& name : w.names()) {
      reads_attn2 = reads_attn2 || name.find("attn2") != std::string::npos;
      reads_ln_q = reads_ln_q || name.find("ln_q") != std::string::npos;
    }
    EXPECT_EQ(reads_attn2, mmdit_x);
    EXPECT_EQ(reads_ln_q, mmdit_x);
  }
}

TEST(Mmdit, LayerNormQkNormsMatchTheLoops) {
  const MmditConfig c = tiny_config(true, QkNorm::LayerNorm);
  nn::RandomWeights w(DType::F32, 5);
  const MmditInputs in = some_inputs(c);
  const Values out = run_mmdit(w, c, in);  // creates the weights the loops read
  EXPECT_LE(test::max_scaled_error(out, ReferenceMmdit{w, c}.forward(in), 1e-4, 1e-3), 1.0);
}

TEST(Mmdit, SkippedLayersAreLeftOutAndChangeTheOutput) {
  const MmditConfig c = tiny_config(true);
  nn::RandomWeights w(DType::F32, 7);
  const MmditInputs in = some_inputs(c);
  const Values full = run_mmdit(w, c, in);
  const Values skipped = run_mmdit(w, c, in, {1});
  EXPECT_LE(test::max_scaled_error(skipped, ReferenceMmdit{w, c}.forward(in, {1}), 1e-4, 1e-3),
            1.0);
  EXPECT_GT(test::max_scaled_error(skipped, full, 1e-4, 1e-3), 1.0);
}

TEST(Mmdit, SameInputsGiveTheSameOutput) {
  const MmditConfig c = tiny_config(true);
  nn::RandomWeights w(DType::F16, 11);
  const MmditInputs in = some_inputs(c);
  EXPECT_EQ(run_mmdit(w, c, in), run_mmdit(w, c, in));
}

TEST(Mmdit, PatchesComeBackPatchFirst) {
  // Two output channels of a 4x2 latent: token channel (dy * 2 + dx) * 2 + c.
  const int64_t w = 4, h = 2, ch = 2;
  Values tokens(static_cast<size_t>(w * h * ch));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<float>(i);
  const Values latent = mmdit_unpatchify(tokens, w, h, ch, 2);
  // Token 1 (the patch at column 1), dy 1, dx 0, channel 1: 8 + (2 + 0) * 2 + 1 = 13, at
  // x 2, y 1 of channel 1.
  EXPECT_EQ(latent[(1 * h + 1) * w + 2], 13.0f);
  EXPECT_EQ(latent[0], 0.0f);
}

TEST(Mmdit, TooLargeALatentForThePositionTableFails) {
  const MmditConfig c = tiny_config(false);
  nn::RandomWeights w;
  MmditInputs in = some_inputs(c);
  in.w = 12;  // 6 patches across, the table has 5
  in.latent.assign(static_cast<size_t>(in.w * in.h * c.in_channels), 0.5f);
  try {
    run_mmdit(w, c, in);
    FAIL() << "a latent wider than the position table was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("position table"), std::string::npos) << e.what();
  }
}

TEST(Mmdit, MismatchedInputsFailWithTheirSizes) {
  const MmditConfig c = tiny_config(false);
  nn::RandomWeights w;
  MmditInputs in = some_inputs(c);
  in.y.resize(5);
  try {
    run_mmdit(w, c, in);
    FAIL() << "a 5-value vector was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(pooled vector)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sd::models
