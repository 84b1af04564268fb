#include "models/wan22_shortcuts.h"

#include "tensor/error.h"
#include "tensor/ops/concat.h"
#include "tensor/ops/pad.h"
#include "tensor/ops/reduce.h"
#include "tensor/ops/view.h"

namespace sd::models {

Tensor* fold_frames(Context& ctx, Tensor* x, int64_t f) {
  if (f == 1) return x;
  const int64_t w = x->ne[0], h = x->ne[1], c = x->ne[2], t = x->ne[3] / f;
  Tensor* y = cont(ctx, permute(ctx, reshape(ctx, x, {w * h, c, f, t}), {0, 2, 1, 3}));
  return reshape(ctx, y, {w, h, c * f, t});
}
Tensor* unfold_frames(Context& ctx, Tensor* x, int64_t f) {
  if (f == 1) return x;
  const int64_t w = x->ne[0], h = x->ne[1], c = x->ne[2] / f, t = x->ne[3];
  Tensor* y = cont(ctx, permute(ctx, reshape(ctx, x, {w * h, f, c, t}), {0, 2, 1, 3}));
  return reshape(ctx, y, {w, h, c, t * f});
}

Tensor* space_to_depth(Context& ctx, Tensor* x, int64_t s, bool row_major) {
  const int64_t w = x->ne[0] / s, h = x->ne[1] / s, rest = x->ne[2] * x->ne[3];
  Tensor* t = cont(ctx, permute(ctx, reshape(ctx, x, {s * w, s, h, rest}), {0, 2, 1, 3}));
  t = cont(ctx, permute(ctx, reshape(ctx, t, {s, w, h, s * rest}), {1, 2, 0, 3}));
  // [w, h, dx, (dy, c, t)]
  if (!row_major) t = cont(ctx, permute(ctx, reshape(ctx, t, {w * h, s, s, rest}), {0, 2, 1, 3}));
  return reshape(ctx, t, {w, h, s * s * x->ne[2], x->ne[3]});
}
Tensor* depth_to_space(Context& ctx, Tensor* x, int64_t s, bool row_major) {
  const int64_t w = x->ne[0], h = x->ne[1], c = x->ne[2] / (s * s), rest = c * x->ne[3];
  Tensor* t = x;
  if (!row_major) t = cont(ctx, permute(ctx, reshape(ctx, t, {w * h, s, s, rest}), {0, 2, 1, 3}));
  // [w, h, dx, (dy, c, t)] -> [dx, w, h, (dy, c, t)] -> [X, h, dy, rest] -> [X, dy, h, rest]
  t = cont(ctx, permute(ctx, reshape(ctx, t, {w, h, s, s * rest}), {2, 0, 1, 3}));
  t = cont(ctx, permute(ctx, reshape(ctx, t, {s * w, h, s, rest}), {0, 2, 1, 3}));
  return reshape(ctx, t, {s * w, s * h, c, x->ne[3]});
}

Tensor* average_down(Context& ctx, Tensor* x, int64_t out, int64_t ft, int64_t fs) {
  const int64_t extra = (ft - x->ne[3] % ft) % ft;
  if (extra > 0) x = pad(ctx, x, {0, 0, 0, 0, 0, 0, static_cast<int>(extra), 0});
  x = fold_frames(ctx, x, ft);
  if (fs > 1) x = space_to_depth(ctx, x, fs, true);
  const int64_t group = x->ne[2] / out;
  SD_CHECK(group * out == x->ne[2], "[wan vae] %lld channels do not average into %lld",
           static_cast<long long>(x->ne[2]), static_cast<long long>(out));
  const int64_t w = x->ne[0], h = x->ne[1], t = x->ne[3];
  Tensor* m = mean(ctx, reshape(ctx, x, {w * h, group, out, t}), 1);
  return reshape(ctx, m, {w, h, out, t});
}

Tensor* duplicate_up(Context& ctx, Tensor* x, int64_t out, int64_t ft, int64_t fs, bool first) {
  const int64_t w = x->ne[0], h = x->ne[1], in = x->ne[2], t = x->ne[3];
  const int64_t repeats = out * ft * fs * fs / in;
  SD_CHECK(repeats * in == out * ft * fs * fs && repeats >= 1,
           "[wan vae] %lld channels do not spread over %lld", static_cast<long long>(in),
           static_cast<long long>(out));
  Tensor* one = reshape(ctx, x, {w * h, 1, in, t});
  Tensor* r = one;
  for (int64_t i = 1; i < repeats; ++i) r = concat(ctx, r, one, 1);
  r = reshape(ctx, cont(ctx, r), {w, h, in * repeats, t});
  if (fs > 1) r = depth_to_space(ctx, r, fs, true);
  r = unfold_frames(ctx, r, ft);
  if (first && ft > 1) r = cont(ctx, slice(ctx, r, 3, ft - 1, r->ne[3]));
  return r;
}

}  // namespace sd::models
