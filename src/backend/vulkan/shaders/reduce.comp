// Sum and Mean over one dim, kept as size 1 (tensor/ops/reduce.cpp). Reductions of at least
// a workgroup's worth of values take one workgroup per output element, its invocations
// striding along the reduced dim; shorter ones take one invocation per output element, which
// a workgroup would leave mostly idle.
#version 450
#include "common.glsl"
#include "workgroup_reduce.glsl"

// node_extra() bits.
const uint IS_MEAN = 1u, PER_INVOCATION = 2u;

void main() {
  const uint dim = uint(param_i(0));
  const uint reduced_length = t_ne(1, dim);
  const bool is_mean = (node_extra() & IS_MEAN) != 0u;
  const float divisor = is_mean ? float(reduced_length) : 1.0;

  if ((node_extra() & PER_INVOCATION) != 0u) {
    FOR_EACH_OUTPUT(out_index) {
      const uvec4 o = t_unravel(0, out_index);
      vec2 total = vec2(0.0);
      for (uint k = 0; k < reduced_length; ++k) {
        uvec4 i = o;
        i[dim] = k;
        total = csum_add(total, load(1, i));
      }
      store(o, csum_value(total) / divisor);
    }
    return;
  }

  const uint outputs = t_count(0);
  const uint t = gl_LocalInvocationID.x;
  for (uint out_index = gl_WorkGroupID.x; out_index < outputs; out_index += gl_NumWorkGroups.x) {
    const uvec4 o = t_unravel(0, out_index);
    vec2 total = vec2(0.0);
    for (uint k = t; k < reduced_length; k += WG_SIZE) {
      uvec4 i = o;
      i[dim] = k;
      total = csum_add(total, load(1, i));
    }
    const float result = workgroup_sum(total) / divisor;
    if (t == 0u) store(o, result);
  }
}
