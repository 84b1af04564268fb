// upscale: resize of [W, H, C, N] images in W and H (tensor/ops/upscale.cpp), params[0] the
// mode. Each mode's source coordinate is a ratio of integers, split here by integer
// division into a pixel and a fraction: exact where the reference's double arithmetic
// is, and no floor lands on the wrong pixel through rounding.
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;

const int NEAREST = 0, BILINEAR = 1, BILINEAR_ALIGN_CORNERS = 2;

struct Sample {
  uint lo, hi;  // the neighbouring source pixels
  float frac;   // weight of hi
};

// The backend checks that 2 * out * in fits 32 bits.
Sample source_coord(int mode, uint dst, uint in_len, uint out_len) {
  uint num = 0, den = 1;
  if (mode == NEAREST) {
    num = dst * in_len;
    den = out_len;
  } else if (mode == BILINEAR) {
    // (dst + 0.5) * in / out - 0.5, clamped at 0 (PyTorch's half-pixel centers).
    const uint centre = (2 * dst + 1) * in_len;
    num = centre > out_len ? centre - out_len : 0;
    den = 2 * out_len;
  } else if (out_len > 1) {
    // BILINEAR_ALIGN_CORNERS: dst * (in - 1) / (out - 1); a single output reads pixel 0.
    num = dst * (in_len - 1);
    den = out_len - 1;
  }
  Sample s;
  s.lo = min(num / den, in_len - 1);
  s.hi = min(s.lo + 1, in_len - 1);
  s.frac = mode == NEAREST ? 0.0 : float(num % den) / float(den);
  return s;
}

void main() {
  const int mode = param_i(0);
  FOR_EACH_OUTPUT(idx) {
    const uvec4 i = t_unravel(0, idx);
    const Sample x = source_coord(mode, i.x, t_ne(1, 0), t_ne(0, 0));
    const Sample y = source_coord(mode, i.y, t_ne(1, 1), t_ne(0, 1));
    if (mode == NEAREST) {
      store(i, load(1, uvec4(x.lo, y.lo, i.z, i.w)));
      continue;
    }
    const float top = (1.0 - x.frac) * load(1, uvec4(x.lo, y.lo, i.z, i.w)) +
                      x.frac * load(1, uvec4(x.hi, y.lo, i.z, i.w));
    const float bottom = (1.0 - x.frac) * load(1, uvec4(x.lo, y.hi, i.z, i.w)) +
                         x.frac * load(1, uvec4(x.hi, y.hi, i.z, i.w));
    store(i, (1.0 - y.frac) * top + y.frac * bottom);
  }
}
