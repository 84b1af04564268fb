// Rows of GGUF blocks (tensor/quant/blocks.h; the field offsets below are those structs'),
// decoded to the values tensor/quant/dequantize.cpp gives: same integer steps, same order of
// float products. Blocks are 18, 22, 34, 110, ... bytes, so a field may start at any byte:
// fields are read as bytes out of the 32-bit words, fp16 scales through unpackHalf2x16.
//
// The unit of decoding is a quad, 4 consecutive values from a multiple of 4. Every type
// keeps a quad's quants in 4 consecutive bytes of each of its arrays and under one scale
// (its sub-blocks are 16 or 32 values), so a quad costs one scale decode and one 4-byte read
// per array.
//
// Include after common.glsl.

// ShaderType codes (vulkan_node_params.h).
const uint T_Q4_0 = 4;
const uint T_Q4_1 = 5;
const uint T_Q5_0 = 6;
const uint T_Q5_1 = 7;
const uint T_Q8_0 = 8;
const uint T_Q2_K = 9;
const uint T_Q3_K = 10;
const uint T_Q4_K = 11;
const uint T_Q5_K = 12;
const uint T_Q6_K = 13;

bool is_block_type(uint type) { return type >= T_Q4_0 && type <= T_Q6_K; }

// Values per block: 32 for the legacy types, 256 for the K types' super-blocks.
uint block_values(uint type) { return type >= T_Q2_K ? 256u : 32u; }

uint block_bytes(uint type) {
  switch (type) {
    case T_Q4_0: return 18u;
    case T_Q4_1: return 20u;
    case T_Q5_0: return 22u;
    case T_Q5_1: return 24u;
    case T_Q8_0: return 34u;
    case T_Q2_K: return 84u;
    case T_Q3_K: return 110u;
    case T_Q4_K: return 144u;
    case T_Q5_K: return 176u;
  }
  return 210u;  // q6_K
}

// n (1 to 4) bytes at byte address b of slot k, little-endian, at any alignment. The next
// word is read only when the bytes reach into it, so nothing past them is touched.
uint read_bytes(uint k, uint b, uint n) {
  const uint shift = (b & 3u) * 8u;
  uint v = word_at(k, b >> 2) >> shift;
  if (shift + 8u * n > 32u) v |= word_at(k, (b >> 2) + 1u) << (32u - shift);
  return n == 4u ? v : v & ((1u << (8u * n)) - 1u);
}

uint read_u8(uint k, uint b) { return read_bytes(k, b, 1u); }
float read_f16(uint k, uint b) { return unpackHalf2x16(read_bytes(k, b, 2u)).x; }

// The 4 bytes at b as lanes, the first in x.
uvec4 read_quad(uint k, uint b) {
  return (uvec4(read_bytes(k, b, 4u)) >> uvec4(0u, 8u, 16u, 24u)) & 0xffu;
}

ivec4 sign_extend_bytes(uvec4 bytes) { return ivec4(bytes << 24) >> 24; }

// Legacy 4-bit quants j .. j + 3 of the block whose qs array starts at byte qs: value j is
// the low nibble of qs[j] (j < 16) or the high nibble of qs[j - 16].
uvec4 legacy_nibbles(uint k, uint qs, uint j) {
  const uvec4 bytes = read_quad(k, qs + j % 16u);
  return j < 16u ? bytes & 0xfu : bytes >> 4;
}

// Fifth bits of legacy values j .. j + 3 (bit j of the little-endian word qh), at bit 4.
uvec4 legacy_fifth_bits(uint k, uint qh, uint j) {
  const uvec4 bit = uvec4(j) + uvec4(0u, 1u, 2u, 3u);
  return ((uvec4(read_bytes(k, qh, 4u)) >> bit) & 1u) << 4;
}

// Two-bit fields of q2_K and q3_K: in each 128-value half, byte l of the 32-byte group
// holds values l, l + 32, l + 64, l + 96 at bit offsets 0, 2, 4, 6.
uvec4 two_bit_quants(uint k, uint qs, uint j) {
  const uint half_index = j / 128u, within = j % 128u;
  return (read_quad(k, qs + 32u * half_index + within % 32u) >> (2u * (within / 32u))) & 3u;
}

// Sub-block s's signed scale (sc - 32) of a q3_K block, as unpack_scale_q3_K: its low nibble
// is in byte s (s < 8) or the high half of byte s - 8, its top two bits in byte 8 + s % 4 at
// bit offset 2 (s / 4).
int q3_K_scale(uint k, uint scales, uint s) {
  const uint low = s < 8u ? read_u8(k, scales + s) & 0xfu : read_u8(k, scales + s - 8u) >> 4;
  const uint high = (read_u8(k, scales + 8u + s % 4u) >> (2u * (s / 4u))) & 3u;
  return int(low | (high << 4)) - 32;
}

// Sub-block s's 6-bit scale (x) and minimum (y) of a q4_K / q5_K block, as
// unpack_scale_min_k4: sub-blocks 0-3 whole in bytes s and s + 4, sub-blocks 4-7 with their
// low nibbles in byte s + 4 and their top two bits in bytes s - 4 (scale) and s (minimum).
uvec2 k4_scale_min(uint k, uint scales, uint s) {
  if (s < 4u) return uvec2(read_u8(k, scales + s) & 63u, read_u8(k, scales + s + 4u) & 63u);
  const uint low = read_u8(k, scales + s + 4u);
  return uvec2((low & 0xfu) | ((read_u8(k, scales + s - 4u) >> 6) << 4),
               (low >> 4) | ((read_u8(k, scales + s) >> 6) << 4));
}

// 4-bit quants j .. j + 3 of a q4_K / q5_K block: in 64-value groups g, byte l of
// qs[32 g ..] holds value 64 g + l (low nibble) and 64 g + 32 + l (high nibble).
uvec4 k4_nibbles(uint k, uint qs, uint j) {
  const uvec4 bytes = read_quad(k, qs + 32u * (j / 64u) + j % 32u);
  return j % 64u < 32u ? bytes & 0xfu : bytes >> 4;
}

// Values i .. i + 3 (i a multiple of 4) of the block row whose first byte is `row` in slot k.
vec4 dequant_quad(uint k, uint type, uint row, uint i) {
  const uint per_block = block_values(type);
  const uint b = row + (i / per_block) * block_bytes(type);  // the block's first byte
  const uint j = i % per_block;                              // the quad's first value in it
  switch (type) {
    case T_Q4_0: {  // d, qs[16]: d (q - 8)
      return vec4(ivec4(legacy_nibbles(k, b + 2u, j)) - 8) * read_f16(k, b);
    }
    case T_Q4_1: {  // d, m, qs[16]: d q + m
      const vec4 q = vec4(legacy_nibbles(k, b + 4u, j));
      return fma(q, vec4(read_f16(k, b)), vec4(read_f16(k, b + 2u)));
    }
    case T_Q5_0: {  // d, qh[4], qs[16]: d (q - 16)
      const uvec4 q = legacy_nibbles(k, b + 6u, j) | legacy_fifth_bits(k, b + 2u, j);
      return vec4(ivec4(q) - 16) * read_f16(k, b);
    }
    case T_Q5_1: {  // d, m, qh[4], qs[16]: d q + m
      const uvec4 q = legacy_nibbles(k, b + 8u, j) | legacy_fifth_bits(k, b + 4u, j);
      return fma(vec4(q), vec4(read_f16(k, b)), vec4(read_f16(k, b + 2u)));
    }
    case T_Q8_0: {  // d, qs[32] signed: d q
      return vec4(sign_extend_bytes(read_quad(k, b + 2u + j))) * read_f16(k, b);
    }
    case T_Q2_K: {  // scales[16], qs[64], d, dmin: (d sc) q - (dmin m), 16-value sub-blocks
      const uint sc = read_u8(k, b + j / 16u);
      const float dl = read_f16(k, b + 80u) * float(sc & 0xfu);
      const float ml = read_f16(k, b + 82u) * float(sc >> 4);
      return fma(vec4(two_bit_quants(k, b + 16u, j)), vec4(dl), vec4(-ml));
    }
    case T_Q3_K: {  // hmask[32], qs[64], scales[12], d: (d sc) (q - 4)
      const float dl = read_f16(k, b + 108u) * float(q3_K_scale(k, b + 96u, j / 16u));
      // The third bit of value j is bit j / 32 of hmask[j % 32].
      const uvec4 high = (read_quad(k, b + j % 32u) >> (j / 32u)) & 1u;
      const uvec4 q = two_bit_quants(k, b + 32u, j) | (high << 2);
      return vec4(ivec4(q) - 4) * dl;
    }
    case T_Q4_K: {  // d, dmin, scales[12], qs[128]: (d sc) q - (dmin m), 32-value sub-blocks
      const uvec2 sm = k4_scale_min(k, b + 4u, j / 32u);
      const float dl = read_f16(k, b) * float(sm.x);
      const float ml = read_f16(k, b + 2u) * float(sm.y);
      return fma(vec4(k4_nibbles(k, b + 16u, j)), vec4(dl), vec4(-ml));
    }
    case T_Q5_K: {  // d, dmin, scales[12], qh[32], qs[128]: as q4_K with 5-bit q
      const uvec2 sm = k4_scale_min(k, b + 4u, j / 32u);
      const float dl = read_f16(k, b) * float(sm.x);
      const float ml = read_f16(k, b + 2u) * float(sm.y);
      // The fifth bit of value j is bit j / 32 of qh[j % 32].
      const uvec4 fifth = (read_quad(k, b + 16u + j % 32u) >> (j / 32u)) & 1u;
      const uvec4 q = k4_nibbles(k, b + 48u, j) | (fifth << 4);
      return fma(vec4(q), vec4(dl), vec4(-ml));
    }
  }
  // q6_K: ql[128], qh[64], scales[16] signed, d: (d sc) (q - 32), 16-value sub-blocks. In
  // half h, value 32 s + l has its low four bits in ql[64 h + 32 (s % 2) + l] (the high
  // nibble for s >= 2) and its top two bits in qh[32 h + l] at bit offset 2 s.
  const uint h = j / 128u, s = j % 128u / 32u, l = j % 32u;
  const int sc = int(read_u8(k, b + 192u + j / 16u) << 24) >> 24;
  const float dl = read_f16(k, b + 208u) * float(sc);
  const uvec4 low_bytes = read_quad(k, b + 64u * h + 32u * (s % 2u) + l);
  const uvec4 low = s < 2u ? low_bytes & 0xfu : low_bytes >> 4;
  const uvec4 top = (read_quad(k, b + 128u + 32u * h + l) >> (2u * s)) & 3u;
  return vec4(ivec4(low | (top << 4)) - 32) * dl;
}

// Value i of the block row whose first byte is `row` in slot k.
float dequant_at(uint k, uint type, uint row, uint i) {
  return dequant_quad(k, type, row, i & ~3u)[i & 3u];
}
