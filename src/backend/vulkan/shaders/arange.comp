// arange: out[i] = start + i * step (tensor/ops/generate.cpp), param_f(0) the start and
// param_f(2) the step. No sources.
#version 450
#include "common.glsl"
#include "precise_math.glsl"
layout(local_size_x = 256) in;

void main() {
  const float start = param_f(0);
  const float step = param_f(2);
  FOR_EACH_OUTPUT(idx) {
    // The reference sums in double and rounds once: the product's and the sum's rounding
    // errors are kept and added back before the one rounding here.
    float product, product_err, sum, sum_err;
    exact_product(float(idx), step, product, product_err);
    exact_sum(start, product, sum, sum_err);
    store_at(t_byte(0, idx, 0, 0, 0), sum + (sum_err + product_err));
  }
}
