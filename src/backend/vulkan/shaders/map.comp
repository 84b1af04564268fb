// One-input elementwise ops: cont (a copy in the same dtype, bit for bit), cast, scale,
// clamp and the unary functions, as tensor/ops/{view,cast,elementwise,unary}.cpp define them.
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;

const uint MAP_CONT = 0, MAP_CAST = 1, MAP_SCALE = 2, MAP_CLAMP = 3, MAP_UNARY = 4;
const int U_GELU = 0, U_GELU_ERF = 1, U_GELU_QUICK = 2, U_SILU = 3, U_RELU = 4, U_LEAKY_RELU = 5,
          U_TANH = 6, U_SIGMOID = 7, U_EXP = 8, U_SIN = 9, U_COS = 10, U_SQRT = 11, U_NEG = 12;

// erf by Abramowitz and Stegun 7.1.26 (error below 1.5e-7): GLSL has none.
float erf_approx(float x) {
  const float t = 1.0 / (1.0 + 0.3275911 * abs(x));
  const float y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t -
                          0.284496736) * t + 0.254829592) * t * exp(-x * x);
  return x < 0.0 ? -y : y;
}
// GLSL's tanh may overflow to NaN through exp for large |x|; tanh is +-1 there anyway.
float tanh_safe(float x) { return tanh(clamp(x, -15.0, 15.0)); }

float unary_value(int fn, float x, float alpha) {
  if (fn == U_GELU) return 0.5 * x * (1.0 + tanh_safe(0.7978845608 * (x + 0.044715 * x * x * x)));
  if (fn == U_GELU_ERF) return 0.5 * x * (1.0 + erf_approx(x * 0.70710678118));
  if (fn == U_GELU_QUICK) return x / (1.0 + exp(-1.702 * x));
  if (fn == U_SILU) return x / (1.0 + exp(-x));
  if (fn == U_RELU) return x > 0.0 ? x : 0.0;
  if (fn == U_LEAKY_RELU) return x > 0.0 ? x : alpha * x;
  if (fn == U_TANH) return tanh_safe(x);
  if (fn == U_SIGMOID) return 1.0 / (1.0 + exp(-x));
  if (fn == U_EXP) return exp(x);
  if (fn == U_SIN) return sin(x);
  if (fn == U_COS) return cos(x);
  if (fn == U_SQRT) return sqrt(x);
  return -x;  // U_NEG
}

void copy_bits(uvec4 i) {
  const uint from = t_byte(1, i.x, i.y, i.z, i.w);
  const uint to = t_byte(0, i.x, i.y, i.z, i.w);
  const uint type = t_type(0);
  if (type == T_F32 || type == T_I32) {
    D[to >> 2] = S0[from >> 2];
    return;
  }
  const uint word = S0[from >> 2];
  const uint bits = (from & 2u) != 0u ? word >> 16 : word & 0xffffu;
  const uint shift = (to & 2u) * 8u;
  atomicAnd(D[to >> 2], ~(0xffffu << shift));
  atomicOr(D[to >> 2], bits << shift);
}

void main() {
  const uint kind = node_extra();
  FOR_EACH_OUTPUT(idx) {
    const uvec4 i = t_unravel(0, idx);
    if (kind == MAP_CONT) {
      copy_bits(i);
      continue;
    }
    const float x = load(1, i);
    float r = x;
    if (kind == MAP_SCALE) r = x * param_f(0) + param_f(1);
    else if (kind == MAP_CLAMP) r = clamp(x, param_f(0), param_f(1));
    else if (kind == MAP_UNARY) r = unary_value(param_i(0), x, param_f(1));
    store(i, r);
  }
}
