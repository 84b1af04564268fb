// The shared-memory tiling behind matmul.comp and conv2d.comp: a workgroup of 256 threads
// computes a 64 x 64 tile of a product out[ra, rb] = sum_k A[k, ra] * B[k, rb], stepping
// through k 16 at a time. Each step, every thread fetches 4 values of A's 16 x 64 slice and 4
// of B's into registers (the shaders' own fetch functions: they know the addressing), the
// workgroup stashes them in shared memory, and each thread adds the 4 x 4 products of its
// micro-tile: rows ra = tx + 16 i and rb = ty + 16 j, so neighbouring threads read
// neighbouring shared words and write neighbouring outputs along ra. Sums are f32.
//
// Include after common.glsl.

layout(local_size_x = 256) in;

const uint TILE = 64;  // output tile edge, along ra and along rb
const uint STEP = 16;  // k values per step
const uint PER_THREAD = 4;  // values each thread fetches per operand and step; micro-tile edge

// Shared rows are 65 words apart, not 64, so that threads stashing different k of one
// row fall into different banks.
const uint ROW_STRIDE = TILE + 1;
shared float tile_a[STEP * ROW_STRIDE];
shared float tile_b[STEP * ROW_STRIDE];

// This thread's micro-tile: acc[i][j] is out[tx + 16 i, ty + 16 j] of the tile.
float acc[PER_THREAD][PER_THREAD];

uint thread_x() { return gl_LocalInvocationIndex % 16u; }
uint thread_y() { return gl_LocalInvocationIndex / 16u; }

// Which element of a 16 x 64 slice each of a thread's 4 fetched values is, chosen per operand
// so that neighbouring threads read neighbouring addresses:
// - K_FAST: k varies fastest across threads (rows of k values contiguous, as weights are).
// - K_PAIRS: as K_FAST, but each thread reads two 32-bit words holding two 16-bit values each
//   (contiguous 16-bit rows that start on a word): values 2w and 2w + 1 come from word w.
// - ROW_FAST: the row index varies fastest (a transposed operand, or conv2d's input pixels).
// - K_QUADS: each thread reads 4 consecutive k of one row, 4 threads per row: block-quantized
//   rows, where 4 consecutive values share one scale and 4 consecutive bytes (dequant.glsl).
const uint K_FAST = 0, K_PAIRS = 1, ROW_FAST = 2, K_QUADS = 3;

// (k within the step, row within the tile) of fetched value r.
uvec2 tile_slot(uint order, uint r) {
  const uint t = gl_LocalInvocationIndex;
  if (order == K_PAIRS) {
    const uint w = t + 256u * (r / 2u);  // the word: 8 per row of 16 values
    return uvec2(2u * (w % (STEP / 2u)) + r % 2u, w / (STEP / 2u));
  }
  if (order == K_QUADS) {
    const uint per_row = STEP / PER_THREAD;  // threads
    return uvec2(PER_THREAD * (t % per_row) + r, t / per_row);
  }
  const uint e = t + 256u * r;
  if (order == K_FAST) return uvec2(e % STEP, e / STEP);
  return uvec2(e / TILE, e % TILE);
}

// The fetch order for an operand whose k stride is k_stride bytes and row stride row_stride:
// pairs of 16-bit values when its rows are packed and every row starts on a word.
uint fetch_order(uint type, uint first_byte, uint k_stride, uint row_stride, uint batch_strides) {
  if (k_stride > row_stride) return ROW_FAST;
  const bool half_width = type == T_F16 || type == T_BF16;
  const bool word_aligned = ((first_byte | row_stride | batch_strides) & 3u) == 0u;
  return half_width && k_stride == 2u && word_aligned ? K_PAIRS : K_FAST;
}

// The two 16-bit values of a word, the first in its low half; the second is only decoded when
// it lies in the row.
vec2 decode_pair(uint word, uint type, bool second_in_row) {
  const float first = decode(word, 0u, type);
  return vec2(first, second_in_row ? decode(word, 2u, type) : 0.0);
}

uint word_of(uint slot, uint byte) {
  if (slot == 1u) return S0[byte >> 2];
  if (slot == 2u) return S1[byte >> 2];
  if (slot == 3u) return S2[byte >> 2];
  return S3[byte >> 2];
}

void clear_acc() {
  [[unroll]] for (uint i = 0; i < PER_THREAD; ++i)
    [[unroll]] for (uint j = 0; j < PER_THREAD; ++j) acc[i][j] = 0.0;
}

// Puts this thread's fetched values into the shared slices; the caller brackets it with
// barriers.
void stash(uint order_a, float a[PER_THREAD], uint order_b, float b[PER_THREAD]) {
  [[unroll]] for (uint r = 0; r < PER_THREAD; ++r) {
    const uvec2 sa = tile_slot(order_a, r);
    tile_a[sa.x * ROW_STRIDE + sa.y] = a[r];
    const uvec2 sb = tile_slot(order_b, r);
    tile_b[sb.x * ROW_STRIDE + sb.y] = b[r];
  }
}

// Adds the products of one step's shared slices to this thread's micro-tile.
void multiply_step() {
  const uint tx = thread_x(), ty = thread_y();
  [[unroll]] for (uint k = 0; k < STEP; ++k) {
    float a[PER_THREAD], b[PER_THREAD];
    [[unroll]] for (uint i = 0; i < PER_THREAD; ++i) a[i] = tile_a[k * ROW_STRIDE + tx + 16u * i];
    [[unroll]] for (uint j = 0; j < PER_THREAD; ++j) b[j] = tile_b[k * ROW_STRIDE + ty + 16u * j];
    [[unroll]] for (uint i = 0; i < PER_THREAD; ++i)
      [[unroll]] for (uint j = 0; j < PER_THREAD; ++j) acc[i][j] = fma(a[i], b[j], acc[i][j]);
  }
}

// The including shader defines these: the 4 values of A's (B's) slice at k0 .. k0 + 15 that
// tile_slot gives this thread, 0 outside the operand.
void fetch_a(uint k0, out float v[PER_THREAD]);
void fetch_b(uint k0, out float v[PER_THREAD]);

// Sums over k in [0, k_count) into acc for one output tile. The next step's values are
// fetched into registers while the current step multiplies, so global reads overlap
// arithmetic. Its barriers need every thread of the workgroup to call it alike: callers loop
// over tiles by workgroup id only.
void multiply_tile(uint k_count, uint order_a, uint order_b) {
  clear_acc();
  float next_a[PER_THREAD], next_b[PER_THREAD];
  fetch_a(0u, next_a);
  fetch_b(0u, next_b);
  for (uint k0 = 0u; k0 < k_count; k0 += STEP) {
    barrier();  // every thread is done reading the previous step (or tile)
    stash(order_a, next_a, order_b, next_b);
    barrier();
    if (k0 + STEP < k_count) {
      fetch_a(k0 + STEP, next_a);
      fetch_b(k0 + STEP, next_b);
    }
    multiply_step();
  }
}
