// A GGUF metadata value: one of the thirteen GGUF value types, arrays (of arrays) included.
// Numbers keep their GGUF type so a file read and written again is byte-identical.
// Arrays of numbers are kept as their packed little-endian bytes: a tokenizer's 150k
// token types cost 150 KB, not a value object each.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

namespace sd::io {

// Type ids as stored in GGUF files.
enum class GgufType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};

std::string_view gguf_type_name(GgufType t);
// Null for ids beyond F64.
std::optional<GgufType> gguf_type_from_id(uint32_t id);
// Bytes of a scalar in the file; 0 for String and Array.
size_t gguf_scalar_size(GgufType t);

class GgufValue {
 public:
  GgufValue() : GgufValue(GgufType::U8, uint64_t{0}) {}

  static GgufValue u8(uint8_t v) { return {GgufType::U8, uint64_t{v}}; }
  static GgufValue i8(int8_t v) { return {GgufType::I8, int64_t{v}}; }
  static GgufValue u16(uint16_t v) { return {GgufType::U16, uint64_t{v}}; }
  static GgufValue i16(int16_t v) { return {GgufType::I16, int64_t{v}}; }
  static GgufValue u32(uint32_t v) { return {GgufType::U32, uint64_t{v}}; }
  static GgufValue i32(int32_t v) { return {GgufType::I32, int64_t{v}}; }
  static GgufValue u64(uint64_t v) { return {GgufType::U64, v}; }
  static GgufValue i64(int64_t v) { return {GgufType::I64, v}; }
  static GgufValue f32(float v) { return {GgufType::F32, v}; }
  static GgufValue f64(double v) { return {GgufType::F64, v}; }
  static GgufValue boolean(bool v) { return {GgufType::Bool, v}; }
  static GgufValue string(std::string v) { return {GgufType::String, std::move(v)}; }

  // Every item must have type `elem_type` (throws sd::Error otherwise); nested arrays may
  // differ in their own element types, as GGUF allows.
  static GgufValue array(GgufType elem_type, std::vector<GgufValue> items);
  static GgufValue string_array(const std::vector<std::string>& items);
  // `count` scalars of type `elem_type`, packed little-endian as in a GGUF file.
  static GgufValue packed_array(GgufType elem_type, const void* data, size_t count);
  template <typename T>
  static GgufValue numeric_array(const std::vector<T>& v) {
    return packed_array(type_of<T>(), v.data(), v.size());
  }
  // A scalar of type `t` from its little-endian bytes (gguf_scalar_size(t) of them).
  static GgufValue scalar_from_bytes(GgufType t, const uint8_t* bytes);
  // The inverse: writes gguf_scalar_size(type()) bytes of a scalar to `dst`.
  void scalar_to_bytes(uint8_t* dst) const;

  GgufType type() const { return type_; }
  bool is_integer() const;
  bool is_float() const { return type_ == GgufType::F32 || type_ == GgufType::F64; }

  // Checked accessors: throw sd::Error naming the actual and wanted type, or a value out
  // of range. as_u64/as_i64 accept any integer type whose value fits.
  uint64_t as_u64() const;
  int64_t as_i64() const;
  double as_f64() const;  // f32 or f64
  bool as_bool() const;
  const std::string& as_string() const;

  // Arrays.
  GgufType elem_type() const;
  size_t array_size() const;
  GgufValue item(size_t i) const;
  // Scalar-element arrays: the packed little-endian elements.
  const std::vector<uint8_t>& packed_bytes() const;
  // String- and array-element arrays: the items.
  const std::vector<GgufValue>& items() const;
  std::vector<int64_t> as_i64_array() const;  // integer elements that fit in i64
  std::vector<double> as_f64_array() const;   // f32 or f64 elements
  std::vector<std::string> as_string_array() const;

  // Short human-readable form; long arrays are elided ("[1, 2, 3, ... (50000 items)]").
  std::string to_string(size_t max_items = 8) const;

  bool operator==(const GgufValue& o) const;

 private:
  struct Array {
    GgufType elem_type;
    size_t count = 0;
    std::vector<uint8_t> packed;   // scalar elements
    std::vector<GgufValue> items;  // string or array elements
  };
  // f32 is kept as float so NaN payloads survive a read-write round trip.
  using Storage = std::variant<uint64_t, int64_t, float, double, bool, std::string, Array>;

  GgufValue(GgufType t, Storage v) : type_(t), v_(std::move(v)) {}
  const Array& array_or_fail() const;

  template <typename T>
  static constexpr GgufType type_of() {
    if constexpr (std::is_same_v<T, uint8_t>) return GgufType::U8;
    if constexpr (std::is_same_v<T, int8_t>) return GgufType::I8;
    if constexpr (std::is_same_v<T, uint16_t>) return GgufType::U16;
    if constexpr (std::is_same_v<T, int16_t>) return GgufType::I16;
    if constexpr (std::is_same_v<T, uint32_t>) return GgufType::U32;
    if constexpr (std::is_same_v<T, int32_t>) return GgufType::I32;
    if constexpr (std::is_same_v<T, uint64_t>) return GgufType::U64;
    if constexpr (std::is_same_v<T, int64_t>) return GgufType::I64;
    if constexpr (std::is_same_v<T, float>) return GgufType::F32;
    if constexpr (std::is_same_v<T, double>) return GgufType::F64;
    static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>,
                  "numeric_array takes fixed-width integers, float or double");
  }

  GgufType type_;
  Storage v_;
};

}  // namespace sd::io
