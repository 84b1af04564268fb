// Fused scaled dot-product attention, flash-style (tensor/ops/attention.cpp defines it):
//   out[e, h, i, n] = sum_j softmax_j(scale * q[:, i, h, n] . k[:, j, h, n] + mask[j, i])
//                           * v[e, j, h, n]
// One workgroup per (block of QUERY_ROWS queries, head, batch). Keys and values stream
// through shared memory a tile at a time; each query row keeps a running max and sum and
// rescales its accumulator when the max grows (online softmax), so no score matrix beyond
// one tile is ever held. Everything is computed and accumulated in f32.
//
// Threads: ROW_LANES consecutive threads share a query row. For scores, a lane takes keys
// lane, lane + ROW_LANES, ...; for the output, it owns dims lane, lane + ROW_LANES, ...
// The including shader sets the sizes (vulkan_ops_attention.cpp's AttentionShape):
//   ATTENTION_QUERY_ROWS   queries per workgroup
//   ATTENTION_MAX_HEAD_DIM the largest head the tiles hold
//   ATTENTION_MAX_TILE_KEYS keys per tile at most
//   ATTENTION_KV_FLOATS    room for one K or V tile (rows padded by one float)
const uint QUERY_ROWS = ATTENTION_QUERY_ROWS;
const uint ROW_LANES = 8;
const uint MAX_HEAD_DIM = ATTENTION_MAX_HEAD_DIM;
const uint MAX_TILE_KEYS = ATTENTION_MAX_TILE_KEYS;
const uint MAX_KEYS_PER_LANE = MAX_TILE_KEYS / ROW_LANES;
const uint MAX_DIMS_PER_LANE = MAX_HEAD_DIM / ROW_LANES;
const uint KV_FLOATS = ATTENTION_KV_FLOATS;

layout(local_size_x = QUERY_ROWS * ROW_LANES) in;

// Row strides are padded by one float so that rows read side by side by different
// threads fall in different banks. Each variant stays under lavapipe's 32 KiB.
shared float q_tile[QUERY_ROWS * (MAX_HEAD_DIM + 1)];
shared float kv_tile[KV_FLOATS];  // K, then V, of the current key tile
shared float weights[QUERY_ROWS * (MAX_TILE_KEYS + 1)];  // exp(score - running max)
shared float lane_max[QUERY_ROWS * ROW_LANES];
shared float lane_sum[QUERY_ROWS * ROW_LANES];

const uint Q = 1, K = 2, V = 3, MASK = 4;  // tensor slots

void main() {
  const float NEG_INF = uintBitsToFloat(0xff800000u);  // GLSL has no infinity literal
  const uint head_dim = t_ne(Q, 0), queries = t_ne(Q, 1), keys = t_ne(K, 1);
  const uint value_dim = t_ne(V, 0);
  const uint head = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;
  const uint first_query = gl_WorkGroupID.x * QUERY_ROWS;
  const uint tid = gl_LocalInvocationID.x;
  const uint row = tid / ROW_LANES, lane = tid % ROW_LANES;
  const uint query = first_query + row;
  const bool has_mask = t_ne(MASK, 0) != 0;  // an absent source is all zeros
  const float scale = param_f(0);
  // Byte addresses of this (head, batch)'s first element, and the strides along the head
  // dim and along the sequence: q, k and v may be any strided view.
  const uint q_base = t_byte(Q, 0, 0, head, batch), k_base = t_byte(K, 0, 0, head, batch);
  const uint v_base = t_byte(V, 0, 0, head, batch);
  const uvec2 q_nb = uvec2(t_nb(Q, 0), t_nb(Q, 1)), k_nb = uvec2(t_nb(K, 0), t_nb(K, 1));
  const uvec2 v_nb = uvec2(t_nb(V, 0), t_nb(V, 1));

  // Larger heads take fewer keys per tile; a multiple of ROW_LANES keeps every lane's
  // share of keys equal.
  const uint q_stride = head_dim + 1, kv_stride = max(head_dim, value_dim) + 1;
  const uint tile_keys = min(MAX_TILE_KEYS, KV_FLOATS / kv_stride / ROW_LANES * ROW_LANES);
  const uint keys_per_lane = tile_keys / ROW_LANES;
  const uint dims_per_lane = (value_dim + ROW_LANES - 1) / ROW_LANES;

  // This block's queries, once; rows past the last query are zeros and never stored.
  for (uint f = tid; f < QUERY_ROWS * head_dim; f += gl_WorkGroupSize.x) {
    const uint r = f / head_dim, d = f % head_dim;
    const uint i = first_query + r;
    q_tile[r * q_stride + d] = i < queries ? load_at(Q, q_base + d * q_nb.x + i * q_nb.y) : 0.0;
  }

  // Every lane of a row tracks the row's max and sum; they compute the same values.
  float running_max = NEG_INF, running_sum = 0.0;
  float acc[MAX_DIMS_PER_LANE];
  [[unroll]] for (uint c = 0; c < MAX_DIMS_PER_LANE; ++c) acc[c] = 0.0;

  for (uint tile_start = 0; tile_start < keys; tile_start += tile_keys) {
    const uint tile_len = min(tile_keys, keys - tile_start);

    barrier();  // the previous tile's values are no longer read
    for (uint f = tid; f < tile_len * head_dim; f += gl_WorkGroupSize.x) {
      const uint j = f / head_dim, d = f % head_dim;
      kv_tile[j * kv_stride + d] = load_at(K, k_base + d * k_nb.x + (tile_start + j) * k_nb.y);
    }
    barrier();

    // Scores of this lane's keys; keys past the end count as masked out.
    float score[MAX_KEYS_PER_LANE];
    float my_max = NEG_INF;
    [[unroll]] for (uint c = 0; c < MAX_KEYS_PER_LANE; ++c) {
      const uint j = lane + c * ROW_LANES;
      score[c] = NEG_INF;
      if (c < keys_per_lane && j < tile_len) {
        float dot = 0.0;
        for (uint d = 0; d < head_dim; ++d)
          dot += q_tile[row * q_stride + d] * kv_tile[j * kv_stride + d];
        score[c] = scale * dot;
        if (has_mask && query < queries)
          score[c] += load(MASK, uvec4(tile_start + j, query, 0, 0));
        my_max = max(my_max, score[c]);
      }
    }
    lane_max[tid] = my_max;
    barrier();  // keys are read, every lane's max is visible

    for (uint f = tid; f < tile_len * value_dim; f += gl_WorkGroupSize.x) {
      const uint j = f / value_dim, e = f % value_dim;
      kv_tile[j * kv_stride + e] = load_at(V, v_base + e * v_nb.x + (tile_start + j) * v_nb.y);
    }

    float new_max = running_max;
    for (uint l = 0; l < ROW_LANES; ++l) new_max = max(new_max, lane_max[row * ROW_LANES + l]);
    // While every key so far is masked out, the max stays -inf and nothing accumulates
    // (exp(-inf - -inf) would be NaN).
    const bool nothing_visible = new_max == NEG_INF;
    const float rescale =
        nothing_visible || running_max == NEG_INF ? 0.0 : exp(running_max - new_max);
    float my_sum = 0.0;
    [[unroll]] for (uint c = 0; c < MAX_KEYS_PER_LANE; ++c) {
      const uint j = lane + c * ROW_LANES;
      if (c < keys_per_lane && j < tile_len) {
        const float w = nothing_visible || score[c] == NEG_INF ? 0.0 : exp(score[c] - new_max);
        weights[row * (MAX_TILE_KEYS + 1) + j] = w;
        my_sum += w;
      }
    }
    lane_sum[tid] = my_sum;
    barrier();  // values, weights and sums are visible

    float tile_sum = 0.0;
    for (uint l = 0; l < ROW_LANES; ++l) tile_sum += lane_sum[row * ROW_LANES + l];
    running_sum = running_sum * rescale + tile_sum;
    running_max = new_max;
    [[unroll]] for (uint c = 0; c < MAX_DIMS_PER_LANE; ++c) {
      const uint e = lane + c * ROW_LANES;
      if (c < dims_per_lane && e < value_dim) {
        float sum = 0.0;
        for (uint j = 0; j < tile_len; ++j)
          sum += weights[row * (MAX_TILE_KEYS + 1) + j] * kv_tile[j * kv_stride + e];
        acc[c] = acc[c] * rescale + sum;
      }
    }
  }

  if (query >= queries) return;
  // A query that sees no key at all gets zeros, as the reference does.
  [[unroll]] for (uint c = 0; c < MAX_DIMS_PER_LANE; ++c) {
    const uint e = lane + c * ROW_LANES;
    if (c < dims_per_lane && e < value_dim)
      store(uvec4(e, head, query, batch), running_sum > 0.0 ? acc[c] / running_sum : 0.0);
  }
}
