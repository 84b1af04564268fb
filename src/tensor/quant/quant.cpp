// quant.h's entry points: argument checks, dispatch by dtype to the row kernels, and the
// row-parallel loop.
#include "tensor/quant/quant.h"

#include <cstring>

#include "tensor/error.h"
#include "tensor/quant/kernels.h"

namespace sd {

namespace {

using namespace quant;

// Every block struct must have the size dtype.cpp reports, or rows would be misread.
void check_block_sizes_once() {
  static const bool ok = [] {
    auto same = [](DType t, size_t bytes) { return type_size(t) == bytes; };
    return same(DType::Q4_0, sizeof(BlockQ4_0)) && same(DType::Q4_1, sizeof(BlockQ4_1)) &&
           same(DType::Q5_0, sizeof(BlockQ5_0)) && same(DType::Q5_1, sizeof(BlockQ5_1)) &&
           same(DType::Q8_0, sizeof(BlockQ8_0)) && same(DType::Q2_K, sizeof(BlockQ2_K)) &&
           same(DType::Q3_K, sizeof(BlockQ3_K)) && same(DType::Q4_K, sizeof(BlockQ4_K)) &&
           same(DType::Q5_K, sizeof(BlockQ5_K)) && same(DType::Q6_K, sizeof(BlockQ6_K)) &&
           same(DType::Q8_K, sizeof(BlockQ8_K));
  }();
  if (!ok) fail("[quantize] internal error: block structs disagree with dtype_info sizes");
}

// Validates (type, n) for a row conversion; `what` names the entry point in the message.
void check_row(const char* what, DType type, int64_t n) {
  if (static_cast<size_t>(type) >= static_cast<size_t>(DType::Count)) {
    fail("[quantize] %s: invalid dtype id %d", what, static_cast<int>(type));
  }
  if (type == DType::I32) {
    fail("[quantize] %s: i32 is an integer type and has no float conversion", what);
  }
  if (n < 0) fail("[quantize] %s: negative element count %lld", what, static_cast<long long>(n));
  const int64_t bs = block_size(type);
  if (n % bs != 0) {
    fail("[quantize] %s: %lld values is not a multiple of %s's block size %lld", what,
         static_cast<long long>(n), dtype_name(type).data(), static_cast<long long>(bs));
  }
  check_block_sizes_once();
}

template <typename Block>
const Block* blocks(const void* p) {
  return static_cast<const Block*>(p);
}
template <typename Block>
Block* blocks(void* p) {
  return static_cast<Block*>(p);
}

// Converts after check_row succeeded.
void quantize_unchecked(DType type, const float* src, void* dst, int64_t n) {
  const int64_t nb = n / block_size(type);
  switch (type) {
    case DType::F32:
      if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16:
      return convert_f32_to_f16(src, static_cast<uint16_t*>(dst), n);
    case DType::BF16:
      return convert_f32_to_bf16(src, static_cast<uint16_t*>(dst), n);
    case DType::Q4_0:
      return quantize_q4_0(src, blocks<BlockQ4_0>(dst), nb);
    case DType::Q4_1:
      return quantize_q4_1(src, blocks<BlockQ4_1>(dst), nb);
    case DType::Q5_0:
      return quantize_q5_0(src, blocks<BlockQ5_0>(dst), nb);
    case DType::Q5_1:
      return quantize_q5_1(src, blocks<BlockQ5_1>(dst), nb);
    case DType::Q8_0:
      return quantize_q8_0(src, blocks<BlockQ8_0>(dst), nb);
    case DType::Q2_K:
      return quantize_q2_K(src, blocks<BlockQ2_K>(dst), nb);
    case DType::Q3_K:
      return quantize_q3_K(src, blocks<BlockQ3_K>(dst), nb);
    case DType::Q4_K:
      return quantize_q4_K(src, blocks<BlockQ4_K>(dst), nb);
    case DType::Q5_K:
      return quantize_q5_K(src, blocks<BlockQ5_K>(dst), nb);
    case DType::Q6_K:
      return quantize_q6_K(src, blocks<BlockQ6_K>(dst), nb);
    case DType::Q8_K:
      return quantize_q8_K(src, blocks<BlockQ8_K>(dst), nb);
    case DType::I32:
    case DType::Count:
      break;
  }
}

// Quantizes one row with importance weights; types without a weighted algorithm fall back
// to the plain one.
void quantize_weighted_unchecked(DType type, const float* src, void* dst, int64_t n,
                                 const float* imatrix) {
  const int64_t nb = n / block_size(type);
  switch (type) {
    case DType::Q4_0:
      return quantize_q4_0_weighted(src, blocks<BlockQ4_0>(dst), nb, imatrix);
    case DType::Q4_1:
      return quantize_q4_1_weighted(src, blocks<BlockQ4_1>(dst), nb, imatrix);
    case DType::Q5_0:
      return quantize_q5_0_weighted(src, blocks<BlockQ5_0>(dst), nb, imatrix);
    case DType::Q5_1:
      return quantize_q5_1_weighted(src, blocks<BlockQ5_1>(dst), nb, imatrix);
    case DType::Q2_K:
      return quantize_q2_K_weighted(src, blocks<BlockQ2_K>(dst), nb, imatrix);
    case DType::Q3_K:
      return quantize_q3_K_weighted(src, blocks<BlockQ3_K>(dst), nb, imatrix);
    case DType::Q4_K:
      return quantize_q4_K_weighted(src, blocks<BlockQ4_K>(dst), nb, imatrix);
    case DType::Q5_K:
      return quantize_q5_K_weighted(src, blocks<BlockQ5_K>(dst), nb, imatrix);
    case DType::Q6_K:
      return quantize_q6_K_weighted(src, blocks<BlockQ6_K>(dst), nb, imatrix);
    default:
      return quantize_unchecked(type, src, dst, n);
  }
}

}  // namespace

void dequantize_row(DType type, const void* src, float* dst, int64_t n) {
  check_row("dequantize_row", type, n);
  const int64_t nb = n / block_size(type);
  switch (type) {
    case DType::F32:
      if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16:
      return dequantize_f16(static_cast<const uint16_t*>(src), dst, n);
    case DType::BF16:
      return dequantize_bf16(static_cast<const uint16_t*>(src), dst, n);
    case DType::Q4_0:
      return dequantize_q4_0(blocks<BlockQ4_0>(src), dst, nb);
    case DType::Q4_1:
      return dequantize_q4_1(blocks<BlockQ4_1>(src), dst, nb);
    case DType::Q5_0:
      return dequantize_q5_0(blocks<BlockQ5_0>(src), dst, nb);
    case DType::Q5_1:
      return dequantize_q5_1(blocks<BlockQ5_1>(src), dst, nb);
    case DType::Q8_0:
      return dequantize_q8_0(blocks<BlockQ8_0>(src), dst, nb);
    case DType::Q2_K:
      return dequantize_q2_K(blocks<BlockQ2_K>(src), dst, nb);
    case DType::Q3_K:
      return dequantize_q3_K(blocks<BlockQ3_K>(src), dst, nb);
    case DType::Q4_K:
      return dequantize_q4_K(blocks<BlockQ4_K>(src), dst, nb);
    case DType::Q5_K:
      return dequantize_q5_K(blocks<BlockQ5_K>(src), dst, nb);
    case DType::Q6_K:
      return dequantize_q6_K(blocks<BlockQ6_K>(src), dst, nb);
    case DType::Q8_K:
      return dequantize_q8_K(blocks<BlockQ8_K>(src), dst, nb);
    case DType::I32:
    case DType::Count:
      break;
  }
}

void quantize_row(DType type, const float* src, void* dst, int64_t n) {
  check_row("quantize_row", type, n);
  quantize_unchecked(type, src, dst, n);
}

size_t quantize_rows(DType type, const float* src, void* dst, int64_t nrows, int64_t n_per_row) {
  return quantize_rows(type, src, dst, nrows, n_per_row, nullptr);
}

size_t quantize_rows(DType type, const float* src, void* dst, int64_t nrows, int64_t n_per_row,
                     const float* imatrix) {
  check_row("quantize_rows", type, n_per_row);
  if (nrows < 0) {
    fail("[quantize] quantize_rows: negative row count %lld", static_cast<long long>(nrows));
  }
  const size_t out_row = row_size(type, n_per_row);
  auto* out = static_cast<uint8_t*>(dst);
  // Rows are independent and the kernels do not throw (all checks are above), so the
  // parallel loop cannot leak an exception out of the OpenMP region.
#pragma omp parallel for schedule(static) if (nrows > 1)
  for (int64_t r = 0; r < nrows; ++r) {
    const float* x = src + r * n_per_row;
    void* y = out + static_cast<size_t>(r) * out_row;
    if (imatrix != nullptr) {
      quantize_weighted_unchecked(type, x, y, n_per_row, imatrix);
    } else {
      quantize_unchecked(type, x, y, n_per_row);
    }
  }
  return static_cast<size_t>(nrows) * out_row;
}

}  // namespace sd
