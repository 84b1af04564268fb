// Block-type rows as 8-bit codes for integer dot products. In every type read here each
// 32 values share one scale and one offset, x = scale * code + offset with codes 0..255,
// so a dot product with 8-bit activations runs on integer multiply-adds and applies the
// two per-block floats once per 32 products.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace sd {

// Values that share one scale and offset.
inline constexpr int kCodeBlock = 32;

// Whether `type` has that form exactly: q8_0, q4_0, q4_1, q5_0, q5_1, q4_K and q5_K.
// q2_K, q3_K and q6_K scale 16-value sub-blocks, which this form does not hold.
bool has_block_codes(DType type);

// The integer z with offset == -z * scale in every block of `type` (q8_0 128, q4_0 8,
// q5_0 16): the offset then folds into the integer sum. -1 where offsets are their own
// floats (q4_1, q5_1, q4_K, q5_K).
int block_code_zero_point(DType type);

// Decodes `n` values of `type` at `src` (n a multiple of the type's block size) into
// n codes, n / 32 scales and, where the type has no zero point, n / 32 offsets (`offset`
// is not written otherwise and may be null).
void decode_block_codes(DType type, const void* src, int64_t n, uint8_t* codes, float* scale,
                        float* offset);

}  // namespace sd
