// Attention for heads of up to 64 dims (SDXL's, SD3's, and SD 1.5's largest-resolution
// layers), one query per thread: the query row and its output accumulator stay in
// registers, and every thread of the workgroup reads the same key and value of the shared
// tile at once (a broadcast, not a bank conflict). Keys and values stream through shared
// memory a tile at a time; the softmax is online, the accumulator rescaled when a key
// raises the running max. Same definition as attention_body.glsl
// (tensor/ops/attention.cpp), in f32 throughout.
#version 450
#include "common.glsl"

const uint QUERIES = 64;  // per workgroup; vulkan_ops_attention.cpp: queries_per_group
const uint MAX_HEAD_DIM = 64;
const uint TILE_KEYS = 32;

layout(local_size_x = QUERIES) in;

// The K tile, then the V tile; before and after the keys, the block's queries and outputs
// (QUERIES x MAX_HEAD_DIM: the same 16 KiB), so that the global reads and writes of rows
// are plain loops rather than one unrolled copy per dim.
shared float smem[2 * TILE_KEYS * MAX_HEAD_DIM];
const uint V_TILE = TILE_KEYS * MAX_HEAD_DIM;

const uint Q = 1, K = 2, V = 3, MASK = 4;  // tensor slots

void main() {
  const float NEG_INF = uintBitsToFloat(0xff800000u);
  const uint head_dim = t_ne(Q, 0), value_dim = t_ne(V, 0);
  const uint queries = t_ne(Q, 1), keys = t_ne(K, 1);
  const uint head = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;
  const uint tid = gl_LocalInvocationID.x;
  const uint first_query = gl_WorkGroupID.x * QUERIES;
  const bool in_range = first_query + tid < queries;
  const bool has_mask = t_ne(MASK, 0) != 0;  // an absent source is all zeros
  const float scale = param_f(0);
  const uint q_base = t_byte(Q, 0, 0, head, batch), k_base = t_byte(K, 0, 0, head, batch);
  const uint v_base = t_byte(V, 0, 0, head, batch);

  for (uint f = tid; f < QUERIES * head_dim; f += QUERIES) {
    const uint r = f / head_dim, d = f % head_dim, i = first_query + r;
    smem[r * MAX_HEAD_DIM + d] =
        i < queries ? load_at(Q, q_base + d * t_nb(Q, 0) + i * t_nb(Q, 1)) : 0.0;
  }
  barrier();
  // Loops over dims run to the compile-time bound and test the real one, so that q and acc
  // index registers, never memory.
  float q[MAX_HEAD_DIM];
  float acc[MAX_HEAD_DIM];
  [[unroll]] for (uint d = 0; d < MAX_HEAD_DIM; ++d) {
    q[d] = d < head_dim ? smem[tid * MAX_HEAD_DIM + d] : 0.0;
    acc[d] = 0.0;
  }
  float running_max = NEG_INF, running_sum = 0.0;

  for (uint tile_start = 0; tile_start < keys; tile_start += TILE_KEYS) {
    const uint tile_len = min(TILE_KEYS, keys - tile_start);
    barrier();  // the queries or the previous tile are no longer read
    for (uint f = tid; f < tile_len * head_dim; f += QUERIES) {
      const uint j = f / head_dim, d = f % head_dim;
      smem[j * MAX_HEAD_DIM + d] =
          load_at(K, k_base + d * t_nb(K, 0) + (tile_start + j) * t_nb(K, 1));
    }
    for (uint f = tid; f < tile_len * value_dim; f += QUERIES) {
      const uint j = f / value_dim, e = f % value_dim;
      smem[V_TILE + j * MAX_HEAD_DIM + e] =
          load_at(V, v_base + e * t_nb(V, 0) + (tile_start + j) * t_nb(V, 1));
    }
    barrier();
    if (!in_range) continue;

    // Key by key; the accumulator is rescaled only when a key raises the running max.
    for (uint j = 0; j < tile_len; ++j) {
      float dot = 0.0;
      [[unroll]] for (uint d = 0; d < MAX_HEAD_DIM; ++d)
        if (d < head_dim) dot += q[d] * smem[j * MAX_HEAD_DIM + d];
      float score = scale * dot;
      if (has_mask) score += load(MASK, uvec4(tile_start + j, first_query + tid, 0, 0));
      // A masked key adds nothing (and exp(-inf - -inf) would be NaN).
      if (score == NEG_INF) continue;
      if (score > running_max) {
        const float rescale = running_max == NEG_INF ? 0.0 : exp(running_max - score);
        running_sum *= rescale;
        [[unroll]] for (uint e = 0; e < MAX_HEAD_DIM; ++e) acc[e] *= rescale;
        running_max = score;
      }
      const float w = exp(score - running_max);
      running_sum += w;
      [[unroll]] for (uint e = 0; e < MAX_HEAD_DIM; ++e)
        if (e < value_dim) acc[e] += w * smem[V_TILE + j * MAX_HEAD_DIM + e];
    }
  }

  barrier();  // the last tile is no longer read
  // A query that sees no key at all gets zeros, as the reference does.
  [[unroll]] for (uint e = 0; e < MAX_HEAD_DIM; ++e)
    if (e < value_dim) smem[tid * MAX_HEAD_DIM + e] = running_sum > 0.0 ? acc[e] / running_sum : 0.0;
  barrier();
  for (uint f = tid; f < QUERIES * value_dim; f += QUERIES) {
    const uint r = f / value_dim, e = f % value_dim, i = first_query + r;
    if (i < queries) store(uvec4(e, head, i, batch), smem[r * MAX_HEAD_DIM + e]);
  }
}
