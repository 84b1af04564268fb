// LayerNorm and RmsNorm (tensor/ops/norm.cpp): each row normalized over ne[0], then the
// optional affine weight (and, for LayerNorm, bias) [ne0]. RmsNorm is LayerNorm without
// centering: its "variance" is the mean square. One workgroup per row, two passes.
#version 450
#include "common.glsl"
#include "workgroup_reduce.glsl"

// node_extra() bits.
const uint HAS_WEIGHT = 1u, HAS_BIAS = 2u, CENTERED = 4u;

void main() {
  const uint n = t_ne(1, 0), ne1 = t_ne(1, 1), ne2 = t_ne(1, 2);
  const uint rows = ne1 * ne2 * t_ne(1, 3);
  const float eps = param_f(0);
  const bool has_weight = (node_extra() & HAS_WEIGHT) != 0u;
  const bool has_bias = (node_extra() & HAS_BIAS) != 0u;
  const bool centered = (node_extra() & CENTERED) != 0u;
  const uint t = gl_LocalInvocationID.x;

  for (uint row = gl_WorkGroupID.x; row < rows; row += gl_NumWorkGroups.x) {
    const uvec3 r = uvec3(row % ne1, (row / ne1) % ne2, row / (ne1 * ne2));

    float mean = 0.0;
    if (centered) {
      vec2 total = vec2(0.0);
      for (uint i0 = t; i0 < n; i0 += WG_SIZE) total = csum_add(total, load(1, uvec4(i0, r)));
      mean = workgroup_sum(total) / float(n);
    }

    vec2 squares = vec2(0.0);
    for (uint i0 = t; i0 < n; i0 += WG_SIZE) {
      const float d = load(1, uvec4(i0, r)) - mean;
      squares = csum_add(squares, d * d);
    }
    const float inv_std = 1.0 / sqrt(workgroup_sum(squares) / float(n) + eps);

    for (uint i0 = t; i0 < n; i0 += WG_SIZE) {
      const uvec4 i = uvec4(i0, r);
      float v = (load(1, i) - mean) * inv_std;
      if (has_weight) v *= load_vector(2, i0);
      if (has_bias) v += load_vector(3, i0);
      store(i, v);
    }
  }
}
