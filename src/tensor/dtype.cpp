#include "tensor/dtype.h"

#include <array>
#include <cctype>

namespace sd {

namespace {

// ggml_type ids and block geometry from the GGUF specification.
constexpr std::array<DTypeInfo, static_cast<size_t>(DType::Count)> kInfo = {{
    {"f32", 1, 4, 0, false},
    {"f16", 1, 2, 1, false},
    {"bf16", 1, 2, 30, false},
    {"i32", 1, 4, 26, false},
    {"q4_0", 32, 2 + 16, 2, true},
    {"q4_1", 32, 2 + 2 + 16, 3, true},
    {"q5_0", 32, 2 + 4 + 16, 6, true},
    {"q5_1", 32, 2 + 2 + 4 + 16, 7, true},
    {"q8_0", 32, 2 + 32, 8, true},
    {"q2_K", 256, 16 + 64 + 2 + 2, 10, true},
    {"q3_K", 256, 32 + 64 + 12 + 2, 11, true},
    {"q4_K", 256, 2 + 2 + 12 + 128, 12, true},
    {"q5_K", 256, 2 + 2 + 12 + 32 + 128, 13, true},
    {"q6_K", 256, 128 + 64 + 16 + 2, 14, true},
    {"q8_K", 256, 4 + 256 + 32, 15, true},
}};

bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

}  // namespace

const DTypeInfo& dtype_info(DType t) {
  return kInfo[static_cast<size_t>(t)];
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (size_t i = 0; i < kInfo.size(); ++i) {
    if (iequal(kInfo[i].name, name)) return static_cast<DType>(i);
  }
  return std::nullopt;
}

std::optional<DType> dtype_from_gguf_id(uint32_t id) {
  for (size_t i = 0; i < kInfo.size(); ++i) {
    if (kInfo[i].gguf_id == id) return static_cast<DType>(i);
  }
  return std::nullopt;
}

}  // namespace sd
