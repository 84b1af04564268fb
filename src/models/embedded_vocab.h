// Tokenizer vocabularies compiled into the library (data/vocab/), for when the user has
// given or placed none: a checkpoint then runs from its weight files alone.
#pragma once

#include <string>

namespace sd::models {

// OpenAI CLIP's BPE merge list, as bpe_simple_vocab_16e6.txt holds it.
std::string embedded_clip_merges();
// Qwen2/2.5/3's tokenizer.json text.
std::string embedded_qwen_tokenizer_json();

}  // namespace sd::models
