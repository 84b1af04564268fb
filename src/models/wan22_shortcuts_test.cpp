// Wan 2.2's rearrangements against the index formulas of its reference code (diffusers'
// AvgDown3D / DupUp3D, the "b c f (h q) (w r) -> b (c r q) f h w" patches), element by
// element.
#include "models/wan22_shortcuts.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "nn/graph_runner.h"
#include "test_support.h"

namespace sd::models {
namespace {

using Values = std::vector<float>;

struct Shape4 {
  int64_t w, h, c, t;
  size_t size() const { return static_cast<size_t>(w * h * c * t); }
  size_t at(int64_t x, int64_t y, int64_t ch, int64_t f) const {
    return static_cast<size_t>(((f * c + ch) * h + y) * w + x);
  }
};

Values pattern(const Shape4& s) {
  Values v(s.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37f * static_cast<float>(i)) + 0.01f * i;
  return v;
}

// Runs op on an input of shape `in`; returns the values and the result's shape.
Values run(const Shape4& in, const Values& x, const std::function<Tensor*(Context&, Tensor*)>& op,
           Shape4* out) {
  nn::GraphRunner runner(cpu_backend());
  nn::GraphCall call;
  Tensor* t = call.input_f32("x", make_shape({in.w, in.h, in.c, in.t}), x.data());
  Tensor* y = op(call.ctx(), t);
  *out = {y->ne[0], y->ne[1], y->ne[2], y->ne[3]};
  return runner.run(call, y);
}

TEST(Wan22Shortcuts, PixelsMoveIntoChannelsInEitherOrderAndBack) {
  const Shape4 in{6, 4, 3, 2};
  const Values x = pattern(in);
  for (bool row_major : {true, false}) {
    Shape4 s;
    const Values y = run(
        in, x, [&](Context& c, Tensor* t) { return space_to_depth(c, t, 2, row_major); }, &s);
    ASSERT_EQ(s.w, 3);
    ASSERT_EQ(s.h, 2);
    ASSERT_EQ(s.c, 12);
    for (int64_t f = 0; f < in.t; ++f)
      for (int64_t ch = 0; ch < in.c; ++ch)
        for (int64_t yy = 0; yy < in.h; ++yy)
          for (int64_t xx = 0; xx < in.w; ++xx) {
            const int64_t dy = yy % 2, dx = xx % 2;
            const int64_t k = row_major ? (ch * 2 + dy) * 2 + dx : (ch * 2 + dx) * 2 + dy;
            ASSERT_EQ(y[s.at(xx / 2, yy / 2, k, f)], x[in.at(xx, yy, ch, f)])
                << row_major << " " << xx << "," << yy << "," << ch << "," << f;
          }
    Shape4 back;
    EXPECT_EQ(
        run(
            s, y, [&](Context& c, Tensor* t) { return depth_to_space(c, t, 2, row_major); }, &back),
        x);
  }
}

TEST(Wan22Shortcuts, FramesMoveIntoChannelsAndBack) {
  const Shape4 in{2, 2, 3, 4};
  const Values x = pattern(in);
  Shape4 s;
  const Values y = run(
      in, x, [](Context& c, Tensor* t) { return fold_frames(c, t, 2); }, &s);
  ASSERT_EQ(s.c, 6);
  ASSERT_EQ(s.t, 2);
  for (int64_t f = 0; f < in.t; ++f)
    for (int64_t ch = 0; ch < in.c; ++ch)
      for (int64_t i = 0; i < 4; ++i)
        ASSERT_EQ(y[s.at(i % 2, i / 2, ch * 2 + f % 2, f / 2)], x[in.at(i % 2, i / 2, ch, f)]);
  Shape4 back;
  EXPECT_EQ(run(
                s, y, [](Context& c, Tensor* t) { return unfold_frames(c, t, 2); }, &back),
            x);
}

// AvgDown3D: out[o, t, y, x] = mean over g of folded[o * G + g], folded channel
// ((c * ft + a) * fs + dy) * fs + dx from x[c, t * ft + a - pad, y * fs + dy, x * fs + dx].
TEST(Wan22Shortcuts, AverageDownMatchesTheReferenceFormula) {
  for (int64_t frames : {1, 4}) {  // a clip's first frame (padded) and a chunk of four
    const Shape4 in{4, 4, 4, frames};
    const Values x = pattern(in);
    const int64_t out = 8, ft = 2, fs = 2, group = in.c * ft * fs * fs / out;
    const int64_t pad = (ft - frames % ft) % ft;
    Shape4 s;
    const Values y = run(
        in, x, [&](Context& c, Tensor* t) { return average_down(c, t, out, ft, fs); }, &s);
    ASSERT_EQ(s.w, 2);
    ASSERT_EQ(s.c, out);
    ASSERT_EQ(s.t, (frames + pad) / ft);
    for (int64_t t = 0; t < s.t; ++t)
      for (int64_t o = 0; o < out; ++o)
        for (int64_t yy = 0; yy < s.h; ++yy)
          for (int64_t xx = 0; xx < s.w; ++xx) {
            double sum = 0;
            for (int64_t g = 0; g < group; ++g) {
              const int64_t k = o * group + g;
              const int64_t dx = k % fs, dy = k / fs % fs, a = k / (fs * fs) % ft,
                            c = k / (fs * fs * ft);
              const int64_t f = t * ft + a - pad;
              if (f >= 0) sum += x[in.at(xx * fs + dx, yy * fs + dy, c, f)];
            }
            EXPECT_NEAR(y[s.at(xx, yy, o, t)], sum / group, 1e-5) << o << " " << t;
          }
  }
}

// DupUp3D: out[o, t * ft + a, y * fs + dy, x * fs + dx] = x[k / R, t, y, x] with
// k = ((o * ft + a) * fs + dy) * fs + dx; a clip's first frame keeps frame ft - 1 only.
TEST(Wan22Shortcuts, DuplicateUpMatchesTheReferenceFormula) {
  for (bool first : {false, true}) {
    for (int64_t in_channels : {8, 16}) {  // 8 -> 8 repeats 8 times, 16 -> 8 four times
      const Shape4 in{2, 3, in_channels, 1};
      const Values x = pattern(in);
      const int64_t out = 8, ft = 2, fs = 2, repeats = out * ft * fs * fs / in_channels;
      Shape4 s;
      const Values y = run(
          in, x, [&](Context& c, Tensor* t) { return duplicate_up(c, t, out, ft, fs, first); }, &s);
      ASSERT_EQ(s.w, 4);
      ASSERT_EQ(s.h, 6);
      ASSERT_EQ(s.c, out);
      ASSERT_EQ(s.t, first ? 1 : 2);
      for (int64_t f = 0; f < s.t; ++f)
        for (int64_t o = 0; o < out; ++o)
          for (int64_t yy = 0; yy < s.h; ++yy)
            for (int64_t xx = 0; xx < s.w; ++xx) {
              const int64_t a = first ? ft - 1 : f % ft;
              const int64_t k = ((o * ft + a) * fs + yy % fs) * fs + xx % fs;
              ASSERT_EQ(y[s.at(xx, yy, o, f)], x[in.at(xx / fs, yy / fs, k / repeats, 0)])
                  << first << " " << in_channels << " " << o;
            }
    }
  }
}

}  // namespace
}  // namespace sd::models
