// A 16x16 transpose of 32-bit units in AVX-512 registers, for kernels compiled for that
// target (the caller's target must include avx512f).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

namespace sd {

// r[i][j] becomes r[j][i]: pairs of rows interleaved per 128-bit lane, then pairs of
// pairs, then the lanes gathered across registers.
__attribute__((target("avx512f"))) inline void transpose16x16(__m512i r[16]) {
  __m512i u[16], v[16];
  for (int i = 0; i < 8; ++i) {
    u[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    u[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {  // lane l of v[4i + c]: rows 4i..4i+3 of column 4l + c
    v[4 * i] = _mm512_unpacklo_epi64(u[4 * i], u[4 * i + 2]);
    v[4 * i + 1] = _mm512_unpackhi_epi64(u[4 * i], u[4 * i + 2]);
    v[4 * i + 2] = _mm512_unpacklo_epi64(u[4 * i + 1], u[4 * i + 3]);
    v[4 * i + 3] = _mm512_unpackhi_epi64(u[4 * i + 1], u[4 * i + 3]);
  }
  for (int c = 0; c < 4; ++c) {  // column 4l + c: lane l of v[c], v[4+c], v[8+c], v[12+c]
    const __m512i w0 = _mm512_shuffle_i32x4(v[c], v[4 + c], 0x44);
    const __m512i w1 = _mm512_shuffle_i32x4(v[c], v[4 + c], 0xEE);
    const __m512i w2 = _mm512_shuffle_i32x4(v[8 + c], v[12 + c], 0x44);
    const __m512i w3 = _mm512_shuffle_i32x4(v[8 + c], v[12 + c], 0xEE);
    r[c] = _mm512_shuffle_i32x4(w0, w2, 0x88);
    r[4 + c] = _mm512_shuffle_i32x4(w0, w2, 0xDD);
    r[8 + c] = _mm512_shuffle_i32x4(w1, w3, 0x88);
    r[12 + c] = _mm512_shuffle_i32x4(w1, w3, 0xDD);
  }
}

}  // namespace sd
#endif
