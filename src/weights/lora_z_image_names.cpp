#include "weights/lora_z_image_names.h"

#include <string>

namespace sd::weights {
namespace {

// A block of the joint stream or of either refiner: "<stream>.<N>.".
bool in_block(std::string_view base) {
  for (std::string_view stream : {"layers.", "noise_refiner.", "context_refiner."}) {
    if (base.substr(0, stream.size()) != stream) continue;
    const std::string_view rest = base.substr(stream.size());
    size_t digits = 0;
    while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
    return digits > 0 && digits < rest.size() && rest[digits] == '.';
  }
  return false;
}

}  // namespace

std::vector<FluxSpelling> z_image_diffusers_spellings(std::string_view base) {
  std::vector<FluxSpelling> out;
  const std::string b(base);
  if (in_block(base) && base.ends_with(".attention.qkv")) {
    const std::string stem = b.substr(0, b.size() - 3);  // "....attention."
    out.push_back({stem + "to_q", 0});
    out.push_back({stem + "to_k", 1});
    out.push_back({stem + "to_v", 2});
  } else if (in_block(base) && base.ends_with(".attention.out")) {
    out.push_back({b.substr(0, b.size() - 3) + "to_out.0", -1});
  } else if (base == "x_embedder") {
    out.push_back({"all_x_embedder.2-1", -1});
  } else if (base.substr(0, 12) == "final_layer.") {
    out.push_back({"all_final_layer.2-1." + b.substr(12), -1});
  }
  return out;
}

}  // namespace sd::weights
