// Mistral's own tokenizer file, tekken.json (what mistralai's repositories ship for Mistral
// Small 3.x, the text encoder of FLUX.2 dev, instead of a Hugging Face tokenizer.json): a
// tiktoken-style byte-level BPE given as token byte strings by rank, with no merge list.
//
// Its ids are the special tokens first (config.default_num_special_tokens of them: <unk>,
// <s>, </s>, [INST], ...), then the vocabulary by rank, up to config.default_vocab_size in
// all. The merges are derived from the ranks as Hugging Face's conversion does it: every
// token of two or more bytes is the merge of each split whose two halves are tokens, ranked
// by the merged token's rank (then by the halves' ranks), so encoding merges the pair whose
// result has the lowest rank first, as tiktoken does. The pre-tokenizer is tekken's regex.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "models/bpe_tokenizer.h"

namespace sd::models {

// Whether a parsed tokenizer file is a tekken.json (a "config" and a "vocab" array of ranked
// token bytes), not a Hugging Face tokenizer.json.
bool is_tekken_json(const nlohmann::json& data);

// The vocabulary as llama.cpp's GGUF keys would hold it, for BpeTokenizer::from_gguf_metadata.
// Throws sd::Error naming what is missing or malformed.
BpeGgufVocab tekken_vocab(const nlohmann::json& data);

}  // namespace sd::models
