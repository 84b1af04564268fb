#include "weights/lora_sd3_names.h"

#include <array>
#include <charconv>
#include <string>
#include <utility>

namespace sd::weights {
namespace {

struct MmditPart {
  std::string_view mmdit;
  std::array<std::string_view, 3> diffusers;  // whole weight: one; fused qkv: q, k, v
};

// Below joint_blocks.N. / transformer_blocks.N.: x_block is the image stream, context_block
// the text stream; SD3.5 Medium's x_block has a second, image-only attention (attn2).
constexpr MmditPart kJointBlock[] = {
    {"x_block.adaLN_modulation.1", {"norm1.linear"}},
    {"context_block.adaLN_modulation.1", {"norm1_context.linear"}},
    {"x_block.attn.qkv", {"attn.to_q", "attn.to_k", "attn.to_v"}},
    {"context_block.attn.qkv", {"attn.add_q_proj", "attn.add_k_proj", "attn.add_v_proj"}},
    {"x_block.attn2.qkv", {"attn2.to_q", "attn2.to_k", "attn2.to_v"}},
    {"x_block.attn.proj", {"attn.to_out.0"}},
    {"context_block.attn.proj", {"attn.to_add_out"}},
    {"x_block.attn2.proj", {"attn2.to_out.0"}},
    {"x_block.mlp.fc1", {"ff.net.0.proj"}},
    {"x_block.mlp.fc2", {"ff.net.2"}},
    {"context_block.mlp.fc1", {"ff_context.net.0.proj"}},
    {"context_block.mlp.fc2", {"ff_context.net.2"}},
};

constexpr std::pair<std::string_view, std::string_view> kMmditOutside[] = {
    {"x_embedder.proj", "pos_embed.proj"},
    {"t_embedder.mlp.0", "time_text_embed.timestep_embedder.linear_1"},
    {"t_embedder.mlp.2", "time_text_embed.timestep_embedder.linear_2"},
    {"y_embedder.mlp.0", "time_text_embed.text_embedder.linear_1"},
    {"y_embedder.mlp.2", "time_text_embed.text_embedder.linear_2"},
    {"context_embedder", "context_embedder"},
    {"final_layer.linear", "proj_out"},
    {"final_layer.adaLN_modulation.1", "norm_out.linear"},
};

constexpr std::string_view kBlocks = "joint_blocks.";

}  // namespace

std::vector<FluxSpelling> sd3_diffusers_spellings(std::string_view mmdit_base) {
  std::vector<FluxSpelling> out;
  if (mmdit_base.substr(0, kBlocks.size()) == kBlocks) {
    std::string_view s = mmdit_base.substr(kBlocks.size());
    int index = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), index);
    if (ec != std::errc() || end == s.data() || end == s.data() + s.size() || *end != '.')
      return out;
    const std::string_view rest = s.substr(static_cast<size_t>(end - s.data()) + 1);
    const std::string prefix = "transformer_blocks." + std::to_string(index) + ".";
    for (const MmditPart& p : kJointBlock) {
      if (rest != p.mmdit) continue;
      const bool fused = !p.diffusers[1].empty();
      for (size_t i = 0; i < p.diffusers.size() && !p.diffusers[i].empty(); ++i)
        out.push_back({prefix + std::string(p.diffusers[i]), fused ? static_cast<int>(i) : -1});
    }
    return out;
  }
  for (const auto& [mmdit, diffusers] : kMmditOutside)
    if (mmdit_base == mmdit) out.push_back({std::string(diffusers), -1});
  return out;
}

}  // namespace sd::weights
