// pad: constant padding before and after every dim (tensor/ops/pad.cpp). params[2d] and
// params[2d + 1] are dim d's padding before and after, param_f(8) the fill value.
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;

void main() {
  const float fill = param_f(8);
  const ivec4 before = ivec4(param_i(0), param_i(2), param_i(4), param_i(6));
  const ivec4 src_ne = ivec4(t_ne(1, 0), t_ne(1, 1), t_ne(1, 2), t_ne(1, 3));
  FOR_EACH_OUTPUT(idx) {
    const uvec4 i = t_unravel(0, idx);
    const ivec4 s = ivec4(i) - before;
    float value = fill;
    if (all(greaterThanEqual(s, ivec4(0))) && all(lessThan(s, src_ne))) value = load(1, uvec4(s));
    store(i, value);
  }
}
