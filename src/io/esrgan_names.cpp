#include "io/esrgan_names.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <string_view>

namespace sd::io {
namespace {

// The decimal number at the start of `s` and what follows it; nullopt if none.
std::optional<std::pair<int, std::string_view>> leading_number(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && n < 6 && std::isdigit(static_cast<unsigned char>(s[n]))) ++n;
  if (n == 0 || (n < s.size() && std::isdigit(static_cast<unsigned char>(s[n]))))
    return std::nullopt;
  return std::make_pair(std::stoi(std::string(s.substr(0, n))), s.substr(n));
}

// The wrapper a checkpoint keeps its weights under: the EMA copy first, as Real-ESRGAN's
// inference picks it.
std::string_view wrapper_of(const std::vector<std::string>& stored) {
  for (std::string_view prefix : {"params_ema.", "params.", "module."})
    for (const std::string& name : stored)
      if (name.starts_with(prefix)) return prefix;
  return {};
}

// Original ESRGAN: "model.1.sub.N.RDBR.convC.0.P" and "model.1.sub.K.P" (the trunk conv).
std::optional<std::string> trunk_name(std::string_view rest) {
  auto block = leading_number(rest);
  if (!block || !block->second.starts_with(".")) return std::nullopt;
  std::string_view tail = block->second.substr(1);
  if (tail == "weight" || tail == "bias") return "conv_body." + std::string(tail);
  // RDBr.convc.0.weight
  if (!tail.starts_with("RDB")) return std::nullopt;
  auto rdb = leading_number(tail.substr(3));
  if (!rdb || !rdb->second.starts_with(".conv")) return std::nullopt;
  auto conv = leading_number(rdb->second.substr(5));
  if (!conv || !conv->second.starts_with(".0.")) return std::nullopt;
  return "body." + std::to_string(block->first) + ".rdb" + std::to_string(rdb->first) + ".conv" +
         std::to_string(conv->first) + "." + std::string(conv->second.substr(3));
}

}  // namespace

std::map<std::string, std::string> esrgan_tensor_names(const std::vector<std::string>& stored) {
  const std::string_view wrapper = wrapper_of(stored);
  std::map<std::string, std::string> out;
  // Original ESRGAN layout: the Sequential indices after the trunk, ascending.
  std::vector<int> tail_layers;
  std::vector<std::pair<std::string_view, std::string>> old_layout;  // (name in model., stored)
  for (const std::string& name : stored) {
    if (!name.starts_with(wrapper)) continue;
    const std::string_view n = std::string_view(name).substr(wrapper.size());
    if (!n.starts_with("model.")) {
      out[std::string(n)] = name;
      continue;
    }
    const std::string_view rest = n.substr(6);
    if (rest.starts_with("0.")) {
      out["conv_first." + std::string(rest.substr(2))] = name;
    } else if (rest.starts_with("1.sub.")) {
      if (auto t = trunk_name(rest.substr(6))) out[*t] = name;
    } else if (auto layer = leading_number(rest); layer && layer->second.starts_with(".")) {
      if (std::find(tail_layers.begin(), tail_layers.end(), layer->first) == tail_layers.end())
        tail_layers.push_back(layer->first);
      old_layout.emplace_back(rest, name);
    }
  }
  // The last two layers are the HR and output convs; those before them upsample.
  std::sort(tail_layers.begin(), tail_layers.end());
  const size_t n = tail_layers.size();
  for (const auto& [rest, name] : old_layout) {
    auto layer = leading_number(rest);
    const size_t pos =
        std::find(tail_layers.begin(), tail_layers.end(), layer->first) - tail_layers.begin();
    std::string layer_name;
    if (pos + 1 == n) {
      layer_name = "conv_last";
    } else if (pos + 2 == n) {
      layer_name = "conv_hr";
    } else {
      layer_name = "conv_up" + std::to_string(pos + 1);
    }
    out[layer_name + std::string(layer->second)] = name;
  }
  return out;
}

}  // namespace sd::io
