#include "io/file_dtype.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "tensor/error.h"

namespace sd::io {

static_assert(std::endian::native == std::endian::little,
              "weight files are little-endian; a big-endian host needs byte swapping here");

namespace {

struct FileDTypeInfo {
  std::string_view name;
  size_t size;
  DType engine;
};

constexpr std::array<FileDTypeInfo, static_cast<size_t>(FileDType::Count)> kInfo = {{
    {"", 0, DType::F32},
    {"F64", 8, DType::F32},
    {"I64", 8, DType::I32},
    {"U64", 8, DType::I32},
    {"U32", 4, DType::I32},
    {"I16", 2, DType::I32},
    {"U16", 2, DType::I32},
    {"I8", 1, DType::I32},
    {"U8", 1, DType::I32},
    {"BOOL", 1, DType::I32},
    {"F8_E4M3", 1, DType::F16},
    {"F8_E5M2", 1, DType::F16},
}};

float e4m3_value(uint8_t v) {
  float sign = (v & 0x80) ? -1.0f : 1.0f;
  int e = (v >> 3) & 0xF;
  int m = v & 0x7;
  if (e == 0xF && m == 0x7) return std::numeric_limits<float>::quiet_NaN();
  if (e == 0) return sign * std::ldexp(static_cast<float>(m), -9);  // subnormal: m/8 * 2^-6
  return sign * std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7);
}

float e5m2_value(uint8_t v) {
  float sign = (v & 0x80) ? -1.0f : 1.0f;
  int e = (v >> 2) & 0x1F;
  int m = v & 0x3;
  if (e == 0x1F)
    return m == 0 ? sign * std::numeric_limits<float>::infinity()
                  : std::numeric_limits<float>::quiet_NaN();
  if (e == 0) return sign * std::ldexp(static_cast<float>(m), -16);  // subnormal: m/4 * 2^-14
  return sign * std::ldexp(1.0f + static_cast<float>(m) / 4.0f, e - 15);
}

// f16 bits of an E4M3 value; every E4M3 value is an f16 normal (or zero), so this is exact.
uint16_t e4m3_f16_bits(uint8_t v) {
  uint16_t sign = static_cast<uint16_t>((v & 0x80) << 8);
  int e = (v >> 3) & 0xF;
  int m = v & 0x7;
  if (e == 0xF && m == 0x7) return sign | 0x7E00;
  if (e == 0) {
    if (m == 0) return sign;
    // m * 2^-9 with m in 1..7: shift the leading one into the implicit bit.
    int exp = -9;
    while (m < 8) {
      m <<= 1;
      --exp;
    }
    // now value = (m/8) * 2^(exp+3) with m in 8..15
    return sign | static_cast<uint16_t>((exp + 3 + 15) << 10) | static_cast<uint16_t>((m & 7) << 7);
  }
  return sign | static_cast<uint16_t>((e - 7 + 15) << 10) | static_cast<uint16_t>(m << 7);
}

struct F8Tables {
  std::array<float, 256> e4m3_f32, e5m2_f32;
  std::array<uint16_t, 256> e4m3_f16;
  F8Tables() {
    for (int i = 0; i < 256; ++i) {
      auto v = static_cast<uint8_t>(i);
      e4m3_f32[i] = e4m3_value(v);
      e5m2_f32[i] = e5m2_value(v);
      e4m3_f16[i] = e4m3_f16_bits(v);
    }
  }
};

const F8Tables& f8_tables() {
  static const F8Tables tables;
  return tables;
}

template <typename T>
T load(const void* src, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const uint8_t*>(src) + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void ints_to_f32(const void* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load<T>(src, i));
}

template <typename T>
std::optional<size_t> ints_to_i32(const void* src, int32_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    T v = load<T>(src, i);
    if (!std::in_range<int32_t>(v)) return i;
    dst[i] = static_cast<int32_t>(v);
  }
  return std::nullopt;
}

}  // namespace

std::string_view file_dtype_name(FileDType t) {
  return kInfo[static_cast<size_t>(t)].name;
}
size_t file_dtype_size(FileDType t) {
  return kInfo[static_cast<size_t>(t)].size;
}
DType engine_dtype_for(FileDType t) {
  return kInfo[static_cast<size_t>(t)].engine;
}

float f8_e4m3_to_f32(uint8_t v) {
  return f8_tables().e4m3_f32[v];
}
float f8_e5m2_to_f32(uint8_t v) {
  return f8_tables().e5m2_f32[v];
}

void convert_to_f32(FileDType t, const void* src, float* dst, size_t n) {
  const auto* b = static_cast<const uint8_t*>(src);
  switch (t) {
    case FileDType::F64:
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load<double>(src, i));
      return;
    case FileDType::I64:
      return ints_to_f32<int64_t>(src, dst, n);
    case FileDType::U64:
      return ints_to_f32<uint64_t>(src, dst, n);
    case FileDType::U32:
      return ints_to_f32<uint32_t>(src, dst, n);
    case FileDType::I16:
      return ints_to_f32<int16_t>(src, dst, n);
    case FileDType::U16:
      return ints_to_f32<uint16_t>(src, dst, n);
    case FileDType::I8:
      return ints_to_f32<int8_t>(src, dst, n);
    case FileDType::U8:
      return ints_to_f32<uint8_t>(src, dst, n);
    case FileDType::Bool:
      for (size_t i = 0; i < n; ++i) dst[i] = b[i] != 0 ? 1.0f : 0.0f;
      return;
    case FileDType::F8_E4M3:
      for (size_t i = 0; i < n; ++i) dst[i] = f8_tables().e4m3_f32[b[i]];
      return;
    case FileDType::F8_E5M2:
      for (size_t i = 0; i < n; ++i) dst[i] = f8_tables().e5m2_f32[b[i]];
      return;
    case FileDType::None:
    case FileDType::Count:
      break;
  }
  fail("[convert_to_f32] file dtype %d needs no conversion or is unknown", static_cast<int>(t));
}

std::optional<size_t> convert_elements(FileDType t, const void* src, DType dst_type, void* dst,
                                       size_t n) {
  const auto* b = static_cast<const uint8_t*>(src);
  if (dst_type == DType::F32) {
    convert_to_f32(t, src, static_cast<float*>(dst), n);
    return std::nullopt;
  }
  if (dst_type == DType::F16 && (t == FileDType::F8_E4M3 || t == FileDType::F8_E5M2)) {
    auto* out = static_cast<uint16_t*>(dst);
    if (t == FileDType::F8_E4M3) {
      for (size_t i = 0; i < n; ++i) out[i] = f8_tables().e4m3_f16[b[i]];
    } else {
      // E5M2 is exactly the high byte of an IEEE half.
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint16_t>(b[i] << 8);
    }
    return std::nullopt;
  }
  if (dst_type == DType::I32) {
    auto* out = static_cast<int32_t*>(dst);
    switch (t) {
      case FileDType::I64:
        return ints_to_i32<int64_t>(src, out, n);
      case FileDType::U64:
        return ints_to_i32<uint64_t>(src, out, n);
      case FileDType::U32:
        return ints_to_i32<uint32_t>(src, out, n);
      case FileDType::I16:
        return ints_to_i32<int16_t>(src, out, n);
      case FileDType::U16:
        return ints_to_i32<uint16_t>(src, out, n);
      case FileDType::I8:
        return ints_to_i32<int8_t>(src, out, n);
      case FileDType::U8:
        return ints_to_i32<uint8_t>(src, out, n);
      case FileDType::Bool:
        for (size_t i = 0; i < n; ++i) out[i] = b[i] != 0 ? 1 : 0;
        return std::nullopt;
      default:
        break;
    }
  }
  fail("[convert_elements] cannot convert %s to %s (load it as f32)",
       std::string(file_dtype_name(t)).c_str(), std::string(dtype_name(dst_type)).c_str());
}

}  // namespace sd::io
