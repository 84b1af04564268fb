#include "weights/weight_type.h"

namespace sd::weights {

bool takes_weight_type(std::string_view name, int64_t ne0, DType stored, DType target) {
  if (stored == DType::I32 || target == DType::I32) return false;
  if (is_quantized(target) && ne0 % block_size(target) != 0) return false;
  for (std::string_view suffix : {".bias", ".scale", ".weight_scale"}) {
    if (name.size() >= suffix.size() && name.substr(name.size() - suffix.size()) == suffix) {
      return false;
    }
  }
  static constexpr std::string_view kKept[] = {
      // Flux
      "img_in.", "txt_in.", "time_in.", "vector_in.", "guidance_in.", "final_layer.",
      // MMDiT
      "x_embedder.", "t_embedder.", "y_embedder.", "pos_embed", "context_embedder.",
      // UNet
      "time_embed.", "label_emb.",
      // any embedding table
      "embedding",
      // ESRGAN (RRDBNet, Real-ESRGAN names): every conv outside the dense blocks
      "conv_first.", "conv_body.", "conv_up1.", "conv_up2.", "conv_hr.", "conv_last."};
  for (std::string_view k : kKept) {
    if (name.find(k) != std::string_view::npos) return false;
  }
  return true;
}

DType target_weight_type(std::string_view name, int64_t ne0, DType stored,
                         std::optional<DType> type, const std::vector<TensorTypeRule>& rules) {
  std::optional<DType> target = type;
  const std::string n(name);
  for (const TensorTypeRule& r : rules) {
    if (std::regex_search(n, r.regex)) {
      target = r.type;
      break;
    }
  }
  if (target && takes_weight_type(name, ne0, stored, *target)) return *target;
  return stored;
}

}  // namespace sd::weights
