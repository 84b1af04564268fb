// LayerNorm and RmsNorm (tensor/ops/norm.cpp): each line of values along a dim normalized
// (LayerNorm: ne[0]; RmsNorm: ne[0] or, for feature maps, the channels ne[2], param 1),
// then the optional affine weight (and, for LayerNorm, bias) and, for RmsNorm, SiLU
// (param 2). RmsNorm is LayerNorm without centering: its "variance" is the mean square.
// One workgroup per line, two passes.
#version 450
#include "common.glsl"
#include "workgroup_reduce.glsl"

// node_extra() bits.
const uint HAS_WEIGHT = 1u, HAS_BIAS = 2u, CENTERED = 4u;
const int ACTIVATION_SILU = 1;

void main() {
  const bool centered = (node_extra() & CENTERED) != 0u;
  const uint dim = centered ? 0u : uint(param_i(1));
  const bool silu = !centered && param_i(2) == ACTIVATION_SILU;
  const uint n = t_ne(1, dim);
  // The other three dims, in order: a line's position.
  uvec3 across = uvec3(1u);
  for (uint d = 0u, k = 0u; d < 4u; ++d) {
    if (d != dim) across[k++] = t_ne(1, d);
  }
  const uint lines = across.x * across.y * across.z;
  const float eps = param_f(0);
  const bool has_weight = (node_extra() & HAS_WEIGHT) != 0u;
  const bool has_bias = (node_extra() & HAS_BIAS) != 0u;
  const uint t = gl_LocalInvocationID.x;

  for (uint line = gl_WorkGroupID.x; line < lines; line += gl_NumWorkGroups.x) {
    const uvec3 r = uvec3(line % across.x, (line / across.x) % across.y,
                          line / (across.x * across.y));
    // Element i of the line.
    uvec4 first = uvec4(0u);
    for (uint d = 0u, k = 0u; d < 4u; ++d) {
      if (d != dim) first[d] = r[k++];
    }

    float mean = 0.0;
    if (centered) {
      vec2 total = vec2(0.0);
      for (uint i0 = t; i0 < n; i0 += WG_SIZE) {
        uvec4 i = first;
        i[dim] = i0;
        total = csum_add(total, load(1, i));
      }
      mean = workgroup_sum(total) / float(n);
    }

    vec2 squares = vec2(0.0);
    for (uint i0 = t; i0 < n; i0 += WG_SIZE) {
      uvec4 i = first;
      i[dim] = i0;
      const float d = load(1, i) - mean;
      squares = csum_add(squares, d * d);
    }
    const float inv_std = 1.0 / sqrt(workgroup_sum(squares) / float(n) + eps);

    for (uint i0 = t; i0 < n; i0 += WG_SIZE) {
      uvec4 i = first;
      i[dim] = i0;
      float v = (load(1, i) - mean) * inv_std;
      if (has_weight) v *= load_vector(2, i0);
      if (has_bias) v += load_vector(3, i0);
      if (silu) v /= 1.0 + exp(-v);
      store(i, v);
    }
  }
}
