// timestep_embedding: out[j, n] = cos(t[n] * freq[j]) for j < half, sin(t[n] * freq[j - half])
// for half <= j < 2 * half, 0 in the last column of an odd dim (tensor/ops/generate.cpp),
// with freq[j] = exp(-ln(max_period) * j / half). params[0] is dim; the backend passes
// ln(max_period) as node_extra(), rounded to f32 as the reference rounds it.
#version 450
#include "common.glsl"
#include "precise_math.glsl"
layout(local_size_x = 256) in;

void main() {
  const uint half_dim = uint(param_i(0)) / 2;
  const float log_period = uintBitsToFloat(node_extra());
  FOR_EACH_OUTPUT(idx) {
    const uvec4 i = t_unravel(0, idx);
    float value = 0.0;
    if (i.x < 2 * half_dim) {
      const uint j = i.x < half_dim ? i.x : i.x - half_dim;
      // At t ~ 1000 one ulp of freq moves the output by up to 6e-5: freq is rounded as the
      // host rounds it, not as the device's division and exp would.
      const float freq = exp_rounded(divide_rounded(-log_period * float(j), float(half_dim)));
      const float angle = reduce_angle(load(1, uvec4(i.y, 0, 0, 0)) * freq);
      value = i.x < half_dim ? cos_precise(angle) : sin_precise(angle);
    }
    store(i, value);
  }
}
