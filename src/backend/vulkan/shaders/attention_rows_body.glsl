// Attention for heads of up to 64 x ROW_LANES dims, ROW_LANES threads per query: the
// query's dims and its output accumulator stay in registers as vec4s, lane l owning vec4s
// l, l + ROW_LANES, ... (so the lanes of a query read neighbouring banks). Every query of
// the workgroup reads the same key and value of the shared tile at once (a broadcast, not
// a bank conflict), four dims per read. Keys and values stream through shared memory a
// tile at a time; the softmax is online, over groups of keys: the group's scores first
// (the lanes' partial dot products summed through shared memory where a query has several
// lanes), then one rescale of the accumulator if the group raised the running max. Same
// definition as the reference kernel (tensor/ops/attention.cpp), in f32 throughout.
//
// The including shader defines ROW_LANES (1, 2, 4 or 8); vulkan_ops_attention.cpp's
// AttentionShape holds the same sizes.
const uint THREADS = 64;
const uint QUERIES = THREADS / ROW_LANES;  // per workgroup
const uint LANE_VECS = 16;                 // vec4s a lane holds: 64 dims
const uint ROW_VECS = LANE_VECS * ROW_LANES;
const uint TILE_KEYS = 32 / ROW_LANES;
const uint KEY_GROUP = min(8, TILE_KEYS);  // keys scored before the running max moves

layout(local_size_x = THREADS) in;

// The block's queries (QUERIES x ROW_VECS); then, in the same 16 KiB, the K tile and the V
// tile (TILE_KEYS x ROW_VECS each); at the end the block's outputs.
shared vec4 smem[QUERIES * ROW_VECS];
const uint V_TILE = TILE_KEYS * ROW_VECS;
// Each lane's partial dot products of the current key group, where a query has several.
shared float partial_dots[ROW_LANES > 1 ? THREADS * KEY_GROUP : 1];

const uint Q = 1, K = 2, V = 3, MASK = 4;  // tensor slots

// Rows [first, first + rows) of `slot` (rows along dim 1, from byte `base`) into shared
// memory at vec4 `at`, `dims` values each, zero-padded to whole vec4s, as are rows past
// `valid`: a vec4 product over whole vectors then reads only real values.
void stage(uint slot, uint base, uint first, uint rows, uint valid, uint dims, uint at) {
  const uint padded = (dims + 3) / 4 * 4;
  for (uint f = gl_LocalInvocationID.x; f < rows * padded; f += THREADS) {
    const uint r = f / padded, d = f % padded;
    float value = 0.0;
    if (r < valid && d < dims)
      value = load_at(slot, base + d * t_nb(slot, 0) + (first + r) * t_nb(slot, 1));
    smem[at + r * ROW_VECS + d / 4][d % 4] = value;
  }
}

void main() {
  const float NEG_INF = uintBitsToFloat(0xff800000u);
  const uint head_dim = t_ne(Q, 0), value_dim = t_ne(V, 0);
  const uint vecs = (head_dim + 3) / 4, value_vecs = (value_dim + 3) / 4;
  const uint queries = t_ne(Q, 1), keys = t_ne(K, 1);
  const uint head = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;
  const uint tid = gl_LocalInvocationID.x;
  const uint row = tid / ROW_LANES, lane = tid % ROW_LANES;
  const uint first_query = gl_WorkGroupID.x * QUERIES;
  const uint query = first_query + row;
  const bool in_range = query < queries;
  const bool has_mask = t_ne(MASK, 0) != 0;  // an absent source is all zeros
  const float scale = param_f(0);
  const uint q_base = t_byte(Q, 0, 0, head, batch), k_base = t_byte(K, 0, 0, head, batch);
  const uint v_base = t_byte(V, 0, 0, head, batch);

  stage(Q, q_base, first_query, QUERIES, queries - first_query, head_dim, 0);
  barrier();
  // Loops over vec4s run to the compile-time bound and test the real one, so that q and acc
  // index registers, never memory.
  vec4 q[LANE_VECS];
  vec4 acc[LANE_VECS];
  [[unroll]] for (uint i = 0; i < LANE_VECS; ++i) {
    const uint c = i * ROW_LANES + lane;
    q[i] = c < vecs ? smem[row * ROW_VECS + c] : vec4(0.0);
    acc[i] = vec4(0.0);
  }
  float running_max = NEG_INF, running_sum = 0.0;

  for (uint tile_start = 0; tile_start < keys; tile_start += TILE_KEYS) {
    const uint tile_len = min(TILE_KEYS, keys - tile_start);
    barrier();  // the queries or the previous tile are no longer read
    stage(K, k_base, tile_start, TILE_KEYS, tile_len, head_dim, 0);
    stage(V, v_base, tile_start, TILE_KEYS, tile_len, value_dim, V_TILE);
    barrier();
    // With one lane per query, rows past the last query have nothing to do; with several,
    // every thread takes part in the exchanges (uniform barriers) and such rows score zeros.
    if (ROW_LANES == 1 && !in_range) continue;

    for (uint group = 0; group < tile_len; group += KEY_GROUP) {
      float score[KEY_GROUP];
      [[unroll]] for (uint g = 0; g < KEY_GROUP; ++g) {
        const uint j = min(group + g, tile_len - 1);  // keys past the tile are dropped below
        vec4 dot4 = vec4(0.0);
        [[unroll]] for (uint i = 0; i < LANE_VECS; ++i) {
          const uint c = i * ROW_LANES + lane;
          if (c < vecs) dot4 += q[i] * smem[j * ROW_VECS + c];
        }
        score[g] = dot4.x + dot4.y + dot4.z + dot4.w;
      }
      if (ROW_LANES > 1) {
        [[unroll]] for (uint g = 0; g < KEY_GROUP; ++g)
          partial_dots[(row * KEY_GROUP + g) * ROW_LANES + lane] = score[g];
        barrier();
        [[unroll]] for (uint g = 0; g < KEY_GROUP; ++g) {
          float dot = 0.0;
          [[unroll]] for (uint l = 0; l < ROW_LANES; ++l)
            dot += partial_dots[(row * KEY_GROUP + g) * ROW_LANES + l];
          score[g] = dot;
        }
        barrier();  // read before the next group's partials are written
      }
      float group_max = NEG_INF;
      [[unroll]] for (uint g = 0; g < KEY_GROUP; ++g) {
        const uint j = group + g;
        if (j < tile_len && in_range) {
          score[g] *= scale;
          if (has_mask) score[g] += load(MASK, uvec4(tile_start + j, query, 0, 0));
        } else {
          score[g] = NEG_INF;
        }
        group_max = max(group_max, score[g]);
      }
      // Masked keys add nothing (and exp(-inf - -inf) would be NaN).
      if (group_max == NEG_INF) continue;
      if (group_max > running_max) {
        const float rescale = running_max == NEG_INF ? 0.0 : exp(running_max - group_max);
        running_sum *= rescale;
        [[unroll]] for (uint i = 0; i < LANE_VECS; ++i) acc[i] *= rescale;
        running_max = group_max;
      }
      [[unroll]] for (uint g = 0; g < KEY_GROUP; ++g) {
        if (score[g] == NEG_INF) continue;
        const float w = exp(score[g] - running_max);
        running_sum += w;
        [[unroll]] for (uint i = 0; i < LANE_VECS; ++i) {
          const uint c = i * ROW_LANES + lane;
          if (c < value_vecs) acc[i] += w * smem[V_TILE + (group + g) * ROW_VECS + c];
        }
      }
    }
  }

  barrier();  // the last tile is no longer read
  // A query that sees no key at all gets zeros, as the reference does.
  [[unroll]] for (uint i = 0; i < LANE_VECS; ++i) {
    const uint c = i * ROW_LANES + lane;
    if (c < value_vecs) smem[row * ROW_VECS + c] = running_sum > 0.0 ? acc[i] / running_sum : vec4(0.0);
  }
  barrier();
  for (uint f = tid; f < QUERIES * value_dim; f += THREADS) {
    const uint r = f / value_dim, e = f % value_dim, i = first_query + r;
    if (i < queries) store(uvec4(e, head, i, batch), smem[r * ROW_VECS + e / 4][e % 4]);
  }
}
