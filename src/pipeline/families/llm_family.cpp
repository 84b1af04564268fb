#include "pipeline/families/llm_family.h"

#include "io/name_conversion.h"
#include "pipeline/families/tokenizers.h"
#include "tensor/error.h"

namespace sd::pipeline {

models::LlmConfig llm_encoder_config(const ModelFiles& files, const models::LlmConfig& preset,
                                     const std::string& expected) {
  const ShapeOf shape_of = files.shape_of();
  const std::string layer0 = std::string(io::kLlmRoot) + "model.layers.0.self_attn.";
  const bool qk_norm = shape_of(layer0 + "q_norm.weight").has_value();
  const bool qkv_bias = shape_of(layer0 + "q_proj.bias").has_value();
  // What tells the decoders apart in their first attention block.
  const bool want_norms = preset.arch == models::LlmArch::Qwen3;
  const bool want_bias = preset.arch == models::LlmArch::Qwen2_5_VL;
  SD_CHECK(qk_norm == want_norms && qkv_bias == want_bias,
           "the --llm file is not a %s (it has %s q/k norms and %s q/k/v biases): %s",
           models::llm_arch_name(preset.arch), qk_norm ? "" : "no", qkv_bias ? "" : "no",
           expected.c_str());
  try {
    return models::llm_config_from_shapes(preset, io::kLlmRoot,
                                          [&](const std::string& n) { return shape_of(n); });
  } catch (const Error& e) {
    fail("the --llm file: %s", e.what());
  }
}

std::vector<std::string> LlmFamily::text_encoder_roots(const Architecture&) const {
  return {std::string(io::kLlmRoot)};
}

void LlmFamily::note_unused_encoders(const ModelFiles& files) const {
  if (!files.options.clip_l.empty() || !files.options.clip_g.empty() ||
      !files.options.t5xxl.empty())
    files.note(std::string("warning: ") + io::family_name(id()) +
               " reads no CLIP or T5 encoder; --clip_l/--clip_g/--t5xxl are not used");
}

std::unique_ptr<LlmConditioner> LlmFamily::llm_prompt_encoder(
    const Architecture& arch, const ModelFiles& files, const NetworkPlaces& places,
    LlmPromptFormat format, const models::BpeVocabSearch& which) const {
  return std::make_unique<LlmConditioner>(llm_tokenizer(files, which), *arch.llm, std::move(format),
                                          places.weights, places.text_backend,
                                          std::string(io::kLlmRoot));
}

}  // namespace sd::pipeline
