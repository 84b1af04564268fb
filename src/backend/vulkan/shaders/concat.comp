// concat: a and b joined along dim params[0] (tensor/ops/concat.cpp). Elements are copied
// bit for bit, so i32 ids and 16-bit floats come through exactly.
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;

// The raw word holding byte b of source slot k (1: a, 2: b).
uint source_word(uint k, uint b) { return k == 1 ? S0[b >> 2] : S1[b >> 2]; }

void main() {
  const uint dim = uint(param_i(0));
  const uint a_len = t_ne(1, dim);
  const bool half_width = t_type(0) == T_F16 || t_type(0) == T_BF16;
  FOR_EACH_OUTPUT(idx) {
    const uvec4 i = t_unravel(0, idx);
    uvec4 from = i;
    uint k = 1;
    if (i[dim] >= a_len) {
      k = 2;
      from[dim] -= a_len;
    }
    const uint src_byte = t_byte(k, from.x, from.y, from.z, from.w);
    const uint dst_byte = t_byte(0, i.x, i.y, i.z, i.w);
    const uint word = source_word(k, src_byte);
    if (!half_width) {
      D[dst_byte >> 2] = word;
      continue;
    }
    const uint bits = (src_byte & 2u) != 0u ? word >> 16 : word & 0xffffu;
    // Neighbouring threads may write the other half of this word.
    const uint shift = (dst_byte & 2u) * 8u;
    atomicAnd(D[dst_byte >> 2], ~(0xffffu << shift));
    atomicOr(D[dst_byte >> 2], bits << shift);
  }
}
