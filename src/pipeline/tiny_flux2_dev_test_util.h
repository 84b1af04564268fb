// A tiny FLUX.2 dev as the files it runs from: the transformer with its guidance embedder
// and 48 single blocks (what tells dev from klein), a Mistral-style LLM of 31 layers (dev
// reads the states after layer 30) under Hugging Face names, the FLUX.2 autoencoder, and a
// byte-level BPE tokenizer.json with Mistral's control tokens. Heads of 128 channels as
// released (the rotary axes and Mistral's fixed head width need them).
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include "pipeline/tiny_flux2_test_util.h"

namespace sd::pipeline::test {

inline models::LlmConfig tiny_mistral_config() {
  models::LlmConfig c = models::LlmConfig::mistral_small_3_2();
  c.vocab_size = 272;
  c.hidden = 32;
  c.intermediate = 48;
  c.layers = 31;
  c.heads = 2;
  c.kv_heads = 1;
  return c;
}

inline models::FluxConfig tiny_flux2_dev_config() {
  models::FluxConfig c = tiny_flux2_config();
  c.guidance_embed = true;
  c.depth_single = 48;
  c.mlp_hidden = 24;
  c.context_dim = 3 * tiny_mistral_config().hidden;
  return c;
}

// The tiny byte-level tokenizer with the control tokens of Mistral's template.
inline std::string tiny_mistral_tokenizer_json() {
  return tiny_bpe_tokenizer_json_with(
      {"<s>", "[INST]", "[/INST]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]"});
}

inline TinyFlux2Files write_tiny_flux2_dev(const std::string& dir,
                                           const models::FluxConfig& fc = tiny_flux2_dev_config(),
                                           const models::LlmConfig& lc = tiny_mistral_config()) {
  TinyFlux2Files f = write_tiny_flux2(dir, fc, lc);
  const std::string dit = dir + "/flux2_dev.safetensors", llm = dir + "/mistral.safetensors";
  std::filesystem::rename(f.dit, dit);
  std::filesystem::rename(f.llm, llm);
  f.dit = dit;
  f.llm = llm;
  std::ofstream(f.tokenizer) << tiny_mistral_tokenizer_json();
  return f;
}

}  // namespace sd::pipeline::test
