// matmul (tensor/ops/matmul.h): out[m, n, i2, i3] = sum_k a[k, m, i2 / (B2 / A2), i3 / (B3 / A3)]
// * b[k, n, i2, i3], a workgroup per 64 x 64 tile of (m, n) (gemm_tile.glsl: m is its A side,
// n its B side). The grid's x walks m tiles, y n tiles, z the batch slices of b, each looping
// where there are more than the grid holds. Any strides: permuted and transposed views are
// read in place. a may be block-quantized (rows of whole blocks): its fetch decodes 4 values
// of one row at a time (dequant.glsl).
#version 450
#include "common.glsl"
#include "dequant.glsl"
#include "gemm_tile.glsl"

const uint SLOT_A = 1u, SLOT_B = 2u;

// One operand as the fetches read it: rows of K values in this batch slice.
struct Operand {
  uint slot;
  uint type;
  uint base;  // byte of element (0, 0) of the batch slice
  uint k_stride;
  uint row_stride;
  uint rows;
  uint order;  // gemm_tile.glsl's fetch order
  uint row0;   // first row of the current tile
};

uint K;
Operand op_a, op_b;

Operand operand(uint slot) {
  Operand o;
  o.slot = slot;
  o.type = t_type(slot);
  o.base = 0u;
  o.k_stride = t_nb(slot, 0);
  o.row_stride = t_nb(slot, 1);
  o.rows = t_ne(slot, 1);
  o.order = is_block_type(o.type) ? K_QUADS
                                  : fetch_order(o.type, t_off(slot), o.k_stride, o.row_stride,
                                                t_nb(slot, 2) | t_nb(slot, 3));
  o.row0 = 0u;
  return o;
}

void fetch_rows(Operand o, uint k0, out float v[PER_THREAD]) {
  if (o.order == K_QUADS) {
    // Only a has block types (supports_matmul), so the decode reads its slot by a constant:
    // one binding's loads instead of a branch over four per byte read (glslc 2023.2's
    // optimizer also crashes on the latter).
    const uvec2 at = tile_slot(K_QUADS, 0u);
    const uint k = k0 + at.x, row = o.row0 + at.y;
    vec4 quad = vec4(0.0);
    if (k < K && row < o.rows) quad = dequant_quad(SLOT_A, o.type, o.base + row * o.row_stride, k);
    [[unroll]] for (uint r = 0u; r < PER_THREAD; ++r) v[r] = quad[r];
    return;
  }
  [[unroll]] for (uint r = 0u; r < PER_THREAD; ++r) {
    const uvec2 at = tile_slot(o.order, r);
    const uint k = k0 + at.x, row = o.row0 + at.y;
    const bool inside = k < K && row < o.rows;
    if (o.order == K_PAIRS) {
      if (r % 2u == 1u) continue;  // the second value of the pair read for r - 1
      vec2 pair = vec2(0.0);
      if (inside) pair = decode_pair(word_of(o.slot, o.base + row * o.row_stride + k * 2u),
                                     o.type, k + 1u < K);
      v[r] = pair.x;
      v[r + 1u] = pair.y;
    } else {
      v[r] = 0.0;
      if (inside) {
        const uint byte = o.base + row * o.row_stride + k * o.k_stride;
        v[r] = decode(word_of(o.slot, byte), byte, o.type);
      }
    }
  }
}

void fetch_a(uint k0, out float v[PER_THREAD]) { fetch_rows(op_a, k0, v); }
void fetch_b(uint k0, out float v[PER_THREAD]) { fetch_rows(op_b, k0, v); }

// The output is f32 (matmul's result type): plain word stores.
void store_tile(uint out_base) {
  const uint tx = thread_x(), ty = thread_y();
  const uint nb_m = t_nb(0, 0), nb_n = t_nb(0, 1);
  [[unroll]] for (uint i = 0u; i < PER_THREAD; ++i) {
    const uint m = op_a.row0 + tx + 16u * i;
    [[unroll]] for (uint j = 0u; j < PER_THREAD; ++j) {
      const uint n = op_b.row0 + ty + 16u * j;
      if (m < op_a.rows && n < op_b.rows)
        D[(out_base + m * nb_m + n * nb_n) >> 2] = floatBitsToUint(acc[i][j]);
    }
  }
}

void main() {
  K = t_ne(SLOT_A, 0);
  op_a = operand(SLOT_A);
  op_b = operand(SLOT_B);
  const uint b2 = t_ne(SLOT_B, 2), b3 = t_ne(SLOT_B, 3);
  // Each slice of a serves this many consecutive slices of b along dims 2 and 3.
  const uint repeat2 = b2 / t_ne(SLOT_A, 2), repeat3 = b3 / t_ne(SLOT_A, 3);
  for (uint batch = gl_WorkGroupID.z; batch < b2 * b3; batch += gl_NumWorkGroups.z) {
    const uint i2 = batch % b2, i3 = batch / b2;
    op_a.base = t_byte(SLOT_A, 0u, 0u, i2 / repeat2, i3 / repeat3);
    op_b.base = t_byte(SLOT_B, 0u, 0u, i2, i3);
    const uint out_base = t_byte(0, 0u, 0u, i2, i3);
    for (uint n_tile = gl_WorkGroupID.y; n_tile * TILE < op_b.rows;
         n_tile += gl_NumWorkGroups.y) {
      op_b.row0 = n_tile * TILE;
      for (uint m_tile = gl_WorkGroupID.x; m_tile * TILE < op_a.rows;
           m_tile += gl_NumWorkGroups.x) {
        op_a.row0 = m_tile * TILE;
        multiply_tile(K, op_a.order, op_b.order);
        store_tile(out_base);
      }
    }
  }
}
