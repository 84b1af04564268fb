// GroupNorm (tensor/ops/norm.cpp): x [W, H, C, N] normalized over the W x H x C/groups
// values of each group and batch, then the optional affine weight and bias [C] and SiLU.
// One workgroup per (group, batch); mean and biased variance in two passes over the data.
#version 450
#include "common.glsl"
#include "workgroup_reduce.glsl"

// node_extra() bits: which affine sources are bound.
const uint HAS_WEIGHT = 1u, HAS_BIAS = 2u;
const int ACTIVATION_SILU = 1;

// Element k of a group that starts at `first_channel`: W fastest, then H, then channel.
uvec4 group_element(uint k, uvec2 plane_size, uint first_channel, uint batch) {
  const uint in_plane = k % (plane_size.x * plane_size.y);
  return uvec4(in_plane % plane_size.x, in_plane / plane_size.x,
               first_channel + k / (plane_size.x * plane_size.y), batch);
}

void main() {
  const uvec2 plane_size = uvec2(t_ne(1, 0), t_ne(1, 1));
  const uint groups = uint(param_i(0));
  const float eps = param_f(1);
  const bool silu = param_i(2) == ACTIVATION_SILU;
  const bool has_weight = (node_extra() & HAS_WEIGHT) != 0u;
  const bool has_bias = (node_extra() & HAS_BIAS) != 0u;
  const uint per_group = t_ne(1, 2) / groups;
  const uint count = plane_size.x * plane_size.y * per_group;
  const uint jobs = groups * t_ne(1, 3);
  const uint t = gl_LocalInvocationID.x;

  for (uint job = gl_WorkGroupID.x; job < jobs; job += gl_NumWorkGroups.x) {
    const uint first_channel = (job % groups) * per_group;
    const uint batch = job / groups;

    vec2 total = vec2(0.0);
    for (uint k = t; k < count; k += WG_SIZE)
      total = csum_add(total, load(1, group_element(k, plane_size, first_channel, batch)));
    const float mean = workgroup_sum(total) / float(count);

    vec2 squares = vec2(0.0);
    for (uint k = t; k < count; k += WG_SIZE) {
      const float d = load(1, group_element(k, plane_size, first_channel, batch)) - mean;
      squares = csum_add(squares, d * d);
    }
    const float inv_std = 1.0 / sqrt(workgroup_sum(squares) / float(count) + eps);

    for (uint k = t; k < count; k += WG_SIZE) {
      const uvec4 i = group_element(k, plane_size, first_channel, batch);
      float v = (load(1, i) - mean) * inv_std;
      if (has_weight) v *= load_vector(2, i.z);
      if (has_bias) v += load_vector(3, i.z);
      if (silu) v /= 1.0 + exp(-v);
      store(i, v);
    }
  }
}
