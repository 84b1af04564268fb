// What the LLM-conditioned families (Z-Image, FLUX.2, Qwen-Image) share: the --llm decoder
// as their only text encoder, read from the files and checked to be the one the family takes
// (Qwen3 has q/k norms and no q/k/v biases, Qwen2.5-VL's text model the other way round),
// and run through an LlmConditioner in the family's prompt format.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/bpe_tokenizer.h"
#include "models/llm.h"
#include "pipeline/families/family.h"
#include "pipeline/llm_conditioner.h"

namespace sd::pipeline {

class LlmFamily : public Family {
 public:
  using Family::Family;
  std::vector<std::string> text_encoder_roots(const Architecture& arch) const override;

 protected:
  // --clip_l, --clip_g and --t5xxl are not read: a warning says so.
  void note_unused_encoders(const ModelFiles& files) const;
  // The --llm decoder of `arch` reading prompts in `format`, with the tokenizer of vocabulary
  // `which` found for it.
  std::unique_ptr<LlmConditioner> llm_prompt_encoder(
      const Architecture& arch, const ModelFiles& files, const NetworkPlaces& places,
      LlmPromptFormat format, const models::BpeVocabSearch& which = models::kQwenVocab) const;
};

// The --llm decoder as `preset` (its arch names the one expected) with every dimension from
// the files. Throws sd::Error naming --llm and `expected` ("Z-Image takes Qwen3-4B ...") when
// the file is another decoder or lacks a tensor.
models::LlmConfig llm_encoder_config(const ModelFiles& files, const models::LlmConfig& preset,
                                     const std::string& expected);

}  // namespace sd::pipeline
