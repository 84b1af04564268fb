// add, sub, mul, div: out = a (op) b, b broadcast over a's shape (tensor/ops/elementwise.cpp).
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;

const uint OP_ADD = 0, OP_SUB = 1, OP_MUL = 2, OP_DIV = 3;

void main() {
  const uint op = node_extra();
  FOR_EACH_OUTPUT(idx) {
    const uvec4 i = t_unravel(0, idx);
    const float x = load(1, i);
    const float y = load(2, t_bcast(2, i));
    float r;
    if (op == OP_ADD) r = x + y;
    else if (op == OP_SUB) r = x - y;
    else if (op == OP_MUL) r = x * y;
    else r = x / y;
    store(i, r);
  }
}
