// LoRA in the ModelManager: merged into a weight when it becomes resident, so sampling
// runs at the speed of the plain model.
#include <algorithm>
#include <cstring>
#include <set>

#include "io/name_conversion.h"
#include "tensor/error.h"
#include "tensor/ops/cast.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/view.h"
#include "tensor/quant/quant.h"
#include "weights/lora_names.h"
#include "weights/model_manager.h"

namespace sd::weights {
namespace {

// A LoRA that changes nothing, or nothing of the diffusion network while it was made for
// another family's, is refused: whoever passes a LoRA expects it to apply.
void check_lora_fits(const LoraFile& file, std::string_view model,
                     const std::optional<LoraNetworkGuess>& model_network) {
  const std::string this_model =
      model.empty() ? std::string("this model") : "this " + std::string(model) + " model";
  const bool changes_diffusion =
      std::any_of(file.updates.begin(), file.updates.end(),
                  [](const LoraUpdate& u) { return u.target.rfind(io::kUnetRoot, 0) == 0; });
  if (!changes_diffusion) {
    const std::optional<LoraNetworkGuess> g = guess_lora_network(file.unmatched);
    // Names of this model's own network that missed (an SDXL LoRA on SD 1.x) are no
    // other family's.
    if (g && (!model_network || g->network != model_network->network))
      fail(
          "LoRA '%s' is made for %s (its tensor '%s'), not for %s, whose diffusion weights "
          "it does not change; pass a LoRA made for this model",
          file.path.c_str(), g->network.c_str(), g->example_key.c_str(), this_model.c_str());
  }
  SD_CHECK(!file.updates.empty(),
           "LoRA '%s' changes no weight of %s (%s); pass a LoRA made for this model",
           file.path.c_str(), this_model.c_str(),
           file.unmatched.empty() ? "it holds no LoRA tensors"
                                  : ("its tensors, e.g. '" + file.unmatched.front() +
                                     "', name none of the model's weights")
                                        .c_str());
}

}  // namespace

const LoraFile& ModelManager::lora_file(const std::string& path) {
  auto it = lora_files_.find(path);
  if (it != lora_files_.end()) return it->second;
  std::map<std::string, Shape> model_weights;
  for (const auto& [name, source] : loader_.tensors()) model_weights[name] = source.ne;
  return lora_files_.emplace(path, read_lora(path, model_weights)).first->second;
}

std::vector<std::string> ModelManager::set_loras(const std::vector<LoraRequest>& loras,
                                                 bool* changed, std::string_view model) {
  // Every file is read and checked before any weight changes.
  if (!loras.empty()) {
    std::vector<std::string> names;
    for (const auto& [name, source] : loader_.tensors()) names.push_back(name);
    const std::optional<LoraNetworkGuess> model_network = guess_lora_network(names);
    for (const LoraRequest& request : loras)
      check_lora_fits(lora_file(request.path), model, model_network);
  }
  std::vector<std::string> warnings;
  std::map<std::string, LoraList> next;
  for (const LoraRequest& request : loras) {
    const LoraFile& file = lora_file(request.path);
    if (!file.unmatched.empty())
      warnings.push_back(
          format("LoRA '%s': %zu of its tensors change no weight of this model "
                 "and are ignored (e.g. '%s')",
                 request.path.c_str(), file.unmatched.size(), file.unmatched.front().c_str()));
    if (request.multiplier == 0.0f) continue;
    size_t retargeted = 0;
    for (const LoraUpdate& u : file.updates) {
      if (request.root.empty()) {
        next[u.target].push_back({&u, request.multiplier});
        continue;
      }
      if (!u.target.starts_with(io::kUnetRoot)) continue;
      const std::string target = request.root + u.target.substr(io::kUnetRoot.size());
      if (!loader_.contains(target) || loader_.find(target).ne != u.target_ne) continue;
      next[target].push_back({&u, request.multiplier});
      ++retargeted;
    }
    SD_CHECK(request.root.empty() || retargeted > 0,
             "LoRA '%s' changes no weight of the network under %s (its diffusion weights do not "
             "fit that network); pass a LoRA made for it",
             request.path.c_str(), request.root.c_str());
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
  if (dropped)
    for (Module& m : modules_) m.loaded = false;  // the next use reads them in parallel
  runtime_factors_.clear();
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
  loader_.evict(name);  // the file's pages were only the source
}

bool ModelManager::lora_at_runtime(const std::string& name) const {
  switch (options_.lora_mode) {
    case ModelManagerOptions::LoraMode::Merge:
      return false;
    case ModelManagerOptions::LoraMode::AtRuntime:
      return true;
    case ModelManagerOptions::LoraMode::Auto:
      return is_quantized(resident_type(name));
  }
  return false;
}

Tensor* ModelManager::runtime_constant(Context& ctx, const std::string& key, const Shape& ne,
                                       const std::vector<float>& values, Device& device) {
  auto it = runtime_factors_.find(key);
  if (it == runtime_factors_.end()) {
    Resident r;
    r.tensor.type = DType::F32;
    r.tensor.ne = ne;
    r.tensor.nb = contiguous_strides(DType::F32, ne);
    r.tensor.name = key;
    r.buffer = device.buffer_type().allocate(r.tensor.nbytes());
    bind_tensor(r.tensor, *r.buffer, 0);
    tensor_set(r.tensor, values.data());
    it = runtime_factors_.emplace(key, std::move(r)).first;
  }
  Tensor* leaf = ctx.new_tensor(DType::F32, ne, key);
  leaf->buffer = it->second.tensor.buffer;
  leaf->data = it->second.tensor.data;
  return leaf;
}

Tensor* ModelManager::add_runtime_loras(Context& ctx, const std::string& name, Tensor* weight,
                                        Device& device) {
  Tensor* w = cast(ctx, weight, DType::F32);
  for (const auto& [u, multiplier] : lora_targets_.at(name)) {
    const std::string key = name + "|" + u->keys.front();
    const int64_t n = weight->nelements();
    const bool low_rank = u->kind == LoraKind::LowRank && u->mid.empty() && u->rank > 0;
    const int64_t k = low_rank ? static_cast<int64_t>(u->down.values.size()) / u->rank : 0;
    const int64_t out = low_rank ? static_cast<int64_t>(u->up.values.size()) / u->rank : 0;
    Tensor* delta = nullptr;
    float factor = multiplier;
    if (low_rank && k * out == n) {
      // delta [K, out] = down^T [r, K] x up [r, out] in the engine's matmul, K being the
      // weight's inner size (in, or in * kh * kw for a conv).
      std::vector<float> down_t(u->down.values.size());
      for (int64_t a = 0; a < u->rank; ++a)
        for (int64_t i = 0; i < k; ++i) down_t[i * u->rank + a] = u->down.values[a * k + i];
      Tensor* down = runtime_constant(ctx, key + "|down", make_shape({u->rank, k}), down_t, device);
      Tensor* up =
          runtime_constant(ctx, key + "|up", make_shape({u->rank, out}), u->up.values, device);
      delta = matmul(ctx, down, up);
      factor *= u->scale;
    } else {
      // LoHa, LoKr, Tucker cores, full differences: the product (scale included) made once
      // on the host.
      delta = runtime_constant(ctx, key + "|delta", make_shape({n}), lora_delta(*u), device);
    }
    w = add(ctx, w, scale(ctx, reshape(ctx, delta, weight->ne), factor));
  }
  return w;
}

}  // namespace sd::weights
