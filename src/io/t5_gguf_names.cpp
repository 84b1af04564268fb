#include "io/t5_gguf_names.h"

#include <array>
#include <charconv>
#include <utility>

namespace sd::io {
namespace {

bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}

// What follows "enc.blk.N." in llama.cpp's T5 names, and the HF name below "block.N.".
constexpr std::array<std::pair<std::string_view, std::string_view>, 10> kBlockParts{{
    {"attn_q.", "layer.0.SelfAttention.q."},
    {"attn_k.", "layer.0.SelfAttention.k."},
    {"attn_v.", "layer.0.SelfAttention.v."},
    {"attn_o.", "layer.0.SelfAttention.o."},
    {"attn_rel_b.", "layer.0.SelfAttention.relative_attention_bias."},
    {"attn_norm.", "layer.0.layer_norm."},
    {"ffn_norm.", "layer.1.layer_norm."},
    {"ffn_gate.", "layer.1.DenseReluDense.wi_0."},
    {"ffn_up.", "layer.1.DenseReluDense.wi_1."},
    {"ffn_down.", "layer.1.DenseReluDense.wo."},
}};

}  // namespace

std::optional<std::string> t5_name_from_llama_cpp(std::string_view name) {
  if (starts_with(name, "token_embd.")) return "shared." + std::string(name.substr(11));
  if (starts_with(name, "enc.output_norm."))
    return "encoder.final_layer_norm." + std::string(name.substr(16));
  if (!starts_with(name, "enc.blk.")) return std::nullopt;
  std::string_view rest = name.substr(8);
  int block = 0;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), block);
  if (ec != std::errc() || end == rest.data() || end == rest.data() + rest.size() || *end != '.')
    return std::nullopt;
  rest.remove_prefix(static_cast<size_t>(end - rest.data()) + 1);
  for (const auto& [from, to] : kBlockParts) {
    if (starts_with(rest, from))
      return "encoder.block." + std::to_string(block) + "." + std::string(to) +
             std::string(rest.substr(from.size()));
  }
  return std::nullopt;
}

}  // namespace sd::io
