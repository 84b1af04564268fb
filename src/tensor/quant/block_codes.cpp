#include "tensor/quant/block_codes.h"

#include <cstring>

#include "tensor/float16.h"
#include "tensor/quant/blocks.h"

namespace sd {

namespace {

using namespace quant;

// Legacy types: byte j holds value j (low nibble) and value j + 16 (high nibble).
void split_nibbles(const uint8_t* qs, uint8_t* codes) {
  for (int j = 0; j < 16; ++j) {
    codes[j] = qs[j] & 0xF;
    codes[j + 16] = qs[j] >> 4;
  }
}

// The fifth bit of value j is bit j of qh.
void add_fifth_bits(const uint8_t* qh, uint8_t* codes) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  for (int j = 0; j < 32; ++j) codes[j] |= static_cast<uint8_t>(((bits >> j) & 1) << 4);
}

void decode_q8_0(const BlockQ8_0* x, int64_t nb, uint8_t* codes, float* scale) {
  for (int64_t i = 0; i < nb; ++i, codes += 32) {
    scale[i] = fp16_to_f32(x[i].d);
    for (int j = 0; j < 32; ++j) codes[j] = static_cast<uint8_t>(x[i].qs[j] + 128);
  }
}

// q4_0, q4_1, q5_0, q5_1: nibbles, a fifth bit where the block has qh, an offset where it
// has a minimum m (the *_0 types' offsets are their zero points).
template <typename Block>
void decode_legacy(const Block* x, int64_t nb, uint8_t* codes, float* scale, float* offset) {
  for (int64_t i = 0; i < nb; ++i, codes += 32) {
    scale[i] = fp16_to_f32(x[i].d);
    if constexpr (requires { x[i].m; }) offset[i] = fp16_to_f32(x[i].m);
    split_nibbles(x[i].qs, codes);
    if constexpr (requires { x[i].qh; }) add_fifth_bits(x[i].qh, codes);
  }
}

// q4_K and q5_K: sub-block j of a super-block has scale d * sc_j and offset -dmin * m_j.
void k4_scales(uint16_t d16, uint16_t dmin16, const uint8_t* packed, float* scale, float* offset) {
  const float d = fp16_to_f32(d16), dmin = fp16_to_f32(dmin16);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    unpack_scale_min_k4(j, packed, &sc, &m);
    scale[j] = d * static_cast<float>(sc);
    offset[j] = -dmin * static_cast<float>(m);
  }
}

// Nibbles of q4_K/q5_K: byte l of 32-byte group g holds value 64g + l (low) and
// 64g + 32 + l (high).
void split_k_nibbles(const uint8_t* qs, uint8_t* codes) {
  for (int g = 0; g < 4; ++g, qs += 32, codes += 64) {
    for (int l = 0; l < 32; ++l) {
      codes[l] = qs[l] & 0xF;
      codes[l + 32] = qs[l] >> 4;
    }
  }
}

void decode_q4_K(const BlockQ4_K* x, int64_t nb, uint8_t* codes, float* scale, float* offset) {
  for (int64_t i = 0; i < nb; ++i, codes += 256, scale += 8, offset += 8) {
    k4_scales(x[i].d, x[i].dmin, x[i].scales, scale, offset);
    split_k_nibbles(x[i].qs, codes);
  }
}

// q5_K's fifth bit of value 64g + l is bit 2g of qh[l], of value 64g + 32 + l bit 2g + 1.
void decode_q5_K(const BlockQ5_K* x, int64_t nb, uint8_t* codes, float* scale, float* offset) {
  for (int64_t i = 0; i < nb; ++i, codes += 256, scale += 8, offset += 8) {
    k4_scales(x[i].d, x[i].dmin, x[i].scales, scale, offset);
    split_k_nibbles(x[i].qs, codes);
    for (int g = 0; g < 4; ++g)
      for (int l = 0; l < 32; ++l) {
        codes[64 * g + l] |= static_cast<uint8_t>(((x[i].qh[l] >> (2 * g)) & 1) << 4);
        codes[64 * g + 32 + l] |= static_cast<uint8_t>(((x[i].qh[l] >> (2 * g + 1)) & 1) << 4);
      }
  }
}

}  // namespace

bool has_block_codes(DType type) {
  switch (type) {
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K:
      return true;
    default:
      return false;
  }
}

int block_code_zero_point(DType type) {
  switch (type) {
    case DType::Q8_0:
      return 128;
    case DType::Q4_0:
      return 8;
    case DType::Q5_0:
      return 16;
    default:
      return -1;
  }
}

void decode_block_codes(DType type, const void* src, int64_t n, uint8_t* codes, float* scale,
                        float* offset) {
  const int64_t nb = n / block_size(type);
  switch (type) {
    case DType::Q8_0:
      return decode_q8_0(static_cast<const BlockQ8_0*>(src), nb, codes, scale);
    case DType::Q4_0:
      return decode_legacy(static_cast<const BlockQ4_0*>(src), nb, codes, scale, offset);
    case DType::Q4_1:
      return decode_legacy(static_cast<const BlockQ4_1*>(src), nb, codes, scale, offset);
    case DType::Q5_0:
      return decode_legacy(static_cast<const BlockQ5_0*>(src), nb, codes, scale, offset);
    case DType::Q5_1:
      return decode_legacy(static_cast<const BlockQ5_1*>(src), nb, codes, scale, offset);
    case DType::Q4_K:
      return decode_q4_K(static_cast<const BlockQ4_K*>(src), nb, codes, scale, offset);
    case DType::Q5_K:
      return decode_q5_K(static_cast<const BlockQ5_K*>(src), nb, codes, scale, offset);
    default:
      return;
  }
}

}  // namespace sd
