#include "models/clip_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "backend/registry.h"
#include "nn/graph_runner.h"
#include "nn/random_weights.h"
#include "tensor/error.h"
#include "tensor/ops/unary.h"
#include "test_support.h"

namespace sd::models {
namespace {

const char* const kClipTextPrefix = "cond_stage_model.transformer.text_model.";

using sd::test::cpu_backend;

ClipTextConfig tiny_config(ClipActivation act = ClipActivation::QuickGelu) {
  ClipTextConfig c;
  c.vocab_size = 50;
  c.hidden = 8;
  c.intermediate = 16;
  c.heads = 2;
  c.layers = 3;
  c.activation = act;
  return c;
}

std::vector<int32_t> some_ids(int n_batch, int vocab, int seed) {
  std::vector<int32_t> ids(77 * static_cast<size_t>(n_batch));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7 + seed) % vocab);
  return ids;
}

std::vector<float> run_encoder(nn::RandomWeights& w, const ClipTextConfig& c,
                               const std::vector<int32_t>& ids, int clip_skip,
                               const std::vector<float>* custom = nullptr) {
  nn::GraphRunner runner(cpu_backend());
  nn::GraphCall call;
  const int64_t n = static_cast<int64_t>(ids.size()) / 77;
  const std::vector<float> mask = clip_causal_mask(77);
  Tensor* t_ids = call.input("ids", DType::I32, make_shape({77, n}), ids.data());
  Tensor* t_mask = call.input_f32("mask", make_shape({77, 77}), mask.data());
  Tensor* t_custom = nullptr;
  if (custom)
    t_custom = call.input_f32(
        "custom", make_shape({c.hidden, static_cast<int64_t>(custom->size()) / c.hidden}),
        custom->data());
  nn::Scope scope(call.ctx(), w, kClipTextPrefix);
  return runner.run(call, clip_text_forward(scope, c, t_ids, t_mask, clip_skip, t_custom));
}

// The text transformer written out with loops over the same weights.
struct ReferenceClip {
  nn::RandomWeights& w;
  const ClipTextConfig& c;

  std::vector<float> p(const std::string& name) { return w.values(kClipTextPrefix + name); }

  // x [L][in] -> [L][out]; weight [out][in] row-major as stored ([in, out] engine order).
  std::vector<float> linear(const std::string& name, const std::vector<float>& x, int64_t in,
                            int64_t out) {
    const std::vector<float> wt = p(name + ".weight"), b = p(name + ".bias");
    const int64_t len = static_cast<int64_t>(x.size()) / in;
    std::vector<float> y(static_cast<size_t>(len * out));
    for (int64_t t = 0; t < len; ++t)
      for (int64_t o = 0; o < out; ++o) {
        double acc = b[o];
        for (int64_t i = 0; i < in; ++i) acc += double(wt[o * in + i]) * x[t * in + i];
        y[t * out + o] = static_cast<float>(acc);
      }
    return y;
  }

  std::vector<float> layer_norm(const std::string& name, std::vector<float> x) {
    const std::vector<float> g = p(name + ".weight"), b = p(name + ".bias");
    const int64_t d = c.hidden;
    for (size_t t = 0; t < x.size() / d; ++t) {
      double mean = 0, var = 0;
      for (int64_t i = 0; i < d; ++i) mean += x[t * d + i];
      mean /= d;
      for (int64_t i = 0; i < d; ++i) var += (x[t * d + i] - mean) * (x[t * d + i] - mean);
      var /= d;
      for (int64_t i = 0; i < d; ++i)
        x[t * d + i] = static_cast<float>(
            (x[t * d + i] - mean) / std::sqrt(var + c.layer_norm_eps) * g[i] + b[i]);
    }
    return x;
  }

  std::vector<float> forward(const std::vector<int32_t>& ids, int layers_to_run,
                             const std::vector<float>& custom = {}) {
    const int64_t d = c.hidden, L = 77, hd = d / c.heads;
    const std::vector<float> tok = p("embeddings.token_embedding.weight");
    const std::vector<float> pos = p("embeddings.position_embedding.weight");
    std::vector<float> x(static_cast<size_t>(L * d));
    for (int64_t t = 0; t < L; ++t)
      for (int64_t i = 0; i < d; ++i) {
        const int id = ids[t];
        const float e = id < c.vocab_size ? tok[id * d + i] : custom[(id - c.vocab_size) * d + i];
        x[t * d + i] = e + pos[t * d + i];
      }
    for (int l = 0; l < layers_to_run; ++l) {
      const std::string s = "encoder.layers." + std::to_string(l) + ".";
      std::vector<float> h = layer_norm(s + "layer_norm1", x);
      const std::vector<float> q = linear(s + "self_attn.q_proj", h, d, d);
      const std::vector<float> k = linear(s + "self_attn.k_proj", h, d, d);
      const std::vector<float> v = linear(s + "self_attn.v_proj", h, d, d);
      std::vector<float> a(x.size());
      for (int64_t head = 0; head < c.heads; ++head)
        for (int64_t qi = 0; qi < L; ++qi) {
          std::vector<double> score(static_cast<size_t>(qi + 1));  // causal: keys <= query
          double mx = -1e300, sum = 0;
          for (int64_t ki = 0; ki <= qi; ++ki) {
            double dot = 0;
            for (int64_t j = 0; j < hd; ++j)
              dot += double(q[qi * d + head * hd + j]) * k[ki * d + head * hd + j];
            score[ki] = dot / std::sqrt(double(hd));
            mx = std::max(mx, score[ki]);
          }
          for (double& s2 : score) sum += (s2 = std::exp(s2 - mx));
          for (int64_t j = 0; j < hd; ++j) {
            double acc = 0;
            for (int64_t ki = 0; ki <= qi; ++ki) acc += score[ki] / sum * v[ki * d + head * hd + j];
            a[qi * d + head * hd + j] = static_cast<float>(acc);
          }
        }
      a = linear(s + "self_attn.out_proj", a, d, d);
      for (size_t i = 0; i < x.size(); ++i) x[i] += a[i];
      h = layer_norm(s + "layer_norm2", x);
      h = linear(s + "mlp.fc1", h, d, c.intermediate);
      const UnaryOp op = c.activation == ClipActivation::Gelu ? UnaryOp::Gelu : UnaryOp::GeluQuick;
      for (float& f : h) f = unary_reference_value(op, f, 0.0f);
      h = linear(s + "mlp.fc2", h, c.intermediate, d);
      for (size_t i = 0; i < x.size(); ++i) x[i] += h[i];
    }
    return layer_norm("final_layer_norm", x);
  }
};

TEST(ClipText, MatchesALoopImplementation) {
  for (ClipActivation act : {ClipActivation::QuickGelu, ClipActivation::Gelu}) {
    const ClipTextConfig c = tiny_config(act);
    nn::RandomWeights w;
    const std::vector<int32_t> ids = some_ids(1, 50, 3);
    const std::vector<float> out = run_encoder(w, c, ids, 1);
    ASSERT_EQ(out.size(), 77u * 8u);
    const std::vector<float> want = ReferenceClip{w, c}.forward(ids, 3);
    EXPECT_LE(test::max_scaled_error(out, want, 1e-4, 1e-3), 1.0);
  }
}

TEST(ClipText, ClipSkipTakesAnEarlierLayerAndNeverReadsTheLaterOnes) {
  const ClipTextConfig c = tiny_config();
  nn::RandomWeights w;
  const std::vector<int32_t> ids = some_ids(1, 50, 5);
  const std::vector<float> out = run_encoder(w, c, ids, 2);
  for (const std::string& name : w.names())
    EXPECT_EQ(name.find("layers.2."), std::string::npos) << name << " was requested";
  EXPECT_LE(test::max_scaled_error(out, ReferenceClip{w, c}.forward(ids, 2), 1e-4, 1e-3), 1.0);
  // 0 and negative values take the default (1 here): all layers.
  const std::vector<float> all = run_encoder(w, c, ids, 0);
  EXPECT_LE(test::max_scaled_error(all, ReferenceClip{w, c}.forward(ids, 3), 1e-4, 1e-3), 1.0);
  EXPECT_THROW(run_encoder(w, c, ids, 4), Error);
}

TEST(ClipText, AttentionIsCausal) {
  const ClipTextConfig c = tiny_config();
  nn::RandomWeights w;
  std::vector<int32_t> ids = some_ids(1, 50, 1);
  const std::vector<float> a = run_encoder(w, c, ids, 1);
  ids[40] = (ids[40] + 1) % 50;
  const std::vector<float> b = run_encoder(w, c, ids, 1);
  for (int t = 0; t < 77; ++t) {
    bool same = true;
    for (int i = 0; i < 8; ++i) same = same && a[t * 8 + i] == b[t * 8 + i];
    EXPECT_EQ(same, t < 40) << "token " << t;
  }
}

TEST(ClipText, BatchesAreIndependent) {
  const ClipTextConfig c = tiny_config();
  nn::RandomWeights w;
  const std::vector<int32_t> first = some_ids(1, 50, 2), second = some_ids(1, 50, 9);
  std::vector<int32_t> both = first;
  both.insert(both.end(), second.begin(), second.end());
  const std::vector<float> out = run_encoder(w, c, both, 1);
  const std::vector<float> a = run_encoder(w, c, first, 1), b = run_encoder(w, c, second, 1);
  ASSERT_EQ(out.size(), 2 * a.size());
  EXPECT_LE(test::max_scaled_error({out.begin(), out.begin() + a.size()}, a, 1e-5, 1e-5), 1.0);
  EXPECT_LE(test::max_scaled_error({out.begin() + a.size(), out.end()}, b, 1e-5, 1e-5), 1.0);
}

TEST(ClipText, CustomEmbeddingRowsFollowTheTokenTable) {
  const ClipTextConfig c = tiny_config();
  nn::RandomWeights w(DType::F16);  // the table's dtype differs from the custom rows'
  std::vector<int32_t> ids = some_ids(1, 50, 4);
  run_encoder(w, c, ids, 1);  // creates the weights
  // Custom row 1 is a copy of token 7's row (as f16 values: exact in f32).
  const std::vector<float> table =
      w.values(std::string(kClipTextPrefix) + "embeddings.token_embedding.weight");
  std::vector<float> custom(2 * 8, 0.25f);
  for (int i = 0; i < 8; ++i) custom[8 + i] = table[7 * 8 + i];
  ids[5] = 7;
  const std::vector<float> plain = run_encoder(w, c, ids, 1, &custom);
  ids[5] = 51;  // vocab_size + 1
  const std::vector<float> via_custom = run_encoder(w, c, ids, 1, &custom);
  EXPECT_EQ(plain, via_custom);
  ids[5] = 50;  // the other row changes the result
  EXPECT_NE(run_encoder(w, c, ids, 1, &custom), plain);
}

TEST(ClipText, CausalMaskHidesLaterKeys) {
  const std::vector<float> m = clip_causal_mask(3);
  // Row = query, column = key (fastest).
  EXPECT_EQ(m[0 * 3 + 0], 0.0f);
  EXPECT_TRUE(std::isinf(m[0 * 3 + 1]) && m[0 * 3 + 1] < 0);
  EXPECT_EQ(m[2 * 3 + 1], 0.0f);
  EXPECT_TRUE(std::isinf(m[1 * 3 + 2]));
}

// Records the parameters a graph asks for, without data: full-size configs build cheaply.
class ParamRecorder final : public nn::Weights {
 public:
  Tensor* get(Context& ctx, const std::string& name, const Shape& ne) override {
    shapes[name] = ne;
    Tensor* t = ctx.new_tensor(DType::F16, ne, name);
    t->flags |= kFlagParam;
    return t;
  }
  bool contains(const std::string&) const override { return true; }
  std::map<std::string, Shape> shapes;
};

std::map<std::string, Shape> params_of(const ClipTextConfig& c, int clip_skip) {
  ParamRecorder rec;
  Context ctx;
  Tensor* ids = ctx.new_tensor(DType::I32, {77, 1});
  Tensor* mask = ctx.new_tensor(DType::F32, {77, 77});
  Tensor* out = clip_text_forward(nn::Scope(ctx, rec, kClipTextPrefix), c, ids, mask, clip_skip);
  EXPECT_EQ(out->ne[0], c.hidden);
  EXPECT_EQ(out->ne[1], 77);
  return rec.shapes;
}

TEST(ClipText, VitL14AsksForTheCheckpointsTensors) {
  const std::map<std::string, Shape> p = params_of(ClipTextConfig::vit_l14(), 0);
  EXPECT_EQ(p.size(), 2u + 12u * 16u + 2u);
  const std::string pre = kClipTextPrefix;
  EXPECT_EQ(p.at(pre + "embeddings.token_embedding.weight"), make_shape({768, 49408}));
  EXPECT_EQ(p.at(pre + "embeddings.position_embedding.weight"), make_shape({768, 77}));
  EXPECT_EQ(p.at(pre + "encoder.layers.11.self_attn.q_proj.weight"), make_shape({768, 768}));
  EXPECT_EQ(p.at(pre + "encoder.layers.11.self_attn.out_proj.bias"), make_shape({768}));
  EXPECT_EQ(p.at(pre + "encoder.layers.0.mlp.fc1.weight"), make_shape({768, 3072}));
  EXPECT_EQ(p.at(pre + "encoder.layers.0.mlp.fc2.weight"), make_shape({3072, 768}));
  EXPECT_EQ(p.at(pre + "encoder.layers.5.layer_norm2.weight"), make_shape({768}));
  EXPECT_EQ(p.at(pre + "final_layer_norm.bias"), make_shape({768}));
}

TEST(ClipText, VitH14ReadsTwentyThreeLayersByDefault) {
  const std::map<std::string, Shape> p = params_of(ClipTextConfig::vit_h14(), 0);
  EXPECT_EQ(p.size(), 2u + 23u * 16u + 2u);
  const std::string pre = kClipTextPrefix;
  EXPECT_EQ(p.count(pre + "encoder.layers.22.mlp.fc2.bias"), 1u);
  EXPECT_EQ(p.count(pre + "encoder.layers.23.mlp.fc2.bias"), 0u);
  EXPECT_EQ(p.at(pre + "encoder.layers.0.mlp.fc1.weight"), make_shape({1024, 4096}));
  EXPECT_EQ(p.at(pre + "embeddings.token_embedding.weight"), make_shape({1024, 49408}));
  // clip_skip 1 reads all 24.
  EXPECT_EQ(params_of(ClipTextConfig::vit_h14(), 1).size(), 2u + 24u * 16u + 2u);
}

}  // namespace
}  // namespace sd::models
