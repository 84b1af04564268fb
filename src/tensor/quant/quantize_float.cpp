// f32 -> f16 row conversion, round-to-nearest-even as the GGUF reference writes it (F16C);
// bf16's is round_bf16.cpp.
#include <immintrin.h>

#include "tensor/float16.h"
#include "tensor/quant/kernels.h"

namespace sd::quant {

void convert_f32_to_f16(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  // sd_tensor is built with -mf16c (which implies AVX): 8 values per instruction.
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; i < n; ++i) y[i] = f32_to_fp16(x[i]);
}

}  // namespace sd::quant
