// LoRA in the ModelManager: merged into a weight when it becomes resident, so sampling
// runs at the speed of the plain model.
#include <algorithm>
#include <cstring>
#include <set>

#include "tensor/error.h"
#include "tensor/quant/quant.h"
#include "weights/model_manager.h"

namespace sd::weights {

const LoraFile& ModelManager::lora_file(const std::string& path) {
  auto it = lora_files_.find(path);
  if (it != lora_files_.end()) return it->second;
  std::map<std::string, Shape> model_weights;
  for (const auto& [name, source] : loader_.tensors()) model_weights[name] = source.ne;
  return lora_files_.emplace(path, read_lora(path, model_weights)).first->second;
}

std::vector<std::string> ModelManager::set_loras(const std::vector<LoraRequest>& loras,
                                                 bool* changed) {
  std::vector<std::string> warnings;
  std::map<std::string, LoraList> next;
  for (const LoraRequest& request : loras) {
    const LoraFile& file = lora_file(request.path);
    if (!file.unmatched.empty())
      warnings.push_back(
          format("LoRA '%s': %zu of its tensors change no weight of this model "
                 "and are ignored (e.g. '%s')",
                 request.path.c_str(), file.unmatched.size(), file.unmatched.front().c_str()));
    if (file.updates.empty())
      warnings.push_back(format("LoRA '%s' changes nothing in this model", request.path.c_str()));
    if (request.multiplier == 0.0f) continue;
    for (const LoraUpdate& u : file.updates) next[u.target].push_back({&u, request.multiplier});
  }
  // Weights whose merged value differs between the old and the new set go back to the file.
  std::set<std::string> differing;
  for (const auto& [name, list] : lora_targets_) {
    auto it = next.find(name);
    if (it == next.end() || it->second != list) differing.insert(name);
  }
  for (const auto& [name, list] : next)
    if (!lora_targets_.count(name)) differing.insert(name);
  bool dropped = false;
  for (const std::string& name : differing) {
    auto it = resident_.find(name);
    if (it == resident_.end()) continue;
    drop(it);
    dropped = true;
  }
  lora_targets_ = std::move(next);
  if (changed) *changed = dropped;
  return warnings;
}

void ModelManager::fill_merged(const std::string& name, Resident& r) {
  Tensor& t = r.tensor;
  const int64_t n = t.nelements();
  std::vector<float> w(static_cast<size_t>(n));
  loader_.read(name, DType::F32, w.data());
  for (const auto& [update, multiplier] : lora_targets_.at(name))
    add_lora_delta(*update, multiplier, t.ne, w.data());
  std::vector<uint8_t> converted;
  void* dst = r.buffer->is_host() ? t.data : nullptr;
  if (!dst) {
    converted.resize(t.nbytes());
    dst = converted.data();
  }
  if (t.type == DType::F32)
    std::memcpy(dst, w.data(), t.nbytes());
  else
    quantize_rows(t.type, w.data(), dst, n / t.ne[0], t.ne[0]);
  if (!converted.empty()) tensor_set(t, converted.data());
}

}  // namespace sd::weights
