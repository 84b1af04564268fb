// get_rows: out[k, i, b] = table[k, ids[i, b]] (tensor/ops/get_rows.cpp), from an f32, f16,
// bf16 or block-quantized table (dequant.glsl). The reference stops on an id outside the
// table; a shader cannot, so such rows come out as NaN rather than as whatever memory lies
// past the table.
#version 450
#include "common.glsl"
#include "dequant.glsl"
layout(local_size_x = 256) in;

void main() {
  const int rows = int(t_ne(1, 1));
  const uint type = t_type(1);
  const float nan = uintBitsToFloat(0x7fc00000u);
  FOR_EACH_OUTPUT(idx) {
    const uvec4 i = t_unravel(0, idx);
    const int id = load_i32(2, uvec4(i.y, i.z, 0, 0));
    float value = nan;
    if (id >= 0 && id < rows) {
      value = is_block_type(type) ? dequant_at(1u, type, t_byte(1, 0u, uint(id), 0u, 0u), i.x)
                                  : load(1, uvec4(i.x, uint(id), 0, 0));
    }
    store(i, value);
  }
}
