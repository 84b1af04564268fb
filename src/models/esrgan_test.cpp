#include "models/esrgan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "backend/cpu/cpu_device.h"
#include "backend/registry.h"
#include "nn/graph_runner.h"
#include "nn/random_weights.h"
#include "test_support.h"

namespace sd::models {
namespace {

using sd::test::cpu_backend;

EsrganConfig tiny(int blocks, int upsample, int unshuffle = 1) {
  EsrganConfig c;
  c.num_block = blocks;
  c.num_upsample = upsample;
  c.unshuffle = unshuffle;
  c.num_in_ch = 3 * unshuffle * unshuffle;
  c.num_feat = 8;
  c.num_grow_ch = 4;
  return c;
}

// Planes [W, H, C] with C = in.size() / (w * h).
using Planes = std::vector<float>;

// PyTorch's Conv2d(in, out, 3, padding=1) on planes, weight in engine order [3, 3, in, out].
Planes conv3x3(const Planes& x, int64_t w, int64_t h, int64_t in, int64_t out,
               const std::vector<float>& weight, const std::vector<float>& bias) {
  Planes y(static_cast<size_t>(w * h * out));
  for (int64_t o = 0; o < out; ++o)
    for (int64_t py = 0; py < h; ++py)
      for (int64_t px = 0; px < w; ++px) {
        double acc = bias[o];
        for (int64_t i = 0; i < in; ++i)
          for (int ky = 0; ky < 3; ++ky)
            for (int kx = 0; kx < 3; ++kx) {
              const int64_t sx = px + kx - 1, sy = py + ky - 1;
              if (sx < 0 || sy < 0 || sx >= w || sy >= h) continue;
              acc += double(weight[((o * in + i) * 3 + ky) * 3 + kx]) * x[(i * h + sy) * w + sx];
            }
        y[(o * h + py) * w + px] = static_cast<float>(acc);
      }
  return y;
}

Planes lrelu(Planes x) {
  for (float& v : x) v = v < 0 ? 0.2f * v : v;
  return x;
}

Planes axpy(const Planes& a, float s, const Planes& b) {  // a * s + b
  Planes y(a.size());
  for (size_t i = 0; i < a.size(); ++i) y[i] = a[i] * s + b[i];
  return y;
}

// rrdbnet_arch.py written out plainly, on the same weights.
struct Naive {
  nn::RandomWeights& w;
  const EsrganConfig& c;
  int64_t width, height;

  Planes conv(const std::string& name, const Planes& x, int64_t in, int64_t out) {
    return conv3x3(x, width, height, in, out, w.values(name + ".weight"), w.values(name + ".bias"));
  }
  Planes rdb(const std::string& p, const Planes& x) {
    Planes features = x;
    for (int k = 1; k <= 4; ++k) {
      Planes xk = lrelu(conv(p + ".conv" + std::to_string(k), features,
                             c.num_feat + (k - 1) * c.num_grow_ch, c.num_grow_ch));
      features.insert(features.end(), xk.begin(), xk.end());  // cat on channels
    }
    return axpy(conv(p + ".conv5", features, c.num_feat + 4 * c.num_grow_ch, c.num_feat), 0.2f, x);
  }
  Planes forward(const Planes& x) {
    Planes feat = conv("conv_first", x, c.num_in_ch, c.num_feat);
    Planes body = feat;
    for (int i = 0; i < c.num_block; ++i) {
      const std::string p = "body." + std::to_string(i);
      Planes h = rdb(p + ".rdb3", rdb(p + ".rdb2", rdb(p + ".rdb1", body)));
      body = axpy(h, 0.2f, body);
    }
    feat = axpy(conv("conv_body", body, c.num_feat, c.num_feat), 1.0f, feat);
    for (int u = 1; u <= c.num_upsample; ++u) {
      Planes up(feat.size() * 4);
      for (int64_t ch = 0; ch < c.num_feat; ++ch)
        for (int64_t y = 0; y < 2 * height; ++y)
          for (int64_t x2 = 0; x2 < 2 * width; ++x2)
            up[(ch * 2 * height + y) * 2 * width + x2] =
                feat[(ch * height + y / 2) * width + x2 / 2];
      width *= 2;
      height *= 2;
      feat = lrelu(conv("conv_up" + std::to_string(u), up, c.num_feat, c.num_feat));
    }
    return conv("conv_last", lrelu(conv("conv_hr", feat, c.num_feat, c.num_feat)), c.num_feat,
                c.num_out_ch);
  }
};

std::vector<float> run(nn::Weights& w, const EsrganConfig& c, const Planes& x, int64_t width,
                       int64_t height) {
  nn::GraphRunner runner(cpu_backend());
  nn::GraphCall call;
  Tensor* in = call.input_f32("x", make_shape({width, height, c.num_in_ch, 1}), x.data());
  return runner.run(call, rrdbnet(nn::Scope(call.ctx(), w), c, in));
}

TEST(Esrgan, ShapesAndParameterNames) {
  for (int up : {0, 1, 2}) {
    nn::RandomWeights w;
    Context ctx;
    const EsrganConfig c = tiny(2, up);
    Tensor* out = rrdbnet(nn::Scope(ctx, w), c, ctx.new_tensor(DType::F32, {5, 3, 3, 1}));
    EXPECT_EQ(out->ne, make_shape({5 << up, 3 << up, 3, 1}));
    const std::vector<std::string> names = w.names();
    const std::set<std::string> set(names.begin(), names.end());
    EXPECT_TRUE(set.count("conv_first.weight"));
    EXPECT_TRUE(set.count("body.1.rdb3.conv5.bias"));
    EXPECT_FALSE(set.count("body.2.rdb1.conv1.weight"));
    EXPECT_TRUE(set.count("conv_body.weight"));
    EXPECT_EQ(set.count("conv_up1.weight"), up >= 1 ? 1u : 0u);
    EXPECT_EQ(set.count("conv_up2.weight"), up >= 2 ? 1u : 0u);
    EXPECT_TRUE(set.count("conv_hr.bias"));
    EXPECT_TRUE(set.count("conv_last.weight"));
    // 5 convs x 3 dense blocks x 2 RRDBs, first, body, hr, last, the upsampling convs;
    // weight and bias each.
    EXPECT_EQ(names.size(), static_cast<size_t>(2 * (30 + 4 + up)));
  }
}

TEST(Esrgan, MatchesAPlainImplementation) {
  for (int up : {0, 1, 2}) {
    nn::RandomWeights w(DType::F32, 7 + up);
    const EsrganConfig c = tiny(2, up);
    const int64_t width = 6, height = 5;
    const Planes x = test::random_values(width * height * 3, 3, 0.0f, 1.0f);
    const std::vector<float> got = run(w, c, x, width, height);
    const Planes want = Naive{w, c, width, height}.forward(x);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_LE(test::max_scaled_error(got, want, 1e-4, 1e-3), 1.0) << "upsample layers " << up;
  }
}

TEST(Esrgan, PixelUnshuffleMatchesPyTorch) {
  // F.pixel_unshuffle on a 1-channel 4x2 image [[0..3], [4..7]] with r = 2 gives four
  // 2x1 planes: (i, j) = (0, 0) -> {0, 2}, (0, 1) -> {1, 3}, (1, 0) -> {4, 6}, (1, 1) -> {5, 7}.
  const std::vector<float> in = {0, 1, 2, 3, 4, 5, 6, 7};
  std::vector<float> out(8);
  pixel_unshuffle(in.data(), 4, 2, 1, 2, out.data());
  EXPECT_EQ(out, (std::vector<float>{0, 2, 1, 3, 4, 6, 5, 7}));
}

TEST(Esrgan, ScaleCountsUnshuffle) {
  EXPECT_EQ(EsrganConfig::x4plus().scale(), 4);
  EXPECT_EQ(EsrganConfig::x4plus_anime_6b().num_block, 6);
  EXPECT_EQ(tiny(1, 2, 2).scale(), 2);  // RealESRGAN_x2plus
  EXPECT_EQ(tiny(1, 2, 4).scale(), 1);
  EXPECT_EQ(tiny(1, 1).scale(), 2);
  EXPECT_EQ(tiny(1, 0).scale(), 1);
}

}  // namespace
}  // namespace sd::models
