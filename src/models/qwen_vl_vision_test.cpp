#include "models/qwen_vl_vision.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "nn/graph_runner.h"
#include "nn/param_recorder.h"
#include "nn/random_weights.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::models {
namespace {

using Values = std::vector<float>;

QwenVisionConfig tiny_config() {
  QwenVisionConfig c;
  c.hidden = 64;  // 16 heads of 4
  c.intermediate = 48;
  c.layers = 2;
  c.out_hidden = 24;
  c.full_attention_blocks = {1};
  return c;
}

TEST(QwenVision, ImagesAreSizedAsTheReferenceSizesEditReferences) {
  const QwenVisionConfig c;
  const int64_t lo = 384 * 384, hi = 560 * 560;
  using Size = std::pair<int64_t, int64_t>;
  EXPECT_EQ(qwen_vision_size(c, 128, 128, lo, hi), Size(392, 392));    // scaled up
  EXPECT_EQ(qwen_vision_size(c, 160, 96, lo, hi), Size(504, 308));     // keeping the aspect
  EXPECT_EQ(qwen_vision_size(c, 500, 400, lo, hi), Size(504, 392));    // rounded only
  EXPECT_EQ(qwen_vision_size(c, 1920, 1080, lo, hi), Size(728, 392));  // scaled down
  EXPECT_EQ(qwen_vision_size(c, 3000, 20, lo, hi), Size(4704, 56));    // never a zero side
}

TEST(QwenVision, TokensAreComputedWindowByWindow) {
  const QwenVisionConfig c;  // 112-pixel windows: 4x4 groups of 2x2 patches
  const QwenVisionLayout l = qwen_vision_layout(c, 504, 308);  // 18x11 groups
  EXPECT_EQ(l.grid_w, 36);
  EXPECT_EQ(l.grid_h, 22);
  ASSERT_EQ(l.groups(), 18 * 11);
  std::vector<int32_t> sorted = l.order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int32_t> all(sorted.size());
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(sorted, all) << "every group exactly once";
  // The first window is the top-left 4x4 groups, row by row; the windows of the last
  // column are 2 groups wide and those of the last row 3 high.
  EXPECT_EQ(std::vector<int32_t>(l.order.begin(), l.order.begin() + 5),
            (std::vector<int32_t>{0, 1, 2, 3, 18}));
  ASSERT_EQ(l.window_patches.size(), 5u * 3u);
  EXPECT_EQ(l.window_patches.front(), 64);
  EXPECT_EQ(l.window_patches[4], 4 * 2 * 4);
  EXPECT_EQ(l.window_patches.back(), 3 * 2 * 4);
  EXPECT_EQ(std::accumulate(l.window_patches.begin(), l.window_patches.end(), int64_t{0}),
            l.patches());
  EXPECT_THROW(qwen_vision_layout(c, 500, 308), Error);  // not a multiple of 28
}

TEST(QwenVision, InputsFollowTheLayout) {
  const QwenVisionConfig c;
  const QwenVisionLayout l = qwen_vision_layout(c, 140, 56);  // 5x2 groups: windows 4 and 1 wide
  const int64_t w = 140, h = 56, p = c.patch, n = l.patches();
  Values pixels(static_cast<size_t>(w * h * 3));
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<float>(i % 977);
  const QwenVisionInputs in = qwen_vision_inputs(c, l, pixels);
  ASSERT_EQ(in.patches.size(), static_cast<size_t>(3 * p * p * n));
  // Token 1 is patch (row 0, column 1); token 2 is (1, 0): a group's 2x2 patches in a row.
  auto pixel = [&](int64_t ch, int64_t y, int64_t x) {
    return pixels[static_cast<size_t>((ch * h + y) * w + x)];
  };
  EXPECT_EQ(in.patches[static_cast<size_t>(1 * 3 * p * p + (2 * p + 5) * p + 7)],
            pixel(2, 5, p + 7));
  EXPECT_EQ(in.patches[static_cast<size_t>(2 * 3 * p * p + 3)], pixel(0, p, 3));
  // Column 4's two groups are the second window's, computed after the first eight.
  EXPECT_EQ(l.order, (std::vector<int32_t>{0, 1, 2, 3, 5, 6, 7, 8, 4, 9}));
  EXPECT_EQ(l.window_patches, (std::vector<int64_t>{32, 8}));
  // Rotary angles: token 3 is patch (1, 1); the first half of the frequencies turn by the
  // row, the second by the column.
  const int64_t half = c.head_dim() / 2;
  EXPECT_FLOAT_EQ(in.cos[0], 1.0f);
  EXPECT_FLOAT_EQ(in.sin[static_cast<size_t>(3 * half)], std::sin(1.0f));
  EXPECT_FLOAT_EQ(in.sin[static_cast<size_t>(3 * half + half / 2)], std::sin(1.0f));
  // Block-diagonal mask over the windows.
  auto mask = [&](int64_t q, int64_t k) { return in.window_mask[static_cast<size_t>(q * n + k)]; };
  EXPECT_EQ(mask(0, 31), 0.0f);
  EXPECT_EQ(mask(32, 39), 0.0f);
  EXPECT_TRUE(std::isinf(mask(31, 32)));
  EXPECT_TRUE(std::isinf(mask(39, 0)));
}

TEST(QwenVision, TheConfigComesFromTheFile) {
  nn::RandomWeights w(DType::F32, 2);
  nn::ParamRecorder recorder(w);
  Context ctx;
  QwenVisionConfig c = tiny_config();
  c.split_patch_embed = true;
  const int64_t n = 4, half = c.head_dim() / 2;
  qwen_vision_forward(nn::Scope(ctx, recorder, "visual."), c,
                      ctx.new_tensor(DType::F32, {3 * c.patch * c.patch, n}),
                      ctx.new_tensor(DType::F32, {half, n}), ctx.new_tensor(DType::F32, {half, n}),
                      ctx.new_tensor(DType::F32, {n, n}));
  std::map<std::string, std::array<int64_t, 4>> shapes;
  for (const nn::ParamDecl& d : recorder.params())
    shapes[d.name] = {d.ne[0], d.ne[1], d.ne[2], d.ne[3]};
  auto shape_of = [&](const std::string& name) -> std::optional<std::array<int64_t, 4>> {
    const auto it = shapes.find(name);
    if (it == shapes.end()) return std::nullopt;
    return it->second;
  };
  const std::optional<QwenVisionConfig> read = qwen_vision_config_from_shapes("visual.", shape_of);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->hidden, 64);
  EXPECT_EQ(read->intermediate, 48);
  EXPECT_EQ(read->layers, 2);
  EXPECT_EQ(read->out_hidden, 24);
  EXPECT_TRUE(read->split_patch_embed);
  EXPECT_FALSE(qwen_vision_config_from_shapes("elsewhere.", shape_of).has_value());
  shapes.erase("visual.blocks.0.mlp.gate_proj.weight");
  EXPECT_THROW(qwen_vision_config_from_shapes("visual.", shape_of), Error);
}

// Hugging Face's 3-D patch kernel and llama.cpp's two 2-D kernels are the same weights: the
// tower gives the same tokens from either.
TEST(QwenVision, BothPatchKernelLayoutsGiveTheSameTokens) {
  QwenVisionConfig split = tiny_config();
  split.split_patch_embed = true;
  QwenVisionConfig fused = split;
  fused.split_patch_embed = false;
  const QwenVisionLayout l = qwen_vision_layout(split, 140, 56);
  Values pixels(static_cast<size_t>(140 * 56 * 3));
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = std::sin(0.37f * static_cast<float>(i));
  const QwenVisionInputs in = qwen_vision_inputs(split, l, pixels);
  const int64_t n = l.patches(), half = split.head_dim() / 2, p = split.patch;
  auto run = [&](nn::Weights& w, const QwenVisionConfig& c) {
    nn::GraphRunner runner(cpu_backend());
    nn::GraphCall call;
    Tensor* x = call.input_f32("x", make_shape({3 * p * p, n}), in.patches.data());
    Tensor* cos = call.input_f32("cos", make_shape({half, n}), in.cos.data());
    Tensor* sin = call.input_f32("sin", make_shape({half, n}), in.sin.data());
    Tensor* mask = call.input_f32("mask", make_shape({n, n}), in.window_mask.data());
    return runner.run(call,
                      qwen_vision_forward(nn::Scope(call.ctx(), w, ""), c, x, cos, sin, mask));
  };
  nn::RandomWeights two(DType::F32, 9);
  const Values want = run(two, split);
  ASSERT_EQ(want.size(), static_cast<size_t>(split.out_hidden * l.groups()));

  // [out, in, t, p, p] folded to [p, p, t, in * out]: frame t of (o, c) from kernel t.
  nn::RandomWeights one(DType::F32, 9);
  const Values k0 = two.values("patch_embed.proj.0.weight"),
               k1 = two.values("patch_embed.proj.1.weight");
  Values kernel(static_cast<size_t>(2 * 3 * p * p * split.hidden));
  for (int64_t oc = 0; oc < 3 * split.hidden; ++oc)
    for (int64_t t = 0; t < 2; ++t)
      std::copy_n((t == 0 ? k0 : k1).begin() + oc * p * p, p * p,
                  kernel.begin() + (oc * 2 + t) * p * p);
  one.set("patch_embed.proj.weight", make_shape({p, p, 2, 3 * split.hidden}), kernel);
  const Values got = run(one, fused);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4f) << i;
}

}  // namespace
}  // namespace sd::models
