// What every shader shares: the node record (vulkan_node_params.h, 68 words per node), the
// tensor bindings, and dtype-generic element access by byte address, as the engine's
// reference kernels read tensors (tensor/ops/access.h). Buffers are arrays of 32-bit words;
// 16-bit elements are half a word.
#extension GL_EXT_control_flow_attributes : enable

layout(std430, set = 0, binding = 0) readonly buffer Params { uint P[]; };
layout(std430, set = 0, binding = 1) buffer Dst { uint D[]; };
layout(std430, set = 0, binding = 2) readonly buffer Src0 { uint S0[]; };
layout(std430, set = 0, binding = 3) readonly buffer Src1 { uint S1[]; };
layout(std430, set = 0, binding = 4) readonly buffer Src2 { uint S2[]; };
layout(std430, set = 0, binding = 5) readonly buffer Src3 { uint S3[]; };
layout(push_constant) uniform Push { uint node; } push;

const uint NODE_WORDS = 68;
const uint T_F32 = 0;
const uint T_F16 = 1;
const uint T_BF16 = 2;
const uint T_I32 = 3;

// Tensor slots: 0 the output, 1..4 the sources.
uint node_base() { return push.node * NODE_WORDS; }
uint t_off(uint k) { return P[node_base() + k * 10]; }
uint t_type(uint k) { return P[node_base() + k * 10 + 1]; }
uint t_ne(uint k, uint d) { return P[node_base() + k * 10 + 2 + d]; }
uint t_nb(uint k, uint d) { return P[node_base() + k * 10 + 6 + d]; }
uint t_count(uint k) { return t_ne(k, 0) * t_ne(k, 1) * t_ne(k, 2) * t_ne(k, 3); }
int param_i(uint i) { return int(P[node_base() + 50 + i]); }
float param_f(uint i) { return uintBitsToFloat(P[node_base() + 50 + i]); }
uint node_op() { return P[node_base() + 66]; }
uint node_extra() { return P[node_base() + 67]; }

uint t_byte(uint k, uint i0, uint i1, uint i2, uint i3) {
  return t_off(k) + i0 * t_nb(k, 0) + i1 * t_nb(k, 1) + i2 * t_nb(k, 2) + i3 * t_nb(k, 3);
}
uvec4 t_unravel(uint k, uint n) {
  uvec4 i;
  i.x = n % t_ne(k, 0);
  n /= t_ne(k, 0);
  i.y = n % t_ne(k, 1);
  n /= t_ne(k, 1);
  i.z = n % t_ne(k, 2);
  i.w = n / t_ne(k, 2);
  return i;
}
// An index of the output read from a source that broadcasts (ne 1) along some dimensions.
uvec4 t_bcast(uint k, uvec4 i) {
  return uvec4(t_ne(k, 0) == 1 ? 0 : i.x, t_ne(k, 1) == 1 ? 0 : i.y, t_ne(k, 2) == 1 ? 0 : i.z,
               t_ne(k, 3) == 1 ? 0 : i.w);
}

float decode(uint word, uint byte_address, uint type) {
  if (type == T_F32) return uintBitsToFloat(word);
  if (type == T_I32) return float(int(word));
  const uint half_bits = (byte_address & 2u) != 0u ? word >> 16 : word & 0xffffu;
  if (type == T_F16) return unpackHalf2x16(half_bits).x;
  return uintBitsToFloat(half_bits << 16);  // bf16
}

// Word w of slot k's binding.
uint word_at(uint k, uint w) {
  if (k == 1) return S0[w];
  if (k == 2) return S1[w];
  if (k == 3) return S2[w];
  if (k == 4) return S3[w];
  return D[w];
}

float load_at(uint k, uint b) { return decode(word_at(k, b >> 2), b, t_type(k)); }
float load(uint k, uvec4 i) { return load_at(k, t_byte(k, i.x, i.y, i.z, i.w)); }
int load_i32(uint k, uvec4 i) {
  const uint b = t_byte(k, i.x, i.y, i.z, i.w);
  if (k == 1) return int(S0[b >> 2]);
  if (k == 2) return int(S1[b >> 2]);
  if (k == 3) return int(S2[b >> 2]);
  return int(S3[b >> 2]);
}

// f32 to bf16 as the engine rounds it (tensor/float16.h): to nearest even, NaN kept quiet.
uint bf16_bits(float v) {
  const uint u = floatBitsToUint(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 64u;
  return (u + (0x7fffu + ((u >> 16) & 1u))) >> 16;
}

// Two threads may write the two halves of one word: 16-bit stores go through atomics.
void store_at(uint b, float v) {
  const uint type = t_type(0);
  if (type == T_F32) {
    D[b >> 2] = floatBitsToUint(v);
  } else if (type == T_I32) {
    D[b >> 2] = uint(int(v));
  } else {
    const uint bits = type == T_F16 ? packHalf2x16(vec2(v, 0.0)) & 0xffffu : bf16_bits(v);
    const uint shift = (b & 2u) * 8u;
    atomicAnd(D[b >> 2], ~(0xffffu << shift));
    atomicOr(D[b >> 2], bits << shift);
  }
}
void store(uvec4 i, float v) { store_at(t_byte(0, i.x, i.y, i.z, i.w), v); }

// Elementwise shaders visit every output element with a grid-stride loop: the backend
// caps the dispatch at 65535 groups.
#define FOR_EACH_OUTPUT(idx)                                                       \
  for (uint idx = gl_GlobalInvocationID.x; idx < t_count(0);                      \
       idx += gl_NumWorkGroups.x * gl_WorkGroupSize.x)
