// Row reductions shared by the normalization, softmax and sum shaders: one workgroup of
// WG_SIZE invocations walks one row (or group) with a stride of WG_SIZE, each keeps a
// partial result, and a shared-memory tree combines the partials. Every invocation of the
// workgroup must call the workgroup_* functions (they hold barriers) and each gets the result.
//
// Sums are compensated (each partial carries the rounding error it has dropped so far), so
// long rows in f32 come close to the reference kernels' double-precision sums.
layout(local_size_x = 256) in;
const uint WG_SIZE = 256;

shared vec2 wg_partials[WG_SIZE];

// a + b and its rounding error, exactly (Knuth's TwoSum). `precise` stops the compiler from
// simplifying the error term to zero by algebra that holds only for real numbers.
vec2 two_sum(float a, float b) {
  precise float s = a + b;
  precise float b_part = s - a;
  precise float err = (a - (s - b_part)) + (b - b_part);
  return vec2(s, err);
}

// A compensated sum is (sum, error still to add); start from vec2(0).
vec2 csum_add(vec2 acc, float x) {
  const vec2 t = two_sum(acc.x, x);
  return vec2(t.x, acc.y + t.y);
}
vec2 csum_merge(vec2 a, vec2 b) {
  const vec2 t = two_sum(a.x, b.x);
  return vec2(t.x, a.y + b.y + t.y);
}
// An infinite sum has a NaN error term (inf - inf): it is infinite all the same.
float csum_value(vec2 acc) { return isinf(acc.x) ? acc.x : acc.x + acc.y; }

// The sum of every invocation's compensated partial.
float workgroup_sum(vec2 partial) {
  const uint t = gl_LocalInvocationID.x;
  wg_partials[t] = partial;
  barrier();
  [[unroll]] for (uint stride = WG_SIZE / 2; stride > 0; stride >>= 1) {
    if (t < stride) wg_partials[t] = csum_merge(wg_partials[t], wg_partials[t + stride]);
    barrier();
  }
  const float total = csum_value(wg_partials[0]);
  barrier();  // the next reduction may overwrite wg_partials[0]
  return total;
}

// The largest x over the workgroup (NaN is skipped, as `x > max` skips it) and the largest y.
vec2 workgroup_max2(vec2 partial) {
  const uint t = gl_LocalInvocationID.x;
  wg_partials[t] = partial;
  barrier();
  [[unroll]] for (uint stride = WG_SIZE / 2; stride > 0; stride >>= 1) {
    if (t < stride) {
      const vec2 a = wg_partials[t], b = wg_partials[t + stride];
      wg_partials[t] = vec2(b.x > a.x ? b.x : a.x, max(a.y, b.y));
    }
    barrier();
  }
  const vec2 result = wg_partials[0];
  barrier();
  return result;
}

// Element i of a vector-shaped tensor (affine weights: [C] or [1, 1, C]), whichever dim
// holds it, as the reference kernels read them.
float load_vector(uint k, uint i) {
  [[unroll]] for (uint d = 0; d < 4; ++d)
    if (t_ne(k, d) != 1) return load_at(k, t_off(k) + i * t_nb(k, d));
  return load_at(k, t_off(k));
}
