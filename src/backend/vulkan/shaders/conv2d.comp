// conv2d (tensor/ops/conv2d.h) as an implicit GEMM: out[pixel, oc] = sum_tap patch[tap, pixel]
// * w[tap, oc] + bias[oc], with pixel = (ox, oy, n) running over the whole batch and
// tap = (kx, ky, ic) in the weight's own order, so a contiguous weight is plain rows of taps.
// Patch values are read from x where they land (zero in the padding): no im2col buffer.
// A workgroup computes 64 pixels x 64 output channels of one group (gemm_tile.glsl: pixels
// are its A side, so neighbouring threads write neighbouring ox); the grid's x walks pixel
// tiles, y the groups' channel tiles.
#version 450
#include "common.glsl"
#include "gemm_tile.glsl"

const uint SLOT_X = 1u, SLOT_W = 2u, SLOT_BIAS = 3u;

// Node geometry, read once.
uint in_w, in_h, out_w, out_h, pixels;  // pixels: out_w * out_h * batch
int stride_x, stride_y, pad_x, pad_y, dilation_x, dilation_y;
uint kernel_w, kernel_h, taps;  // taps: kernel_w * kernel_h * input channels per group
uint x_type, w_type;
uvec4 x_nb, w_nb;  // byte strides, kept in registers rather than re-read from the node record
uint w_order;
bool w_flat;  // the taps of one output channel are consecutive elements

// The current tile.
uint pixel0, oc0, oc_end;  // oc_end: one past the group's last output channel
uint group_ic0;            // the group's first input channel
// Where this thread's patch pixel (tile row thread % 64, fixed for ROW_FAST fetches) reads.
bool fetch_pixel_inside;
int fetch_ix0, fetch_iy0;  // input position of tap (0, 0)
uint fetch_x_base;         // byte of x[0, 0, group_ic0, n]

uvec3 pixel_coords(uint p) {
  const uint rest = p / out_w;
  return uvec3(p % out_w, rest % out_h, rest / out_h);
}

void prepare_pixel_fetch() {
  const uint p = pixel0 + gl_LocalInvocationIndex % TILE;
  fetch_pixel_inside = p < pixels;
  const uvec3 c = pixel_coords(fetch_pixel_inside ? p : 0u);
  fetch_ix0 = int(c.x) * stride_x - pad_x;
  fetch_iy0 = int(c.y) * stride_y - pad_y;
  fetch_x_base = t_byte(SLOT_X, 0u, 0u, group_ic0, c.z);
}

// The patch values: zero outside the image (padding) and past the last tap.
void fetch_a(uint k0, out float v[PER_THREAD]) {
  [[unroll]] for (uint r = 0u; r < PER_THREAD; ++r) {
    const uint tap = k0 + tile_slot(ROW_FAST, r).x;
    v[r] = 0.0;
    if (!fetch_pixel_inside || tap >= taps) continue;
    const uint rest = tap / kernel_w;
    const int ix = fetch_ix0 + int(tap % kernel_w) * dilation_x;
    const int iy = fetch_iy0 + int(rest % kernel_h) * dilation_y;
    if (ix < 0 || ix >= int(in_w) || iy < 0 || iy >= int(in_h)) continue;
    const uint byte =
        fetch_x_base + uint(ix) * x_nb.x + uint(iy) * x_nb.y + (rest / kernel_h) * x_nb.z;
    v[r] = decode(S0[byte >> 2], byte, x_type);
  }
}

uint tap_offset(uint tap) {
  if (w_flat) return tap * w_nb.x;
  const uint rest = tap / kernel_w;
  return (tap % kernel_w) * w_nb.x + (rest % kernel_h) * w_nb.y + (rest / kernel_h) * w_nb.z;
}

void fetch_b(uint k0, out float v[PER_THREAD]) {
  const uint w_base = t_off(SLOT_W);
  [[unroll]] for (uint r = 0u; r < PER_THREAD; ++r) {
    const uvec2 at = tile_slot(w_order, r);
    const uint tap = k0 + at.x, oc = oc0 + at.y;
    const bool inside = tap < taps && oc < oc_end;
    if (w_order == K_PAIRS) {  // only for flat weights
      if (r % 2u == 1u) continue;  // the second value of the pair read for r - 1
      vec2 pair = vec2(0.0);
      if (inside)
        pair = decode_pair(S1[(w_base + oc * w_nb.w + tap * 2u) >> 2], w_type,
                           tap + 1u < taps);
      v[r] = pair.x;
      v[r + 1u] = pair.y;
    } else {
      v[r] = 0.0;
      if (inside) {
        const uint byte = w_base + oc * w_nb.w + tap_offset(tap);
        v[r] = decode(S1[byte >> 2], byte, w_type);
      }
    }
  }
}

// The output is f32 (conv2d's result type): plain word stores.
void store_tile(bool has_bias) {
  const uint tx = thread_x(), ty = thread_y();
  const uint oc_stride = t_nb(0, 2);
  float bias[PER_THREAD];
  [[unroll]] for (uint j = 0u; j < PER_THREAD; ++j) {
    const uint oc = oc0 + ty + 16u * j;
    bias[j] = 0.0;
    if (has_bias && oc < oc_end) bias[j] = load(SLOT_BIAS, uvec4(oc, 0u, 0u, 0u));
  }
  [[unroll]] for (uint i = 0u; i < PER_THREAD; ++i) {
    const uint p = pixel0 + tx + 16u * i;
    if (p >= pixels) continue;
    const uvec3 c = pixel_coords(p);
    const uint base = t_byte(0, c.x, c.y, 0u, c.z);
    [[unroll]] for (uint j = 0u; j < PER_THREAD; ++j) {
      const uint oc = oc0 + ty + 16u * j;
      if (oc < oc_end) D[(base + oc * oc_stride) >> 2] = floatBitsToUint(acc[i][j] + bias[j]);
    }
  }
}

void main() {
  in_w = t_ne(SLOT_X, 0);
  in_h = t_ne(SLOT_X, 1);
  out_w = t_ne(0, 0);
  out_h = t_ne(0, 1);
  pixels = out_w * out_h * t_ne(0, 3);
  stride_x = param_i(0);
  stride_y = param_i(1);
  pad_x = param_i(2);
  pad_y = param_i(3);
  dilation_x = param_i(4);
  dilation_y = param_i(5);
  const uint groups = uint(param_i(6));
  kernel_w = t_ne(SLOT_W, 0);
  kernel_h = t_ne(SLOT_W, 1);
  const uint ic_per_group = t_ne(SLOT_W, 2);
  const uint oc_per_group = t_ne(SLOT_W, 3) / groups;
  taps = kernel_w * kernel_h * ic_per_group;
  x_type = t_type(SLOT_X);
  w_type = t_type(SLOT_W);
  x_nb = uvec4(t_nb(SLOT_X, 0), t_nb(SLOT_X, 1), t_nb(SLOT_X, 2), t_nb(SLOT_X, 3));
  w_nb = uvec4(t_nb(SLOT_W, 0), t_nb(SLOT_W, 1), t_nb(SLOT_W, 2), t_nb(SLOT_W, 3));
  const uint w_elem = w_type == T_F32 ? 4u : 2u;
  w_flat = w_nb.x == w_elem && w_nb.y == kernel_w * w_elem &&
           w_nb.z == kernel_w * kernel_h * w_elem;
  w_order = w_flat ? fetch_order(w_type, t_off(SLOT_W), w_elem, w_nb.w, 0u) : K_FAST;
  const bool has_bias = (node_extra() & 1u) != 0u;

  const uint oc_tiles = (oc_per_group + TILE - 1u) / TILE;  // per group
  for (uint channel_tile = gl_WorkGroupID.y; channel_tile < groups * oc_tiles;
       channel_tile += gl_NumWorkGroups.y) {
    const uint g = channel_tile / oc_tiles;
    oc0 = g * oc_per_group + (channel_tile % oc_tiles) * TILE;
    oc_end = (g + 1u) * oc_per_group;
    group_ic0 = g * ic_per_group;
    for (uint pixel_tile = gl_WorkGroupID.x; pixel_tile * TILE < pixels;
         pixel_tile += gl_NumWorkGroups.x) {
      pixel0 = pixel_tile * TILE;
      prepare_pixel_fetch();
      multiply_tile(taps, ROW_FAST, w_order);
      store_tile(has_bias);
    }
  }
}
