// Softmax over ne[0] of a * scale + mask (tensor/ops/softmax.cpp), the mask broadcast over
// a. A row whose every entry is -inf gives zeros. One workgroup per row: the row maximum,
// then exp(v - max) written to the output and summed, then the output divided by the sum.
#version 450
#include "common.glsl"
#include "workgroup_reduce.glsl"

const uint HAS_MASK = 1u;  // node_extra() bit

float scaled_score(uvec4 i, float scale, bool has_mask) {
  float v = load(1, i) * scale;
  if (has_mask) v += load(2, t_bcast(2, i));
  return v;
}

void main() {
  const uint n = t_ne(1, 0), ne1 = t_ne(1, 1), ne2 = t_ne(1, 2);
  const uint rows = ne1 * ne2 * t_ne(1, 3);
  const float scale = param_f(0);
  const bool has_mask = (node_extra() & HAS_MASK) != 0u;
  const float neg_inf = uintBitsToFloat(0xff800000u);
  const uint t = gl_LocalInvocationID.x;

  for (uint row = gl_WorkGroupID.x; row < rows; row += gl_NumWorkGroups.x) {
    const uvec3 r = uvec3(row % ne1, (row / ne1) % ne2, row / (ne1 * ne2));

    // x: the maximum; y: 1 where some entry is not -inf (NaN counts: it must propagate).
    vec2 partial = vec2(neg_inf, 0.0);
    for (uint i0 = t; i0 < n; i0 += WG_SIZE) {
      const float v = scaled_score(uvec4(i0, r), scale, has_mask);
      if (v > partial.x) partial.x = v;
      if (v != neg_inf) partial.y = 1.0;
    }
    const vec2 row_max = workgroup_max2(partial);
    if (row_max.y == 0.0) {
      for (uint i0 = t; i0 < n; i0 += WG_SIZE) store(uvec4(i0, r), 0.0);
      continue;
    }

    // Each invocation reads back only the entries it wrote itself: no barrier needed.
    vec2 total = vec2(0.0);
    for (uint i0 = t; i0 < n; i0 += WG_SIZE) {
      const float e = exp(scaled_score(uvec4(i0, r), scale, has_mask) - row_max.x);
      store(uvec4(i0, r), e);
      total = csum_add(total, e);
    }
    const float sum = workgroup_sum(total);
    for (uint i0 = t; i0 < n; i0 += WG_SIZE) {
      const uvec4 i = uvec4(i0, r);
      store(i, load(0, i) / sum);
    }
  }
}
