#include "weights/lora_flux_names.h"

#include <array>
#include <charconv>
#include <utility>

namespace sd::weights {
namespace {

// Splits "<number>.<rest>"; false when `s` does not start so.
bool split_index(std::string_view s, int& index, std::string_view& rest) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), index);
  if (ec != std::errc() || end == s.data() || end == s.data() + s.size() || *end != '.')
    return false;
  rest = s.substr(static_cast<size_t>(end - s.data()) + 1);
  return true;
}

struct FluxPart {
  std::string_view bfl;
  std::array<std::string_view, 4> diffusers;  // whole weight: one; fused: one per part
};

constexpr FluxPart kDoubleBlock[] = {
    {"img_mod.lin", {"norm1.linear"}},
    {"txt_mod.lin", {"norm1_context.linear"}},
    {"img_attn.qkv", {"attn.to_q", "attn.to_k", "attn.to_v"}},
    {"txt_attn.qkv", {"attn.add_q_proj", "attn.add_k_proj", "attn.add_v_proj"}},
    {"img_attn.proj", {"attn.to_out.0"}},
    {"txt_attn.proj", {"attn.to_add_out"}},
    {"img_mlp.0", {"ff.net.0.proj"}},
    {"img_mlp.2", {"ff.net.2"}},
    {"txt_mlp.0", {"ff_context.net.0.proj"}},
    {"txt_mlp.2", {"ff_context.net.2"}},
};

constexpr FluxPart kSingleBlock[] = {
    {"linear1", {"attn.to_q", "attn.to_k", "attn.to_v", "proj_mlp"}},
    {"linear2", {"proj_out"}},
    {"modulation.lin", {"norm.linear"}},
};

constexpr std::pair<std::string_view, std::string_view> kFluxOutside[] = {
    {"time_in.in_layer", "time_text_embed.timestep_embedder.linear_1"},
    {"time_in.out_layer", "time_text_embed.timestep_embedder.linear_2"},
    {"vector_in.in_layer", "time_text_embed.text_embedder.linear_1"},
    {"vector_in.out_layer", "time_text_embed.text_embedder.linear_2"},
    {"guidance_in.in_layer", "time_text_embed.guidance_embedder.linear_1"},
    {"guidance_in.out_layer", "time_text_embed.guidance_embedder.linear_2"},
    {"txt_in", "context_embedder"},
    {"img_in", "x_embedder"},
    {"final_layer.linear", "proj_out"},
    {"final_layer.adaLN_modulation.1", "norm_out.linear"},
};

std::vector<FluxSpelling> block_spellings(std::string_view rest, const std::string& prefix,
                                          const FluxPart* parts, size_t n) {
  std::vector<FluxSpelling> out;
  for (size_t i = 0; i < n; ++i) {
    if (rest != parts[i].bfl) continue;
    const bool fused = !parts[i].diffusers[1].empty();
    for (size_t p = 0; p < parts[i].diffusers.size() && !parts[i].diffusers[p].empty(); ++p)
      out.push_back(
          {prefix + std::string(parts[i].diffusers[p]), fused ? static_cast<int>(p) : -1});
  }
  return out;
}

}  // namespace

std::vector<FluxSpelling> flux_diffusers_spellings(std::string_view bfl_base) {
  int index = 0;
  std::string_view rest;
  if (bfl_base.starts_with("double_blocks.") && split_index(bfl_base.substr(14), index, rest))
    return block_spellings(rest, "transformer_blocks." + std::to_string(index) + ".", kDoubleBlock,
                           std::size(kDoubleBlock));
  if (bfl_base.starts_with("single_blocks.") && split_index(bfl_base.substr(14), index, rest))
    return block_spellings(rest, "single_transformer_blocks." + std::to_string(index) + ".",
                           kSingleBlock, std::size(kSingleBlock));
  for (const auto& [bfl, diffusers] : kFluxOutside)
    if (bfl_base == bfl) return {{std::string(diffusers), -1}};
  return {};
}

RowRun flux_fused_rows(int part, int64_t in, int64_t out) {
  if (part < 3) return {part * in, in};
  return {3 * in, out - 3 * in};
}

}  // namespace sd::weights
