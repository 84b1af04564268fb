// Byte layouts of the GGUF block types. Field order and sizes follow the GGUF
// specification (ggml's block_q*_* structs), so a block can be read straight out of a
// weight file; the static_asserts tie each struct to the size dtype.cpp reports.
//
// Scales are IEEE half floats stored as raw bits (uint16_t). Every struct has alignment
// 1 or 2 and no padding, so rows of blocks are densely packed.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace sd::quant {

// Elements per block of the legacy types and per super-block of the K types.
inline constexpr int kLegacyBlock = 32;
inline constexpr int kSuperBlock = 256;

// --- Legacy types: 32 values, one scale (and for *_1 a minimum) per block. ----------------
// Nibble order: byte j holds value j in its low half and value j + 16 in its high half.

struct BlockQ4_0 {
  uint16_t d;                    // scale: x = d * (q - 8)
  uint8_t qs[kLegacyBlock / 2];  // 4-bit quants
};

struct BlockQ4_1 {
  uint16_t d;  // scale: x = d * q + m
  uint16_t m;  // minimum
  uint8_t qs[kLegacyBlock / 2];
};

// The fifth bit of value j is bit j of the little-endian 32-bit word qh.
struct BlockQ5_0 {
  uint16_t d;  // x = d * (q - 16)
  uint8_t qh[4];
  uint8_t qs[kLegacyBlock / 2];
};

struct BlockQ5_1 {
  uint16_t d;  // x = d * q + m
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kLegacyBlock / 2];
};

struct BlockQ8_0 {
  uint16_t d;  // x = d * q
  int8_t qs[kLegacyBlock];
};

// --- K types: super-blocks of 256 values split into sub-blocks of 16 or 32. ---------------
// Two-bit fields (q2_K, q3_K low bits) are packed in 128-value halves: byte l of a 32-byte
// group holds values l, l + 32, l + 64, l + 96 at bit offsets 0, 2, 4, 6.

// 16 sub-blocks of 16: x = d * sc * q - dmin * m, with 4-bit sc (low nibble of scales[j])
// and 4-bit m (high nibble).
struct BlockQ2_K {
  uint8_t scales[kSuperBlock / 16];
  uint8_t qs[kSuperBlock / 4];
  uint16_t d;
  uint16_t dmin;
};

// 16 sub-blocks of 16: x = d * (sc - 32) * (q - 4). The third bit of value j is bit j / 32
// of hmask[j % 32]; the 6-bit scales are packed into 12 bytes (see unpack_scale_q3_K).
struct BlockQ3_K {
  uint8_t hmask[kSuperBlock / 8];
  uint8_t qs[kSuperBlock / 4];
  uint8_t scales[12];
  uint16_t d;
};

// 8 sub-blocks of 32: x = d * sc * q - dmin * m with 6-bit sc and m packed into 12 bytes
// (see unpack_scale_min_k4 below). Nibbles: 64-value groups,
// byte l of group g holds value 64g + l (low) and 64g + 32 + l (high).
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[kSuperBlock / 2];
};

// As q4_K plus a fifth bit: value 64g + l has it in bit 2g of qh[l], value 64g + 32 + l in
// bit 2g + 1.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[kSuperBlock / 8];
  uint8_t qs[kSuperBlock / 2];
};

// 16 sub-blocks of 16: x = d * sc * (q - 32) with signed 8-bit sc. In each 128-value half,
// ql[l] holds values l (low) and l + 64 (high), ql[l + 32] holds l + 32 and l + 96, and
// qh[l] holds the top two bits of l, l + 32, l + 64, l + 96 at offsets 0, 2, 4, 6.
struct BlockQ6_K {
  uint8_t ql[kSuperBlock / 2];
  uint8_t qh[kSuperBlock / 4];
  int8_t scales[kSuperBlock / 16];
  uint16_t d;
};

// Activation type of K-quant dot products: x = d * q, with f32 d and the sums of each
// 16 quants precomputed.
struct BlockQ8_K {
  float d;
  int8_t qs[kSuperBlock];
  int16_t bsums[kSuperBlock / 16];
};

// Sub-block j's signed scale (sc - 32) of a q3_K block. The low nibble of sub-block j is
// in byte j (j < 8, low half) or byte j - 8 (high half); its top two bits are in byte
// 8 + j % 4 at bit offset 2 * (j / 4).
inline int unpack_scale_q3_K(int j, const uint8_t* scales) {
  const int low = j < 8 ? scales[j] & 0xF : scales[j - 8] >> 4;
  const int high = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// Sub-block j's 6-bit scale and minimum of a q4_K / q5_K block. Sub-blocks 0-3 keep them
// whole in bytes j and j + 4; sub-blocks 4-7 keep their low nibbles in byte j + 4 and
// their top two bits in the spare top bits of bytes j - 4 (scale) and j (minimum).
inline void unpack_scale_min_k4(int j, const uint8_t* scales, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

// The inverse of unpack_scale_min_k4 for sc, m < 64. Sub-blocks must be packed in order
// 0..7: 0-3 assign bytes 0-7 whole, 4-7 add their top bits to them.
inline void pack_scale_min_k4(int j, uint8_t sc, uint8_t m, uint8_t* scales) {
  if (j < 4) {
    scales[j] = sc;
    scales[j + 4] = m;
  } else {
    scales[j + 4] = static_cast<uint8_t>((sc & 0xF) | ((m & 0xF) << 4));
    scales[j - 4] |= static_cast<uint8_t>((sc >> 4) << 6);
    scales[j] |= static_cast<uint8_t>((m >> 4) << 6);
  }
}

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);

// Maps a dtype to its block struct, so dispatch code and tests can check sizes against
// dtype_info() in one place.
template <DType T>
struct BlockOf;
template <>
struct BlockOf<DType::Q4_0> {
  using type = BlockQ4_0;
};
template <>
struct BlockOf<DType::Q4_1> {
  using type = BlockQ4_1;
};
template <>
struct BlockOf<DType::Q5_0> {
  using type = BlockQ5_0;
};
template <>
struct BlockOf<DType::Q5_1> {
  using type = BlockQ5_1;
};
template <>
struct BlockOf<DType::Q8_0> {
  using type = BlockQ8_0;
};
template <>
struct BlockOf<DType::Q2_K> {
  using type = BlockQ2_K;
};
template <>
struct BlockOf<DType::Q3_K> {
  using type = BlockQ3_K;
};
template <>
struct BlockOf<DType::Q4_K> {
  using type = BlockQ4_K;
};
template <>
struct BlockOf<DType::Q5_K> {
  using type = BlockQ5_K;
};
template <>
struct BlockOf<DType::Q6_K> {
  using type = BlockQ6_K;
};
template <>
struct BlockOf<DType::Q8_K> {
  using type = BlockQ8_K;
};

}  // namespace sd::quant
