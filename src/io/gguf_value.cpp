#include "io/gguf_value.h"

#include <array>
#include <cstring>

#include "tensor/error.h"

namespace sd::io {

namespace {

struct TypeInfo {
  std::string_view name;
  size_t size;
};

constexpr std::array<TypeInfo, 13> kTypes = {{
    {"u8", 1},
    {"i8", 1},
    {"u16", 2},
    {"i16", 2},
    {"u32", 4},
    {"i32", 4},
    {"f32", 4},
    {"bool", 1},
    {"string", 0},
    {"array", 0},
    {"u64", 8},
    {"i64", 8},
    {"f64", 8},
}};

bool is_signed(GgufType t) {
  return t == GgufType::I8 || t == GgufType::I16 || t == GgufType::I32 || t == GgufType::I64;
}

bool is_scalar(GgufType t) {
  return t != GgufType::String && t != GgufType::Array;
}

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

std::string mismatch(GgufType have, const char* want) {
  return format("[gguf] value is %s, not %s", std::string(gguf_type_name(have)).c_str(), want);
}

}  // namespace

std::string_view gguf_type_name(GgufType t) {
  auto i = static_cast<size_t>(t);
  return i < kTypes.size() ? kTypes[i].name : "unknown";
}

std::optional<GgufType> gguf_type_from_id(uint32_t id) {
  if (id >= kTypes.size()) return std::nullopt;
  return static_cast<GgufType>(id);
}

size_t gguf_scalar_size(GgufType t) {
  auto i = static_cast<size_t>(t);
  return i < kTypes.size() ? kTypes[i].size : 0;
}

GgufValue GgufValue::scalar_from_bytes(GgufType t, const uint8_t* p) {
  switch (t) {
    case GgufType::U8:
      return u8(load<uint8_t>(p));
    case GgufType::I8:
      return i8(load<int8_t>(p));
    case GgufType::U16:
      return u16(load<uint16_t>(p));
    case GgufType::I16:
      return i16(load<int16_t>(p));
    case GgufType::U32:
      return u32(load<uint32_t>(p));
    case GgufType::I32:
      return i32(load<int32_t>(p));
    case GgufType::U64:
      return u64(load<uint64_t>(p));
    case GgufType::I64:
      return i64(load<int64_t>(p));
    case GgufType::F32:
      return f32(load<float>(p));
    case GgufType::F64:
      return f64(load<double>(p));
    case GgufType::Bool:
      return boolean(p[0] != 0);
    default:
      break;
  }
  fail("[gguf] %s is not a scalar type", std::string(gguf_type_name(t)).c_str());
}

GgufValue GgufValue::array(GgufType elem_type, std::vector<GgufValue> items) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].type_ != elem_type) {
      fail("[gguf] array of %s holds a %s at index %zu (make every item the same type)",
           std::string(gguf_type_name(elem_type)).c_str(),
           std::string(gguf_type_name(items[i].type_)).c_str(), i);
    }
  }
  Array a{elem_type, items.size(), {}, {}};
  if (!is_scalar(elem_type)) {
    a.items = std::move(items);
    return {GgufType::Array, std::move(a)};
  }
  const size_t size = gguf_scalar_size(elem_type);
  a.packed.resize(items.size() * size);
  for (size_t i = 0; i < items.size(); ++i) items[i].scalar_to_bytes(a.packed.data() + i * size);
  return {GgufType::Array, std::move(a)};
}

void GgufValue::scalar_to_bytes(uint8_t* dst) const {
  const size_t size = gguf_scalar_size(type_);
  // Little-endian host: the low bytes of the widened integer are the narrow value.
  if (auto* u = std::get_if<uint64_t>(&v_)) return void(std::memcpy(dst, u, size));
  if (auto* n = std::get_if<int64_t>(&v_)) return void(std::memcpy(dst, n, size));
  if (auto* f = std::get_if<float>(&v_)) return void(std::memcpy(dst, f, size));
  if (auto* d = std::get_if<double>(&v_)) return void(std::memcpy(dst, d, size));
  if (auto* b = std::get_if<bool>(&v_)) return void(*dst = *b ? 1 : 0);
  throw Error(mismatch(type_, "a scalar"));
}

GgufValue GgufValue::string_array(const std::vector<std::string>& items) {
  Array a{GgufType::String, items.size(), {}, {}};
  a.items.reserve(items.size());
  for (const auto& s : items) a.items.push_back(string(s));
  return {GgufType::Array, std::move(a)};
}

GgufValue GgufValue::packed_array(GgufType elem_type, const void* data, size_t count) {
  if (!is_scalar(elem_type)) {
    fail("[gguf] packed_array takes scalar elements, not %s",
         std::string(gguf_type_name(elem_type)).c_str());
  }
  Array a{elem_type, count, {}, {}};
  const auto* p = static_cast<const uint8_t*>(data);
  a.packed.assign(p, p + count * gguf_scalar_size(elem_type));
  return {GgufType::Array, std::move(a)};
}

bool GgufValue::is_integer() const {
  return std::holds_alternative<uint64_t>(v_) || std::holds_alternative<int64_t>(v_);
}

uint64_t GgufValue::as_u64() const {
  if (auto* u = std::get_if<uint64_t>(&v_)) return *u;
  if (auto* i = std::get_if<int64_t>(&v_)) {
    if (*i >= 0) return static_cast<uint64_t>(*i);
    fail("[gguf] value %lld is negative where an unsigned integer is wanted",
         static_cast<long long>(*i));
  }
  throw Error(mismatch(type_, "an integer"));
}

int64_t GgufValue::as_i64() const {
  if (auto* i = std::get_if<int64_t>(&v_)) return *i;
  if (auto* u = std::get_if<uint64_t>(&v_)) {
    if (*u <= static_cast<uint64_t>(INT64_MAX)) return static_cast<int64_t>(*u);
    fail("[gguf] value %llu does not fit in i64", static_cast<unsigned long long>(*u));
  }
  throw Error(mismatch(type_, "an integer"));
}

double GgufValue::as_f64() const {
  if (auto* f = std::get_if<float>(&v_)) return *f;
  if (auto* d = std::get_if<double>(&v_)) return *d;
  throw Error(mismatch(type_, "a float"));
}

bool GgufValue::as_bool() const {
  if (auto* b = std::get_if<bool>(&v_)) return *b;
  throw Error(mismatch(type_, "a bool"));
}

const std::string& GgufValue::as_string() const {
  if (auto* s = std::get_if<std::string>(&v_)) return *s;
  throw Error(mismatch(type_, "a string"));
}

const GgufValue::Array& GgufValue::array_or_fail() const {
  if (auto* a = std::get_if<Array>(&v_)) return *a;
  throw Error(mismatch(type_, "an array"));
}

GgufType GgufValue::elem_type() const {
  return array_or_fail().elem_type;
}
size_t GgufValue::array_size() const {
  return array_or_fail().count;
}

GgufValue GgufValue::item(size_t i) const {
  const Array& a = array_or_fail();
  if (i >= a.count) fail("[gguf] array index %zu out of range (%zu items)", i, a.count);
  if (!is_scalar(a.elem_type)) return a.items[i];
  return scalar_from_bytes(a.elem_type, a.packed.data() + i * gguf_scalar_size(a.elem_type));
}

const std::vector<uint8_t>& GgufValue::packed_bytes() const {
  const Array& a = array_or_fail();
  if (!is_scalar(a.elem_type)) throw Error(mismatch(a.elem_type, "a scalar element type"));
  return a.packed;
}

const std::vector<GgufValue>& GgufValue::items() const {
  const Array& a = array_or_fail();
  if (is_scalar(a.elem_type)) throw Error(mismatch(a.elem_type, "string or array elements"));
  return a.items;
}

std::vector<int64_t> GgufValue::as_i64_array() const {
  const Array& a = array_or_fail();
  std::vector<int64_t> out(a.count);
  for (size_t i = 0; i < a.count; ++i) out[i] = item(i).as_i64();
  return out;
}

std::vector<double> GgufValue::as_f64_array() const {
  const Array& a = array_or_fail();
  std::vector<double> out(a.count);
  for (size_t i = 0; i < a.count; ++i) out[i] = item(i).as_f64();
  return out;
}

std::vector<std::string> GgufValue::as_string_array() const {
  std::vector<std::string> out;
  for (const GgufValue& v : items()) out.push_back(v.as_string());
  return out;
}

std::string GgufValue::to_string(size_t max_items) const {
  switch (type_) {
    case GgufType::String: {
      const std::string& s = std::get<std::string>(v_);
      return "\"" + (s.size() > 80 ? s.substr(0, 77) + "..." : s) + "\"";
    }
    case GgufType::Bool:
      return std::get<bool>(v_) ? "true" : "false";
    case GgufType::F32:
      return format("%.9g", static_cast<double>(std::get<float>(v_)));
    case GgufType::F64:
      return format("%.17g", std::get<double>(v_));
    case GgufType::Array: {
      const Array& a = std::get<Array>(v_);
      std::string s = "[";
      for (size_t i = 0; i < a.count && i < max_items; ++i) {
        if (i > 0) s += ", ";
        s += item(i).to_string(max_items);
      }
      if (a.count > max_items) s += format(", ... (%zu items)", a.count);
      return s + "]";
    }
    default:
      return is_signed(type_) ? std::to_string(std::get<int64_t>(v_))
                              : std::to_string(std::get<uint64_t>(v_));
  }
}

bool GgufValue::operator==(const GgufValue& o) const {
  if (type_ != o.type_) return false;
  if (const auto* a = std::get_if<Array>(&v_)) {
    const Array& b = std::get<Array>(o.v_);
    return a->elem_type == b.elem_type && a->count == b.count && a->packed == b.packed &&
           a->items == b.items;
  }
  // Floats compare bitwise, so NaNs read back compare equal and -0 differs from 0.
  if (const auto* f = std::get_if<float>(&v_)) {
    float g = std::get<float>(o.v_);
    return std::memcmp(f, &g, sizeof(float)) == 0;
  }
  if (const auto* d = std::get_if<double>(&v_)) {
    double e = std::get<double>(o.v_);
    return std::memcmp(d, &e, sizeof(double)) == 0;
  }
  if (const auto* s = std::get_if<std::string>(&v_)) return *s == std::get<std::string>(o.v_);
  if (const auto* b = std::get_if<bool>(&v_)) return *b == std::get<bool>(o.v_);
  if (const auto* i = std::get_if<int64_t>(&v_)) return *i == std::get<int64_t>(o.v_);
  return std::get<uint64_t>(v_) == std::get<uint64_t>(o.v_);
}

}  // namespace sd::io
